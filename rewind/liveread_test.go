package rewind

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// TestLiveReadSeesChangeMeanwhile: a state at T that no record decides is
// read from the workspace. A change captured and made between the index's
// answer and that read (a writer running while @T is read) must not show
// in the state at T: its record is the answer. The change is forced into
// that window (beforeLive). Before the read checked the index again, @T
// showed the change: f's new content, g gone, n there, h missing from the
// listing (e2e/TestParallelWritersAndRewinds saw a view read while writers
// ran differ from the same view read later).
func TestLiveReadSeesChangeMeanwhile(t *testing.T) {
	ctx := context.Background()
	e, ws := openT(t, Options{})
	p := func(name string) string { return filepath.Join(ws, name) }
	for _, n := range []string{"f", "g", "h"} {
		if err := os.WriteFile(p(n), []byte(n+" at T\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	s, err := e.BeginStep(ctx, "s", nil)
	if err != nil {
		t.Fatal(err)
	}
	T := s.Seq
	// meanwhile makes fn's change, captured, when the read of at comes.
	meanwhile := func(at string, fn func() error, c Change) {
		done := false
		beforeLive = func(q string) {
			if q == at && !done {
				done = true
				change(t, e, fn, c)
			}
		}
		t.Cleanup(func() { beforeLive = nil })
	}

	meanwhile("f", func() error { return os.WriteFile(p("f"), []byte("x"), 0o644) }, Change{Path: "f"})
	if got, ok := readAt(t, e, "f", T); !ok || got != "f at T\n" {
		t.Errorf("f at %d, written while read: got %q (exists %v), want %q", T, got, ok, "f at T\n")
	}

	meanwhile("g", func() error { return os.Remove(p("g")) }, Change{Path: "g", Removed: true})
	if got, ok := readAt(t, e, "g", T); !ok || got != "g at T\n" {
		t.Errorf("g at %d, removed while read: got %q (exists %v), want %q", T, got, ok, "g at T\n")
	}

	meanwhile("n", func() error { return os.WriteFile(p("n"), []byte("new"), 0o644) }, Change{Path: "n"})
	if ent, err := e.StateAt("n", T); err != nil || ent.Exists {
		t.Errorf("n at %d, created while read: %+v, %v; want absent", T, ent, err)
	}

	meanwhile("", func() error { return os.Remove(p("h")) }, Change{Path: "h", Removed: true})
	ents, err := e.ReadDirAt("", T)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, d := range ents {
		names = append(names, d.Name)
	}
	if want := []string{"f", "g", "h"}; !slices.Equal(names, want) {
		t.Errorf("the root at %d, h removed while listed: got %v, want %v", T, names, want)
	}
	beforeLive = nil
	if h, _ := readAt(t, e, "h", T); h != "h at T\n" {
		t.Errorf("h at %d: got %q", T, h)
	}
}
