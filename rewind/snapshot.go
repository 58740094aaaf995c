package rewind

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/zerofs/zerofs/internal/durable"
	"github.com/zerofs/zerofs/record"
	"github.com/zerofs/zerofs/rewind/internal/index"
)

// The index snapshot (index.WriteSnapshot) lets a mount start without
// re-reading the whole log: Open reads only the lines after the prefix it
// covers. The engine writes it at Close, after gc, and every snapshotEvery
// events (the snapshotter, below).

// snapshotEvery is how many events the log may grow by before the engine
// writes a new snapshot while running, bounding what a mount after a crash
// must read (a variable for tests).
var snapshotEvery record.Seq = 50_000

// removeSnapshotTemps removes the temporary files of snapshots a crash
// left unfinished (a SIGKILL while the snapshotter encoded one). The
// caller holds the log's writer lock, so no engine is writing one.
func removeSnapshotTemps(dir string) error {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("rewind: store: %w", err)
	}
	for _, ent := range ents {
		if ent.Type().IsRegular() && durable.IsTempFor(ent.Name(), index.SnapshotName) {
			if err := os.Remove(filepath.Join(dir, ent.Name())); err != nil && !errors.Is(err, os.ErrNotExist) {
				return fmt.Errorf("rewind: store: %w", err)
			}
		}
	}
	return nil
}

// snapshotCommit makes an encoded snapshot durable and puts it in place (a
// variable for tests).
var snapshotCommit = (*index.PendingSnapshot).Commit

// snapshotEncode writes a cut's snapshot to a temporary file (a variable
// for tests).
var snapshotEncode = (*index.SnapshotCut).Encode

// writeSnapshotLocked writes the derived state and the log's resume
// point. The caller holds snapMu and wsMu for writing (Close), or runs
// alone (Open), so they agree: no event is appended meanwhile.
func (e *Engine) writeSnapshotLocked() error {
	c := e.cutSnapshot()
	if c == nil {
		return nil
	}
	return e.encodeSnapshot(c)
}

// writeSnapshotBehind is the snapshotter's, and GC's, writeSnapshot: it
// takes snapMu first (waiting for a snapshot under way holds no other
// lock), holds wsMu only while it fixes what the snapshot holds
// (index.SnapshotCut: the state and the log must agree, and copying the
// marks is all it costs), and encodes it and makes it durable after
// letting go, so that no step and no capture waits for the encode
// (hundreds of milliseconds at a million records), the snapshot's fsync,
// rename or directory fsync. The caller holds neither lock.
func (e *Engine) writeSnapshotBehind() error {
	e.snapMu.Lock()
	defer e.snapMu.Unlock()
	e.wsMu.Lock()
	c := e.cutSnapshot()
	e.wsMu.Unlock()
	if c == nil {
		return nil
	}
	err := e.encodeSnapshot(c)
	if errors.Is(err, index.ErrSnapshotStale) {
		return nil // a gc ran meanwhile, and writes a snapshot of its own
	}
	return err
}

// cutSnapshot fixes the snapshot of the state at the log's head; nil when
// a record waits for its stash's name. The caller holds wsMu for writing
// (or runs alone) and snapMu.
func (e *Engine) cutSnapshot() *index.SnapshotCut {
	if e.index.HasUnnamed() {
		// A snapshot holds no stash names still to be named (stash.go),
		// and naming changes a record in place; a later one will cover
		// these records.
		return nil
	}
	return e.state.Cut(e.log.Resume())
}

// encodeSnapshot writes c to a temporary file and makes it durable as the
// store's snapshot, covering the log up to c's head; the caller holds
// snapMu (and need not hold wsMu), so snapshots go in place in the order
// they were cut.
func (e *Engine) encodeSnapshot(c *index.SnapshotCut) error {
	p, err := snapshotEncode(c, e.opts.StoreDir)
	if err != nil {
		return err
	}
	crashPoint("snapshot:encoded")
	if err := snapshotCommit(p); err != nil {
		return err
	}
	e.snapHead.Store(uint64(c.Head()))
	return nil
}

// snapshotter writes the index snapshot in the background every
// snapEvery events, after the flusher's flushes, so that neither the
// flusher (whose window bounds what a power loss can take) nor a step
// waits for it. It owns its goroutine and its stop (STYLE rule 19); its
// lock is the engine's snapMu, whose place in the lock order is in doc.go.
type snapshotter struct {
	// write writes a snapshot when one is due.
	write   func()
	wakeC   chan struct{}
	stop    chan struct{}
	stopped chan struct{}
}

func newSnapshotter(write func()) *snapshotter {
	return &snapshotter{write: write, wakeC: make(chan struct{}, 1), stop: make(chan struct{}), stopped: make(chan struct{})}
}

// start starts the goroutine; close stops it.
func (s *snapshotter) start() { go s.run() }

// close stops the goroutine and waits for it; a snapshot under way
// finishes first.
func (s *snapshotter) close() {
	close(s.stop)
	<-s.stopped
}

// wake tells the goroutine to see whether a snapshot is due.
func (s *snapshotter) wake() {
	select {
	case s.wakeC <- struct{}{}:
	default:
	}
}

func (s *snapshotter) run() {
	defer close(s.stopped)
	for {
		select {
		case <-s.stop:
			return
		case <-s.wakeC:
		}
		s.write()
	}
}
