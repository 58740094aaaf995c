package rewind

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// Readers never take the writer's lock: with capMu held (as a step boundary
// holds it across its fsync), a view's reads of history still complete.
func TestReadsDoNotTakeCaptureLock(t *testing.T) {
	e, ws := openT(t, Options{})
	f := filepath.Join(ws, "f")
	change(t, e, func() error { return os.WriteFile(f, []byte("a"), 0o644) }, Change{Path: "f"})
	s, err := e.BeginStep(context.Background(), "s", nil)
	if err != nil {
		t.Fatal(err)
	}
	change(t, e, func() error { return os.WriteFile(f, []byte("b"), 0o644) }, Change{Path: "f"})

	e.capMu.Lock()
	done := make(chan string, 1)
	go func() {
		_ = e.PrunedBefore()
		ent, err := e.StateAt("f", s.Seq)
		if err != nil {
			done <- err.Error()
			return
		}
		r, err := e.OpenContent(ent)
		if err != nil {
			done <- err.Error()
			return
		}
		defer r.Close()
		b := make([]byte, 8)
		k, _ := r.Read(b)
		done <- string(b[:k])
	}()
	// Not a timing assert: a deadline on a call that must not block at all.
	select {
	case got := <-done:
		e.capMu.Unlock()
		if got != "a" {
			t.Fatalf("f at %d = %q, want a", s.Seq, got)
		}
	case <-time.After(30 * time.Second):
		e.capMu.Unlock()
		<-done
		t.Fatal("a history read waited for the capture lock")
	}
}
