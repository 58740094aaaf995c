package fs

import (
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/zerofs/zerofs/internal/durable"
)

// TestWriteDuringAStepsSync, on a real mount in batch mode: with the
// removed files' stashes stopped in the middle of being made durable (the
// flusher holds its lock, blocked), a step is written to .zero/step and
// waits for them, as it must (SPEC: durable before a step begins); while it
// waits, a write to another file through the mount goes through. Before
// the step synced outside the workspace lock, that write waited for the
// step, and so for the stashes' sync.
func TestWriteDuringAStepsSync(t *testing.T) {
	// The hook is set before the daemon's goroutines exist and cleared
	// after they are gone (this cleanup runs after the unmount); armed
	// turns it on.
	syncing, release := make(chan struct{}), make(chan struct{})
	var armed atomic.Bool
	var once, freed sync.Once
	durable.TestHook = func(point, _ string) {
		if point == "kept:syncing" && armed.Load() {
			once.Do(func() { close(syncing); <-release })
		}
	}
	t.Cleanup(func() { durable.TestHook = nil })
	free := func() { freed.Do(func() { close(release) }) }
	m := mountT(t, Options{})
	t.Cleanup(free) // before the unmount
	mp := m.Mountpoint()
	for _, p := range []string{"a", "b", "f"} {
		if err := os.WriteFile(filepath.Join(mp, p), []byte(p+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := ctlWrite(mp, "step", "rm\n"); err != nil {
		t.Fatal(err)
	}
	armed.Store(true)
	for _, p := range []string{"a", "b"} {
		if err := os.Remove(filepath.Join(mp, p)); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case <-syncing:
	case <-time.After(30 * time.Second):
		t.Fatal("the removed files' stashes were not being made durable within 30 s")
	}
	stepped := make(chan error, 1)
	go func() { stepped <- ctlWrite(mp, "step", "edit\n") }()
	// Let the step reach its wait (it cannot end before the release,
	// whatever the timing: the assertion below does not depend on it).
	time.Sleep(200 * time.Millisecond)
	wrote := make(chan error, 1)
	go func() { wrote <- os.WriteFile(filepath.Join(mp, "f"), []byte("two\n"), 0o644) }()
	select {
	case err := <-wrote:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		free()
		t.Fatal("a write waited for a step's sync of the stashes before it (10 s)")
	}
	select {
	case err := <-stepped:
		t.Fatalf("the step returned (%v) before the stashes before it were durable", err)
	default:
	}
	free()
	if err := <-stepped; err != nil {
		t.Fatal(err)
	}
	if got := ctlRead(t, mp, "step"); len(got) == 0 {
		t.Fatal("no current step after the step")
	}
}
