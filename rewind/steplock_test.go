package rewind

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/zerofs/zerofs/internal/durable"
	"github.com/zerofs/zerofs/record"
)

// blockAt makes durable.TestHook stop the first caller that reaches point
// until the returned release is called (also at cleanup); reached is closed
// when one did.
func blockAt(t *testing.T, point string) (reached <-chan struct{}, release func()) {
	t.Helper()
	in, out := make(chan struct{}), make(chan struct{})
	var once, freed sync.Once
	durable.TestHook = func(p, _ string) {
		if p == point {
			once.Do(func() { close(in); <-out })
		}
	}
	release = func() { freed.Do(func() { close(out) }) }
	t.Cleanup(func() { release(); durable.TestHook = nil })
	return in, release
}

// A step waits for the captures before it to be durable (SPEC: in batch
// mode, always before a step begins), but it does so before it takes the
// workspace lock: with the removed files' stashes stopped in the middle of
// being made durable, a step is begun, and while it provably waits for
// them, another process's changes (a capture of a file, a new file) go
// through. They belong to the step before (their checkpoints precede its
// tool_call), and everything before the tool_call is durable when the step
// returns.
func TestChangesDoNotWaitForAStepsSync(t *testing.T) {
	e, ws := openT(t, Options{BatchDelay: time.Hour}) // only the step syncs
	for _, p := range []string{"a", "b", "f"} {
		if err := os.WriteFile(filepath.Join(ws, p), []byte(p+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	ctx := context.Background()
	rm, err := e.BeginStep(ctx, "rm", nil)
	if err != nil {
		t.Fatal(err)
	}
	unlinkStashed(t, e, ws, "a", -1)
	unlinkStashed(t, e, ws, "b", -1)
	syncing, release := blockAt(t, "kept:syncing")
	type begun struct {
		ev  record.Event
		err error
	}
	stepped := make(chan begun, 1)
	go func() {
		ev, err := e.BeginStep(ctx, "edit", nil)
		stepped <- begun{ev, err}
	}()
	select {
	case <-syncing:
	case <-time.After(30 * time.Second):
		t.Fatal("the step did not begin to make the stashes durable within 30 s")
	}
	changed := make(chan error, 1)
	go func() {
		err := func() error {
			rel, _, err := e.Begin(ctx, Caller{}, Change{Path: "f"})
			if err != nil {
				return err
			}
			defer rel()
			if err := os.WriteFile(filepath.Join(ws, "f"), []byte("two\n"), 0o644); err != nil {
				return err
			}
			rel2, _, err := e.Begin(ctx, Caller{}, Change{Path: "new"})
			if err != nil {
				return err
			}
			defer rel2()
			return os.WriteFile(filepath.Join(ws, "new"), []byte("new\n"), 0o644)
		}()
		changed <- err
	}()
	select {
	case err := <-changed:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a change waited for a step's sync of the stashes before it (10 s)")
	}
	select {
	case b := <-stepped:
		t.Fatalf("the step returned (%v) before the stashes before it were durable", b.err)
	default:
	}
	release()
	b := <-stepped
	if b.err != nil {
		t.Fatal(b.err)
	}
	if got := e.log.Synced(); got < b.ev.Seq-1 {
		t.Errorf("after the step at %d, the log is durable up to %d: the captures before it are not", b.ev.Seq, got)
	}
	// The changes were made before the step began: @(step-1) has them,
	// the state before the rm step does not.
	for p, want := range map[string]string{"f": "two\n", "new": "new\n"} {
		if got, ok := readAt(t, e, p, b.ev.Seq); !ok || got != want {
			t.Errorf("@%d/%s = %q (exists %v), want %q", b.ev.Seq, p, got, ok, want)
		}
	}
	if got, ok := readAt(t, e, "f", rm.Seq); !ok || got != "f\n" {
		t.Errorf("@%d/f = %q (exists %v), want the content before the change", rm.Seq, got, ok)
	}
}
