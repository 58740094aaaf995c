package blobstore

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/zerofs/zerofs/record"
)

// TestStashAt: StashAt links a workspace file by its name, unread, and
// returns the stash's own lstat (the workspace file's inode, size and
// mode); Name then hashes it to the content's blob (trusting that stat:
// no fstat), and Unstash leaves the blob. Everything Stash refuses it
// refuses too, leaving nothing in kept/: a symlink, a directory, a file
// with another link, one open for writing, a name that is gone.
func TestStashAt(t *testing.T) {
	base := t.TempDir()
	s := openT(t, Options{})
	ws := filepath.Join(base, "ws")
	data := randBytes(7, 5000)
	f := wsFile(t, ws, data)
	f.Close()
	os.Chmod(f.Name(), 0o640)
	dir, err := os.Open(ws)
	if err != nil {
		t.Fatal(err)
	}
	defer dir.Close()
	dfd := int(dir.Fd())
	wsIno, _ := inode(t, f.Name())
	name, st, ok, err := s.StashAt(dfd, filepath.Base(f.Name()), func(_, _ uint64) bool { return false })
	if err != nil || !ok || !record.IsStashName(name) {
		t.Fatalf("StashAt: %q, ok %v, err %v", name, ok, err)
	}
	if st.Ino != wsIno || st.Size != int64(len(data)) || st.Mode&0o7777 != 0o640 || st.Nlink != 2 {
		t.Fatalf("StashAt's stat: inode %d, %d bytes, mode %o, %d links; want inode %d, %d bytes, mode 640, 2 links",
			st.Ino, st.Size, st.Mode&0o7777, st.Nlink, wsIno, len(data))
	}
	os.Remove(f.Name())
	if ino, _ := inode(t, filepath.Join(s.dir, keptDirName, name)); ino != wsIno {
		t.Fatalf("stash is inode %d, want the workspace file's %d", ino, wsIno)
	}
	id, n, err := s.Name(name)
	if err != nil || id != Sum(data) || n != int64(len(data)) {
		t.Fatalf("Name: %s, %d bytes, %v; want %s", id.Short(), n, err, Sum(data).Short())
	}
	if err := s.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := s.Unstash([]string{name}); err != nil {
		t.Fatal(err)
	}
	if got, err := s.Get(id); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("Get: %d bytes, %v", len(got), err)
	}

	// Refusals: nothing is left in kept/ but the blob above.
	os.Symlink("target", filepath.Join(ws, "link"))
	os.Mkdir(filepath.Join(ws, "sub"), 0o755)
	two := wsFile(t, ws, []byte("two links\n"))
	two.Close()
	os.Link(two.Name(), filepath.Join(ws, "other"))
	w := wsFile(t, ws, []byte("open for writing\n"))
	w.Close()
	wIno, _ := inode(t, w.Name())
	writing := func(_, ino uint64) bool { return ino == wIno }
	for _, refused := range []string{"link", "sub", filepath.Base(two.Name()), filepath.Base(w.Name()), "gone"} {
		name, _, ok, err := s.StashAt(dfd, refused, writing)
		if err != nil || ok {
			t.Fatalf("StashAt(%s): %q, ok %v, err %v; want refused", refused, name, ok, err)
		}
	}
	if left, err := s.Stashes(); err != nil || len(left) != 0 {
		t.Fatalf("stashes left by refusals: %v, %v", left, err)
	}
	if _, nlink := inode(t, two.Name()); nlink != 2 {
		t.Fatalf("the file with two links has %d, want 2", nlink)
	}
	ents, _ := os.ReadDir(filepath.Join(s.dir, keptDirName))
	if len(ents) != 1 || ents[0].Name() != id.String() {
		t.Fatalf("kept/ holds %v, want only %s", ents, id.Short())
	}

	// With Options.Sync a stash must be fsynced itself: StashAt refuses.
	sy := openT(t, Options{Sync: true})
	if _, _, _, err := sy.StashAt(dfd, "other", nil); err == nil {
		t.Fatal("StashAt on a store with Sync: no error")
	}
	var lst unix.Stat_t
	if err := unix.Lstat(filepath.Join(ws, "other"), &lst); err != nil || lst.Nlink != 2 {
		t.Fatalf("other: %d links, %v", lst.Nlink, err)
	}
}
