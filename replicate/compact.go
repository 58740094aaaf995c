package replicate

import (
	"bytes"
	"context"
	"encoding/json"
)

// compactEvery is how many segments of one level compaction merges into
// one of the next level (a variable for tests).
var compactEvery = 16

// compact merges, as litestream's levels do, the newest segments of the
// log when compactEvery of them in a row have the same level: a new
// segment of the next level covers them all. Restore follows the segment
// that reaches furthest from each point (chain), so reading the log up to
// any state takes at most compactEvery-1 segments per level, a number that
// grows with the log's logarithm, not its length, while each event is
// uploaded once per level. The merged segments are deleted afterwards
// (collect.go): objects are never overwritten, and a restore that listed
// them and finds one gone lists again.
func (r *Replicator) compact(ctx context.Context) error {
	for {
		run, _ := chain(r.segs)
		n := len(run)
		if n == 0 {
			return nil
		}
		level := run[n-1].Level
		i := n - 1
		for i > 0 && run[i-1].Level == level {
			i--
		}
		if n-i < compactEvery {
			return nil
		}
		first, last := run[i].First, run[n-1].Last
		var buf bytes.Buffer
		for ev, err := range r.eng.Log().Events(first) {
			if err != nil {
				return err
			}
			if ev.Seq > last {
				break
			}
			line, err := json.Marshal(ev)
			if err != nil {
				return err
			}
			buf.Write(line)
			buf.WriteByte('\n')
		}
		body := r.codec.seal(segmentLogical(first, last), buf.Bytes())
		name := segmentName(first, last, level+1, body)
		if err := r.put(ctx, name, body); err != nil {
			return err
		}
		r.segs = append(r.segs, segment{Name: name, First: first, Last: last, Hash: hashHex(body), Level: level + 1})
		r.collectDue = true // the merged segments are superseded
	}
}
