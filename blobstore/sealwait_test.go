package blobstore

import (
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/zerofs/zerofs/internal/durable"
)

// TestPutDoesNotWaitForSeal: a Put (a capture's copy of a file) never waits
// for a Sync's writing of a retired pack's index (a write, an fsync, a
// rename and a directory fsync): with that write stopped after its rename,
// a Put goes through, and the Sync finishes once it is let go.
func TestPutDoesNotWaitForSeal(t *testing.T) {
	s := openT(t, Options{PackSize: 64}) // each Put retires its pack
	if _, _, err := s.Put(strings.NewReader(strings.Repeat("a", 100))); err != nil {
		t.Fatal(err)
	}
	sealing, release := make(chan struct{}), make(chan struct{})
	var once, freed sync.Once
	durable.TestHook = func(point, path string) {
		if point == "renamed" && strings.HasSuffix(path, ".idx") {
			once.Do(func() { close(sealing); <-release })
		}
	}
	free := func() { freed.Do(func() { close(release) }) }
	t.Cleanup(func() { free(); durable.TestHook = nil })
	synced := make(chan error, 1)
	go func() { synced <- s.Sync() }()
	select {
	case <-sealing:
	case <-time.After(30 * time.Second):
		t.Fatal("Sync did not begin to seal the retired pack within 30 s")
	}
	put := make(chan error, 1)
	go func() {
		_, _, err := s.Put(strings.NewReader(strings.Repeat("b", 100)))
		put <- err
	}()
	select {
	case err := <-put:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a Put waited for a Sync's writing of a pack index (10 s)")
	}
	free()
	if err := <-synced; err != nil {
		t.Fatal(err)
	}
	if err := s.Sync(); err != nil {
		t.Fatal(err)
	}
	idx, _ := filepath.Glob(filepath.Join(s.packDir, "*.idx"))
	packs, _ := filepath.Glob(filepath.Join(s.packDir, "*.pack"))
	if len(idx) != len(packs) || len(packs) != 2 {
		t.Fatalf("%d packs and %d indexes after two Puts and Syncs, want 2 and 2", len(packs), len(idx))
	}
	for _, p := range idx {
		if fi, err := os.Stat(p); err != nil || fi.Size() == 0 {
			t.Fatalf("index %s: %v", p, err)
		}
	}
}
