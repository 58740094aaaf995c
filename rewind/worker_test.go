package rewind

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/zerofs/zerofs/internal/testsupport"
)

// TestFlusherGroupsAndStops: marks within one window share one flush,
// followed by after; a failed flush is reported and skips after; sync
// flushes at once and after close; close waits for a flush under way.
func TestFlusherGroupsAndStops(t *testing.T) {
	var flushes, afters, failures atomic.Int32
	var failNext, block atomic.Bool
	entered, release := make(chan struct{}, 1), make(chan struct{})
	f := newFlusher(20*time.Millisecond, func() error {
		if block.Load() {
			entered <- struct{}{}
			<-release
		}
		flushes.Add(1)
		if failNext.Swap(false) {
			return errors.New("disk gone")
		}
		return nil
	}, func() { afters.Add(1) }, func(error) { failures.Add(1) })
	f.start()

	for range 5 {
		f.mark()
	}
	waitFor(t, func() bool { return afters.Load() == 1 })
	if got := flushes.Load(); got != 1 {
		t.Fatalf("5 marks in one window: %d flushes, want 1", got)
	}

	failNext.Store(true)
	f.mark()
	waitFor(t, func() bool { return failures.Load() == 1 })
	if got := afters.Load(); got != 1 {
		t.Errorf("after a failed flush: after ran %d times in all, want 1 (not after the failure)", got)
	}

	if err := f.sync(); err != nil || flushes.Load() != 3 {
		t.Fatalf("sync: %v, %d flushes; want nil, 3", err, flushes.Load())
	}

	// A flush under way holds close until it ends.
	block.Store(true)
	f.mark()
	<-entered
	closed := make(chan struct{})
	go func() { f.close(); close(closed) }()
	select {
	case <-closed:
		t.Fatal("close returned while a flush was under way")
	case <-time.After(50 * time.Millisecond):
	}
	block.Store(false)
	close(release)
	<-closed
	if err := f.sync(); err != nil || flushes.Load() != 5 {
		t.Fatalf("sync after close: %v, %d flushes; want nil, 5", err, flushes.Load())
	}
}

// TestNamerWaitsForPause: the namer names no sooner than namerIdle after
// a wake (a burst of removals goes on meanwhile); nameAll waits for a
// naming under way (one at a time); close stops the goroutine.
func TestNamerWaitsForPause(t *testing.T) {
	var names, running, overlap atomic.Int32
	var first atomic.Int64
	release := make(chan struct{})
	var hold atomic.Bool
	n := newNamer(func(context.Context) error {
		if running.Add(1) > 1 {
			overlap.Add(1)
		}
		defer running.Add(-1)
		first.CompareAndSwap(0, time.Now().UnixNano())
		names.Add(1)
		if hold.Load() {
			<-release
		}
		return nil
	}, func() int { return 0 }, func(error) {})
	n.start()

	woke := time.Now()
	n.wake()
	waitFor(t, func() bool { return names.Load() == 1 })
	if waited := time.Duration(first.Load() - woke.UnixNano()); waited < namerIdle {
		t.Fatalf("named %v after the wake, want at least namerIdle (%v)", waited, namerIdle)
	}

	// A naming under way: nameAll waits for it, never runs beside it.
	hold.Store(true)
	n.wake()
	waitFor(t, func() bool { return running.Load() == 1 })
	hold.Store(false)
	done := make(chan error)
	go func() { done <- n.nameAll(context.Background()) }()
	select {
	case <-done:
		t.Fatal("nameAll returned while the namer's naming was under way")
	case <-time.After(50 * time.Millisecond):
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if overlap.Load() != 0 || names.Load() != 3 {
		t.Fatalf("%d namings, %d overlapping; want 3, none overlapping", names.Load(), overlap.Load())
	}

	// After close, a wake names nothing; nameAll still does.
	n.close()
	n.wake()
	time.Sleep(2 * namerIdle) // real time: a naming a wake started would have run by now
	if got := names.Load(); got != 3 {
		t.Fatalf("a wake after close: %d namings, want 3", got)
	}
	if err := n.nameAll(context.Background()); err != nil || names.Load() != 4 {
		t.Fatalf("nameAll after close: %v, %d namings; want nil, 4", err, names.Load())
	}
}

// waitFor polls cond for up to 10 s.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	if err := testsupport.Poll(10*time.Second, cond); err != nil {
		t.Fatal(err)
	}
}
