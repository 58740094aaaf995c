package rewind

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/zerofs/zerofs/internal/durable"
)

// A step and the first capture after it never wait for the namer: with the
// namer stopped in the middle of naming a removed file's stash (holding
// every lock it holds while it hashes one), a step begins, a file is
// captured in it, and another step begins. (What remains of the namer's
// cost is the CPU time its hashing takes from the requests.)
func TestStepDoesNotWaitForNamer(t *testing.T) {
	e, ws := openT(t, Options{})
	if err := os.WriteFile(filepath.Join(ws, "big"), make([]byte, 1<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ws, "f"), []byte("one\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	hashing, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	durable.TestHook = func(point, _ string) {
		if point == "kept:naming" {
			once.Do(func() { close(hashing) })
			<-release
		}
	}
	var released sync.Once
	free := func() { released.Do(func() { close(release) }) }
	t.Cleanup(func() { free(); durable.TestHook = nil })
	ctx := context.Background()
	if _, err := e.BeginStep(ctx, "rm", nil); err != nil {
		t.Fatal(err)
	}
	unlinkStashed(t, e, ws, "big", -1)
	select {
	case <-hashing:
	case <-time.After(30 * time.Second):
		t.Fatal("the namer did not begin naming the stash within 30 s")
	}
	done := make(chan error, 1)
	go func() {
		if _, err := e.BeginStep(ctx, "edit", nil); err != nil {
			done <- err
			return
		}
		rel, _, err := e.Begin(ctx, Caller{}, Change{Path: "f"})
		if err != nil {
			done <- err
			return
		}
		err = os.WriteFile(filepath.Join(ws, "f"), []byte("two\n"), 0o644)
		rel()
		if err == nil {
			_, err = e.BeginStep(ctx, "next", nil)
		}
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("a step and a capture after it waited for the namer (30 s)")
	}
	free()
	if err := e.NameStashes(ctx); err != nil {
		t.Fatal(err)
	}
}
