package fs

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/zerofs/zerofs/record"
)

// TestRenameRecordThroughMount: with rename records, mv of a directory and
// back through the mount appends one record each (no capture of the
// files beneath), @T reads every file under its name at T, edits inside
// the moved directory in later steps are kept apart, and a rewind puts
// the names back.
func TestRenameRecordThroughMount(t *testing.T) {
	m := mountRecordsT(t, Options{})
	mp := m.Mountpoint()
	for i := range 60 {
		p := filepath.Join(mp, "src", fmt.Sprintf("d%d", i%6), fmt.Sprintf("f%d", i))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		writeFile(t, p, fmt.Sprintf("content %d\n", i))
	}
	// A close's RELEASE reaches the daemon after close(2) returns: a file
	// whose release is still on its way is captured at the step boundary
	// as held open, one record more than the mv's.
	waitReleased(t, m)
	t0 := stepT(t, mp, "mv")
	if err := os.Rename(filepath.Join(mp, "src"), filepath.Join(mp, "dst")); err != nil {
		t.Fatal(err)
	}
	if h := m.Engine().Head(); h != t0+1 {
		t.Fatalf("head %d after mv: want one record after the step at %d", h, t0)
	}
	t1 := stepT(t, mp, "edit")
	writeFile(t, filepath.Join(mp, "dst", "d1", "f1"), "edited\n")
	waitReleased(t, m)
	t2 := stepT(t, mp, "mv back")
	if err := os.Rename(filepath.Join(mp, "dst"), filepath.Join(mp, "src")); err != nil {
		t.Fatal(err)
	}
	if h := m.Engine().Head(); h != t2+1 {
		t.Fatalf("head %d after mv back: want one record after the step at %d", h, t2)
	}
	t3 := stepT(t, mp, "end")

	read := func(p string) string {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	for _, c := range []struct {
		at       record.Seq
		rel, has string
	}{
		{t0, "src/d1/f1", "content 1\n"}, {t0, "src/d2/f8", "content 8\n"},
		{t1, "dst/d1/f1", "content 1\n"}, {t2, "dst/d1/f1", "edited\n"},
		{t3, "src/d1/f1", "edited\n"}, {t3, "src/d2/f8", "content 8\n"},
	} {
		if got := read(filepath.Join(view(mp, c.at), c.rel)); got != c.has {
			t.Errorf("@%d/%s = %q, want %q", c.at, c.rel, got, c.has)
		}
	}
	ents, err := os.ReadDir(filepath.Join(view(mp, t0), "src", "d1"))
	if err != nil || len(ents) != 10 {
		t.Fatalf("ls @%d/src/d1: %d names (%v), want 10", t0, len(ents), err)
	}
	for _, gone := range []string{filepath.Join(view(mp, t0), "dst"), filepath.Join(view(mp, t1), "src")} {
		if _, err := os.Lstat(gone); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s exists (%v)", gone, err)
		}
	}
	// Undo back to before the first mv: the tree is src again, unedited.
	rewindT(t, mp, t1)
	if got := read(filepath.Join(mp, "dst", "d1", "f1")); got != "content 1\n" {
		t.Fatalf("after rewind to %d, dst/d1/f1 = %q", t1, got)
	}
	if _, err := os.Lstat(filepath.Join(mp, "src")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("after rewind to %d, src exists (%v)", t1, err)
	}
	rewindT(t, mp, t0)
	if got := read(filepath.Join(mp, "src", "d2", "f8")); got != "content 8\n" {
		t.Fatalf("after rewind to %d, src/d2/f8 = %q", t0, got)
	}
	if _, err := os.Lstat(filepath.Join(mp, "dst")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("after rewind to %d, dst exists (%v)", t0, err)
	}
}
