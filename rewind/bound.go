package rewind

import (
	"context"
	"sync"
)

// pruner keeps the store within Options.MaxStoreSize in the background: a
// step boundary wakes it and returns, and the pruner measures the store
// and, when it is over its bound, prunes the oldest history
// (enforceBound). So no step waits for a gc that it happened to start:
// measuring what each cut would free, appending the history_pruned event
// and removing the blobs take seconds in a large store.
//
// The gc itself orders with everything else as GC does: it holds the
// workspace lock for writing (doc.go, lock order), so no capture runs
// while blobs are removed (a capture could otherwise name a blob being
// removed) and no rewind plans from a history being cut. Its cut is the
// oldest step boundary that brings the store within the bound, never later
// than the step current when it runs. A change or step begun while it
// runs waits for it, as for a gc asked for by hand.
//
// It owns its goroutine, its lock and its stop (STYLE rule 19).
type pruner struct {
	// prune keeps the store within its bound; the goroutine calls it.
	prune func(context.Context)

	mu   sync.Mutex // guards asked, done, closed
	cond *sync.Cond // on mu: done moved, or closed
	// asked counts wakes; done is the asked a finished prune began after.
	asked, done uint64
	closed      bool

	wakeC   chan struct{}
	stop    chan struct{}
	stopped chan struct{}
}

func newPruner(prune func(context.Context)) *pruner {
	p := &pruner{prune: prune, wakeC: make(chan struct{}, 1), stop: make(chan struct{}), stopped: make(chan struct{})}
	p.cond = sync.NewCond(&p.mu)
	return p
}

// start starts the goroutine; close stops it.
func (p *pruner) start() { go p.run() }

// close stops the goroutine and waits for it; a prune under way finishes
// first (the next mount's first step prunes what is left to prune).
func (p *pruner) close() {
	close(p.stop)
	<-p.stopped
	p.mu.Lock()
	p.closed = true
	p.cond.Broadcast()
	p.mu.Unlock()
}

// wake asks for a prune after the step that calls it.
func (p *pruner) wake() {
	p.mu.Lock()
	p.asked++
	p.mu.Unlock()
	select {
	case p.wakeC <- struct{}{}:
	default:
	}
}

// wait waits until a prune that began after every wake so far has
// finished, or the pruner is closed (for tests that measure the store).
func (p *pruner) wait() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for n := p.asked; p.done < n && !p.closed; {
		p.cond.Wait()
	}
}

func (p *pruner) run() {
	defer close(p.stopped)
	for {
		select {
		case <-p.stop:
			return
		case <-p.wakeC:
		}
		p.mu.Lock()
		n := p.asked
		p.mu.Unlock()
		p.prune(context.Background())
		p.mu.Lock()
		p.done = n
		p.cond.Broadcast()
		p.mu.Unlock()
	}
}
