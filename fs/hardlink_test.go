package fs

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/zerofs/zerofs/internal/testsupport"
)

// After a rewind removes or replaces one name of a hard-linked file, the
// other name still reaches its own backing path (TestMountModel found
// this: go-fuse's tree kept the removed name as the node's parent).
func TestHardLinkRewindStaleName(t *testing.T) {
	for _, tc := range []struct {
		name         string
		before, link func(t *testing.T, p func(string) string)
	}{
		{"removed", func(*testing.T, func(string) string) {}, func(t *testing.T, p func(string) string) {
			if err := os.Link(p("c"), p("a")); err != nil {
				t.Fatal(err)
			}
		}},
		{"replaced", func(t *testing.T, p func(string) string) { writeFile(t, p("a"), "A") }, func(t *testing.T, p func(string) string) {
			if err := os.Remove(p("a")); err != nil {
				t.Fatal(err)
			}
			if err := os.Link(p("c"), p("a")); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := mountT(t, Options{})
			mp := m.Mountpoint()
			p := func(s string) string { return filepath.Join(mp, s) }
			writeFile(t, p("c"), "C")
			tc.before(t, p)
			at := stepT(t, mp, "s")
			tc.link(t, p)
			rewindT(t, mp, at)
			if got, err := os.ReadFile(p("c")); err != nil || string(got) != "C" {
				t.Errorf("c after the rewind = %q, %v; want C", got, err)
			}
			if err := os.WriteFile(p("c"), []byte("new c"), 0o644); err != nil {
				t.Errorf("write c: %v", err)
			}
			if b, _ := os.ReadFile(filepath.Join(m.fs.workspace, "c")); string(b) != "new c" {
				t.Errorf("backing c = %q, want new c", b)
			}
		})
	}
}

// A rewind that only has to fix a name's mode must not change the mode of
// the file's other names: it restores that name as a file of its own.
func TestRewindChmodHardLink(t *testing.T) {
	m := mountT(t, Options{})
	mp := m.Mountpoint()
	p := func(s string) string { return filepath.Join(mp, s) }
	if err := os.WriteFile(p("a"), []byte("X"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p("b"), []byte("X"), 0o644); err != nil {
		t.Fatal(err)
	}
	at := stepT(t, mp, "s")
	want := testsupport.Snapshot(t, mp)
	if err := os.Remove(p("b")); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(p("a"), p("b")); err != nil {
		t.Fatal(err)
	}
	rewindT(t, mp, at)
	if d := diffTrees(testsupport.Snapshot(t, mp), want); d != "" {
		t.Fatalf("after rewinding to %d:\n%s", at, d)
	}
}
