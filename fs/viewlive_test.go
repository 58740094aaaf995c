package fs

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/zerofs/zerofs/rewind"
)

// TestViewLiveReadDuringChange: a lookup in @T of a path unchanged since
// T stats the workspace file, and a readlink reads the workspace link. A
// change captured and made just before that read (a writer running while
// @T is read) must not show in the answer: the kernel keeps a lookup's
// attributes, and a read of the view stops at their size
// (e2e/TestParallelWritersAndRewinds read @T/w/o0 as empty while a writer
// truncated it, and as 1..44 afterwards). The change is forced into that
// window (beforeLiveRead); before Lookup and Readlink checked again, they
// answered f's new size and l's new target.
func TestViewLiveReadDuringChange(t *testing.T) {
	ws := t.TempDir()
	m := mountT(t, Options{Workspace: ws})
	mp := m.Mountpoint()
	writeFile(t, filepath.Join(mp, "f"), "at T\n")
	if err := os.Symlink("a", filepath.Join(mp, "l")); err != nil {
		t.Fatal(err)
	}
	waitReleased(t, m) // else the step captures f as held open
	T := stepT(t, mp, "s")
	if _, err := os.Stat(view(mp, T)); err != nil {
		t.Fatal(err)
	}
	root := m.fs.root.GetChild("@" + strconv.FormatUint(uint64(T), 10))
	if root == nil {
		t.Fatalf("@%d is not known after its lookup", T)
	}
	v := root.Operations().(*viewNode)
	// during makes fn's change, captured as the mount does, when path is
	// about to be read live.
	var done bool
	during := func(path string, fn func() error) {
		done = false
		beforeLiveRead = func(p string) {
			if p != path || done {
				return
			}
			done = true
			release, _, err := m.Engine().Begin(context.Background(), rewind.Caller{}, rewind.Change{Path: path})
			if err != nil {
				t.Error(err)
				return
			}
			defer release()
			if err := fn(); err != nil {
				t.Error(err)
			}
		}
	}
	t.Cleanup(func() { beforeLiveRead = nil })

	during("f", func() error { return os.WriteFile(filepath.Join(ws, "f"), []byte("x"), 0o644) })
	var out fuse.EntryOut
	if _, errno := v.Lookup(context.Background(), "f", &out); errno != 0 {
		t.Fatalf("lookup of f in @%d: %v", T, errno)
	}
	if !done {
		t.Fatal("the lookup did not stat f as live")
	}
	if out.Attr.Size != 5 {
		t.Errorf("lookup of f in @%d, changed while looked up: size %d, want 5 (\"at T\\n\")", T, out.Attr.Size)
	}
	if got := readFile(t, filepath.Join(view(mp, T), "f")); got != "at T\n" {
		t.Errorf("@%d/f = %q, want %q", T, got, "at T\n")
	}

	beforeLiveRead = nil
	ch, errno := v.Lookup(context.Background(), "l", &out)
	if errno != 0 {
		t.Fatalf("lookup of l in @%d: %v", T, errno)
	}
	during("l", func() error {
		if err := os.Remove(filepath.Join(ws, "l")); err != nil {
			return err
		}
		return os.Symlink("b", filepath.Join(ws, "l"))
	})
	target, errno := ch.Operations().(*viewNode).Readlink(context.Background())
	if !done {
		t.Fatal("readlink did not read l as live")
	}
	if errno != 0 || string(target) != "a" {
		t.Errorf("readlink of l in @%d, changed while read: %q, %v; want a", T, target, errno)
	}
}

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
