package rewind

import (
	"github.com/zerofs/zerofs/rewind/internal/index"
)

// The index snapshot (index.WriteSnapshot) lets a mount start without
// re-reading the whole log: Open reads only the lines after the prefix it
// covers. The engine writes it at Close, after gc, and every snapshotEvery
// events.

// snapshotEvery is how many events the log may grow by before the engine
// writes a new snapshot while running, bounding what a mount after a crash
// must read (a variable for tests).
var snapshotEvery Seq = 50_000

// writeSnapshot writes the derived state and the log's resume point. The
// caller holds wsMu for writing, so they agree: no event is appended
// meanwhile.
func (e *Engine) writeSnapshot() error {
	if e.index.HasUnnamed() {
		// A snapshot holds no stash names still to be named (stash.go);
		// a later one will cover these records.
		return nil
	}
	r := e.log.Resume()
	if err := index.WriteSnapshot(e.opts.StoreDir, r, e.state); err != nil {
		return err
	}
	e.snapHead.Store(uint64(r.Head))
	return nil
}
