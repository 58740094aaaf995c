package rewind

import (
	"sync"
	"time"
)

// flusher makes batch captures durable (blobs, then the log) within delay
// of being marked dirty, grouping neighbours, and on demand (sync). It
// owns its goroutine, its lock and its stop (STYLE rule 19); the lock
// order it takes part in is in doc.go.
type flusher struct {
	delay time.Duration
	// flush makes everything written so far durable; it is called with mu
	// held, by the goroutine and by sync alike.
	flush func() error
	// after runs after each flush of the goroutine that succeeded, without
	// mu (the engine wakes its snapshotter there).
	after func()
	// failed is told each failed flush of the goroutine.
	failed func(error)

	// mu serialises flushes.
	mu sync.Mutex

	dirty   chan struct{}
	stop    chan struct{}
	stopped chan struct{}
}

func newFlusher(delay time.Duration, flush func() error, after func(), failed func(error)) *flusher {
	return &flusher{
		delay:   delay,
		flush:   flush,
		after:   after,
		failed:  failed,
		dirty:   make(chan struct{}, 1),
		stop:    make(chan struct{}),
		stopped: make(chan struct{}),
	}
}

// start starts the goroutine; close stops it.
func (f *flusher) start() { go f.run() }

// close stops the goroutine and waits for it; a flush under way finishes
// first. sync still works after it.
func (f *flusher) close() {
	close(f.stop)
	<-f.stopped
}

// mark tells the goroutine there is something to make durable.
func (f *flusher) mark() {
	select {
	case f.dirty <- struct{}{}:
	default:
	}
}

// sync flushes now, after any flush under way.
func (f *flusher) sync() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.flush()
}

// run flushes within delay of each mark until close.
func (f *flusher) run() {
	defer close(f.stopped)
	for {
		select {
		case <-f.stop:
			return
		case <-f.dirty:
		}
		timer := time.NewTimer(f.delay)
		select {
		case <-f.stop:
			timer.Stop()
			return
		case <-timer.C:
		}
		if err := f.sync(); err != nil {
			f.failed(err)
			continue
		}
		f.after()
	}
}
