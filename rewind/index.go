package rewind

import (
	"path"
	"sort"
	"sync"
)

// record is one checkpoint's before-state of one path.
type record struct {
	seq Seq
	st  FileState
}

// Index answers "what was at P at T" from the checkpoints. Per path it keeps
// the records of the checkpoints that name it, in increasing sequence (events
// arrive in order, so appending keeps them sorted); per directory, the names
// ever recorded under it. Lookups are a map access and a binary search.
type Index struct {
	mu sync.RWMutex // guards paths, children
	// paths maps a workspace path to its records, sorted by seq.
	paths map[string][]record
	// children maps a directory path ("" is the root) to every name ever
	// recorded directly under it.
	children map[string]map[string]struct{}
}

func newIndex() *Index {
	return &Index{paths: map[string][]record{}, children: map[string]map[string]struct{}{}}
}

// add records a checkpoint. seq must be above every seq added before. Every
// record is checked first (the log is untrusted input, and the index is what
// views and rewinds act on): if one is not a record zerofs could have
// written, add records nothing and returns a *DamageError naming seq and the
// path, for the caller to name the file.
func (ix *Index) add(seq Seq, files []FileState) error {
	if err := checkFiles(seq, files); err != nil {
		return err
	}
	ix.mu.Lock()
	defer ix.mu.Unlock()
	for _, f := range files {
		ix.paths[f.Path] = append(ix.paths[f.Path], record{seq: seq, st: f})
		if f.Path == "" {
			continue
		}
		dir, name := splitPath(f.Path)
		names := ix.children[dir]
		if names == nil {
			names = map[string]struct{}{}
			ix.children[dir] = names
		}
		names[name] = struct{}{}
	}
	return nil
}

// at returns the before-state recorded by the first checkpoint with
// after < seq < limit that names p.
func (ix *Index) at(p string, after, limit Seq) (record, bool) {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	recs := ix.paths[p]
	i := sort.Search(len(recs), func(i int) bool { return recs[i].seq > after })
	if i == len(recs) || recs[i].seq >= limit {
		return record{}, false
	}
	return recs[i], true
}

// names returns the names ever recorded directly under dir.
func (ix *Index) names(dir string) []string {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	out := make([]string, 0, len(ix.children[dir]))
	for n := range ix.children[dir] {
		out = append(out, n)
	}
	return out
}

// changedBetween returns every path named by a checkpoint with
// after < seq < limit.
func (ix *Index) changedBetween(after, limit Seq) []string {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	var out []string
	for p, recs := range ix.paths {
		i := sort.Search(len(recs), func(i int) bool { return recs[i].seq > after })
		if i < len(recs) && recs[i].seq < limit {
			out = append(out, p)
		}
	}
	return out
}

// prune drops records with seq <= before: no state at or after before can
// use them.
func (ix *Index) prune(before Seq) {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	for p, recs := range ix.paths {
		i := sort.Search(len(recs), func(i int) bool { return recs[i].seq > before })
		if i == len(recs) {
			delete(ix.paths, p)
			continue
		}
		ix.paths[p] = append([]record(nil), recs[i:]...)
	}
}

// splitPath splits a workspace path into its directory ("" for the root)
// and final name.
func splitPath(p string) (dir, name string) {
	d, n := path.Split(p)
	if d != "" {
		d = d[:len(d)-1]
	}
	return d, n
}

// joinPath joins a directory path and a name.
func joinPath(dir, name string) string {
	if dir == "" {
		return name
	}
	return dir + "/" + name
}

// last returns the newest record of p.
func (ix *Index) last(p string) (record, bool) {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	recs := ix.paths[p]
	if len(recs) == 0 {
		return record{}, false
	}
	return recs[len(recs)-1], true
}
