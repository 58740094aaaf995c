package fs

import (
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// TestRemovedXattrsRewound: an rm -rf through the mount records the
// removed file's and directory's xattrs (a file's from its stash in the
// store, a directory's through its parent's descriptor), and a rewind
// gives them back, with the file's content and modes.
func TestRemovedXattrsRewound(t *testing.T) {
	m := mountT(t, Options{})
	mp := m.Mountpoint()
	d := filepath.Join(mp, "d")
	if err := os.Mkdir(d, 0o750); err != nil {
		t.Fatal(err)
	}
	f := filepath.Join(d, "f")
	writeFile(t, f, "content of f\n")
	os.Chmod(f, 0o604)
	if err := unix.Setxattr(f, "user.file", []byte("on the file"), 0); err != nil {
		if err == unix.EOPNOTSUPP {
			t.Skip("backing filesystem has no user xattrs")
		}
		t.Fatal(err)
	}
	if err := unix.Setxattr(d, "user.dir", []byte("on the directory"), 0); err != nil {
		t.Fatal(err)
	}
	before := stepT(t, mp, "remove")
	if err := os.RemoveAll(d); err != nil {
		t.Fatal(err)
	}
	rewindT(t, mp, before)
	if got, err := os.ReadFile(f); err != nil || string(got) != "content of f\n" {
		t.Fatalf("d/f after the rewind: %q, %v", got, err)
	}
	for _, c := range []struct{ path, name, want string }{{f, "user.file", "on the file"}, {d, "user.dir", "on the directory"}} {
		buf := make([]byte, 64)
		n, err := unix.Lgetxattr(c.path, c.name, buf)
		if err != nil || string(buf[:n]) != c.want {
			t.Errorf("%s %s after the rewind: %q, %v; want %q", filepath.Base(c.path), c.name, buf[:max(n, 0)], err, c.want)
		}
	}
	if st, err := os.Stat(f); err != nil || st.Mode().Perm() != 0o604 {
		t.Errorf("d/f mode after the rewind: %v, %v; want 0604", st, err)
	}
	if st, err := os.Stat(d); err != nil || st.Mode().Perm() != 0o750 {
		t.Errorf("d mode after the rewind: %v, %v; want 0750", st, err)
	}
}
