package rewind

import "github.com/zerofs/zerofs/merge"

// mergeKept drops from a merge's results the paths the ignore rules
// ignore (ignore.go), as what the workspace has now or as what the fork
// would make them: a merge neither brings them in nor finds them in
// conflict, and leaves the workspace's as they are.
func (e *Engine) mergeKept(results []merge.Result) []merge.Result {
	m := e.ignoreRules()
	if m == nil {
		return results
	}
	kept := results[:0]
	for _, r := range results {
		if e.ignored(m, r.Path, "", -1, false) {
			continue
		}
		if r.Node.Kind != merge.Absent && e.ignored(m, r.Path, kindName(r.Node.Kind), -1, false) {
			continue
		}
		kept = append(kept, r)
	}
	return kept
}
