package fs

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// descriptorsOn counts this process's descriptors on the backing path p
// (the mount is served in this process), removed or not.
func descriptorsOn(t *testing.T, p string) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, ent := range ents {
		target, err := os.Readlink(filepath.Join("/proc/self/fd", ent.Name()))
		if err == nil && strings.TrimSuffix(target, " (deleted)") == p {
			n++
		}
	}
	return n
}

// TestRmdirKeptDescriptorHeld: a removed directory that the daemon kept a
// descriptor of (requests in it: the create and unlink of a file) holds
// that descriptor for the node (heldFds) rather than opening the directory
// again, so the daemon has one descriptor on it, not two, while a process
// still has it open; fstat of that process's handle answers, nlink 0.
func TestRmdirKeptDescriptorHeld(t *testing.T) {
	m := mountT(t, Options{})
	mp, ws := m.Mountpoint(), m.fs.workspace
	if err := os.MkdirAll(filepath.Join(mp, "a", "b"), 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(mp, "a", "b", "f"), "x")
	if err := os.Remove(filepath.Join(mp, "a", "b", "f")); err != nil {
		t.Fatal(err)
	}
	backing := filepath.Join(ws, "a", "b")
	if got := descriptorsOn(t, backing); got != 1 {
		t.Fatalf("%d descriptors on a/b before the rmdir, want 1 (kept for requests in it)", got)
	}
	f, err := os.Open(filepath.Join(mp, "a", "b"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := os.Remove(filepath.Join(mp, "a", "b")); err != nil {
		t.Fatal(err)
	}
	if got := descriptorsOn(t, backing); got != 1 {
		t.Errorf("%d descriptors on the removed a/b, want 1: the kept one, held for the node", got)
	}
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil || st.Nlink != 0 || st.Mode&unix.S_IFMT != unix.S_IFDIR {
		t.Fatalf("fstat of the removed directory: %v, nlink %d mode %o; want a directory, nlink 0", err, st.Nlink, st.Mode)
	}
	// A directory of the same name made again is a new one.
	if err := os.Mkdir(filepath.Join(mp, "a", "b"), 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(mp, "a", "b", "g"), "y")
	if _, err := os.Lstat(filepath.Join(backing, "g")); err != nil {
		t.Fatalf("a file made in the new a/b: %v", err)
	}
}
