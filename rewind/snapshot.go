package rewind

import (
	"github.com/zerofs/zerofs/record"
	"github.com/zerofs/zerofs/rewind/internal/index"
)

// The index snapshot (index.WriteSnapshot) lets a mount start without
// re-reading the whole log: Open reads only the lines after the prefix it
// covers. The engine writes it at Close, after gc, and every snapshotEvery
// events.

// snapshotEvery is how many events the log may grow by before the engine
// writes a new snapshot while running, bounding what a mount after a crash
// must read (a variable for tests).
var snapshotEvery record.Seq = 50_000

// snapshotCommit makes an encoded snapshot durable and puts it in place (a
// variable for tests).
var snapshotCommit = (*index.PendingSnapshot).Commit

// writeSnapshot writes the derived state and the log's resume point. The
// caller holds wsMu for writing, so they agree: no event is appended
// meanwhile.
func (e *Engine) writeSnapshot() error {
	e.snapMu.Lock()
	defer e.snapMu.Unlock()
	p, head, err := e.encodeSnapshot()
	if p == nil {
		return err
	}
	return e.commitSnapshot(p, head)
}

// writeSnapshotBehind is the flusher's writeSnapshot: it holds wsMu only
// while it encodes the snapshot (the state and the log must agree), and
// makes it durable after letting go, so that no step and no capture waits
// for the snapshot's fsync, rename and directory fsync (tens to hundreds of
// milliseconds on a busy disk, every snapshotEvery events).
func (e *Engine) writeSnapshotBehind() error {
	e.wsMu.Lock()
	e.snapMu.Lock()
	defer e.snapMu.Unlock()
	p, head, err := e.encodeSnapshot()
	e.wsMu.Unlock()
	if p == nil {
		return err
	}
	return e.commitSnapshot(p, head)
}

// encodeSnapshot writes the snapshot of the state at the log's head to a
// temporary file; nil when there is nothing to write. The caller holds
// wsMu for writing and snapMu.
func (e *Engine) encodeSnapshot() (*index.PendingSnapshot, record.Seq, error) {
	if e.index.HasUnnamed() {
		// A snapshot holds no stash names still to be named (stash.go);
		// a later one will cover these records.
		return nil, 0, nil
	}
	r := e.log.Resume()
	p, err := index.EncodeSnapshot(e.opts.StoreDir, r, e.state)
	return p, r.Head, err
}

// commitSnapshot makes p durable as the store's snapshot, covering the log
// up to head; the caller holds snapMu, so snapshots go in place in the
// order they were encoded.
func (e *Engine) commitSnapshot(p *index.PendingSnapshot, head record.Seq) error {
	if err := snapshotCommit(p); err != nil {
		return err
	}
	e.snapHead.Store(uint64(head))
	return nil
}
