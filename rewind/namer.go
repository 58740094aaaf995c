package rewind

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// namer names stashes (stash.go) in the background, after a burst of
// removals pauses, and on demand (nameAll) for every reader of a record.
// It owns its goroutine, its lock and its stop (STYLE rule 19); the lock
// order it takes part in is in doc.go.
type namer struct {
	// name names every stash the index has not named yet; it is called
	// with mu held, by the goroutine and by nameAll alike.
	name func(context.Context) error
	// pending is how many stashes wait to be named.
	pending func() int
	// failed is told each failed naming of the goroutine.
	failed func(error)

	// mu serialises naming, so a reader waits for a batch under way.
	mu sync.Mutex

	// stashes counts the stashes recorded, for the goroutine to see a
	// burst of removals go on.
	stashes atomic.Uint64
	wakeC   chan struct{}
	stop    chan struct{}
	stopped chan struct{}
}

// namerBatch bounds the stashes one stash_named event names.
const namerBatch = 4096

// The namer waits for a burst of removals to pause (namerIdle without a
// new stash) before it hashes, so that it does not take a core from the
// rm -rf it follows, and names at least every namerMaxWait, or once
// namerBatch stashes wait.
const (
	namerIdle    = 50 * time.Millisecond
	namerMaxWait = 2 * time.Second
)

func newNamer(name func(context.Context) error, pending func() int, failed func(error)) *namer {
	return &namer{
		name:    name,
		pending: pending,
		failed:  failed,
		wakeC:   make(chan struct{}, 1),
		stop:    make(chan struct{}),
		stopped: make(chan struct{}),
	}
}

// start starts the goroutine; close stops it.
func (n *namer) start() { go n.run() }

// close stops the goroutine and waits for it; a batch under way finishes
// first. nameAll still works after it.
func (n *namer) close() {
	close(n.stop)
	<-n.stopped
}

// wake tells the goroutine a stash was recorded.
func (n *namer) wake() {
	n.stashes.Add(1)
	select {
	case n.wakeC <- struct{}{}:
	default:
	}
}

// nameAll names every stash not named yet, after any batch under way.
func (n *namer) nameAll(ctx context.Context) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.name(ctx)
}

// run names stashes until close.
func (n *namer) run() {
	defer close(n.stopped)
	for {
		select {
		case <-n.stop:
			return
		case <-n.wakeC:
		}
		start := time.Now()
		for {
			seen := n.stashes.Load()
			select {
			case <-n.stop:
				return
			case <-time.After(namerIdle):
			}
			if n.stashes.Load() == seen || time.Since(start) >= namerMaxWait || n.pending() >= namerBatch {
				break
			}
		}
		// Without the workspace lock: naming changes no path, so a step
		// boundary (which takes that lock for writing) need not wait for
		// a batch, seconds of hashing after an rm -rf of a large tree;
		// everything that reads a record names its stash first, and
		// waits for a batch under way through mu (nameAll). The index
		// snapshot is the one writer that must not see half a batch: it
		// is written only when no record is unnamed, which stays true
		// until the batch's stash_named event is folded in.
		if err := n.nameAll(context.Background()); err != nil {
			n.failed(err)
		}
	}
}
