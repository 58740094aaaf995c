package fs

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// A view node first looked up while its path was unchanged ("live") must
// show the recorded state once the path changes, even when the kernel asks
// again for its attributes: after a rewind, and after the entry expired.
func TestViewOfLivePathAfterRewind(t *testing.T) {
	m := mountT(t, Options{})
	mp := m.Mountpoint()
	f := filepath.Join(mp, "f")
	writeFile(t, f, "a\n")
	stepT(t, mp, "s")
	writeFile(t, f, "bb\n")
	at := headOf(t, mp)
	v := filepath.Join(view(mp, at), "f")
	if fi, err := os.Stat(v); err != nil || fi.Size() != 3 {
		t.Fatalf("stat %s: %v %v, want size 3", v, fi, err)
	}
	rewindT(t, mp, at-1)
	if got := readFile(t, f); got != "a\n" {
		t.Fatalf("after the rewind f = %q, want a\\n", got)
	}
	// Let the view root's entry expire, so the kernel looks it up again
	// and asks for the attributes of the node it already knows.
	time.Sleep(wsTimeout + 200*time.Millisecond)
	for i := range 2 {
		fi, err := os.Stat(v)
		if err != nil || fi.Size() != 3 {
			t.Fatalf("stat %s (round %d): %v %v, want size 3", v, i, fi, err)
		}
		if got := readFile(t, v); got != "bb\n" {
			t.Fatalf("%s (round %d) = %q, want bb\\n", v, i, got)
		}
	}
}

// A directory moved over a name that, at an earlier T, was another
// directory: @T shows that other directory's content, not the moved-in
// names (the model test found this).
func TestViewOfDirectoryRenamedOverOldName(t *testing.T) {
	m := mountT(t, Options{})
	mp := m.Mountpoint()
	p := func(s string) string { return filepath.Join(mp, s) }
	os.Mkdir(p("b"), 0o755)
	writeFile(t, p("b/old"), "old")
	os.Mkdir(p("c"), 0o755)
	writeFile(t, p("c/moved"), "moved")
	at := stepT(t, mp, "s")
	os.Remove(p("b/old"))
	if err := os.Remove(p("b")); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(p("c"), p("b")); err != nil {
		t.Fatal(err)
	}
	ents, err := os.ReadDir(filepath.Join(view(mp, at), "b"))
	if err != nil || len(ents) != 1 || ents[0].Name() != "old" {
		t.Fatalf("@%d/b: %v %v, want just old", at, ents, err)
	}
	if _, err := os.Stat(filepath.Join(view(mp, at), "b", "moved")); !os.IsNotExist(err) {
		t.Fatalf("@%d/b/moved: %v, want ENOENT", at, err)
	}
	rewindT(t, mp, at)
	if got := readFile(t, p("c/moved")); got != "moved" {
		t.Fatalf("after rewind c/moved = %q", got)
	}
	if got := readFile(t, p("b/old")); got != "old" {
		t.Fatalf("after rewind b/old = %q", got)
	}
	if _, err := os.Stat(p("b/moved")); !os.IsNotExist(err) {
		t.Fatalf("after rewind b/moved: %v, want ENOENT", err)
	}
}
