package fs

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/zerofs/zerofs/internal/testsupport"
)

// A burst of creates, attribute changes and removals in one directory
// resolves the directory by path once, not once per request (fsys.dirs):
// each request works relative to its kept descriptor.
func TestDirDescriptorKept(t *testing.T) {
	m := mountT(t, Options{})
	mp := m.Mountpoint()
	d := filepath.Join(mp, "a", "b")
	if err := os.MkdirAll(d, 0o755); err != nil {
		t.Fatal(err)
	}
	before := m.fs.dirs.opened.Load()
	when := time.Unix(1_600_000_000, 0)
	for i := range 50 {
		p := filepath.Join(d, "f"+strconv.Itoa(i))
		writeFile(t, p, "x")
		if err := os.Chmod(p, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(p, when, when); err != nil {
			t.Fatal(err)
		}
		st, err := os.Lstat(p)
		if err != nil {
			t.Fatal(err)
		}
		if st.Mode().Perm() != 0o600 || !st.ModTime().Equal(when) {
			t.Fatalf("%s: mode %v, mtime %v; want 0600 and %v", p, st.Mode().Perm(), st.ModTime(), when)
		}
	}
	stepT(t, mp, "remove")
	for i := range 50 {
		if err := os.Remove(filepath.Join(d, "f"+strconv.Itoa(i))); err != nil {
			t.Fatal(err)
		}
	}
	if got := m.fs.dirs.opened.Load() - before; got > 2 {
		t.Errorf("a/b resolved by path %d times for 250 requests in it; want at most 2", got)
	}
	ents, err := os.ReadDir(filepath.Join(m.fs.workspace, "a", "b"))
	if err != nil || len(ents) != 0 {
		t.Fatalf("backing a/b holds %d entries (%v), want none", len(ents), err)
	}
}

// A create through a handle of a directory that a rewind moved behind the
// kernel's back (from b back to a, by its rename record), after a create
// in it kept its descriptor, does not land where the rewind moved it: the
// rewind forgets the node's name, so the node resolves to nothing, as a
// walk of its path would (kept descriptors are also dropped by every
// rewind: dirCache).
func TestDirDescriptorNotAfterRewind(t *testing.T) {
	m := mountT(t, Options{})
	mp := m.Mountpoint()
	if err := os.Mkdir(filepath.Join(mp, "a"), 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(mp, "a", "x"), "x")
	t0 := stepT(t, mp, "move")
	if err := os.Rename(filepath.Join(mp, "a"), filepath.Join(mp, "b")); err != nil {
		t.Fatal(err)
	}
	dfd, err := unix.Open(filepath.Join(mp, "b"), unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(dfd)
	// A create in b keeps b's descriptor.
	fd, err := unix.Openat(dfd, "y", unix.O_CREAT|unix.O_WRONLY, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	unix.Close(fd)
	m.fs.noInvalidate.Store(^uint32(0)) // the kernel keeps b's node and entries
	rewindT(t, mp, t0)
	m.fs.noInvalidate.Store(0)
	if _, err := os.Lstat(filepath.Join(m.fs.workspace, "a", "x")); err != nil {
		t.Fatalf("the rewind did not move b back to a: %v", err)
	}
	fd, err = unix.Openat(dfd, "z", unix.O_CREAT|unix.O_WRONLY, 0o644)
	if err == nil {
		unix.Close(fd)
	}
	if _, err := os.Lstat(filepath.Join(m.fs.workspace, "a", "z")); err == nil {
		t.Fatal("a create through b's old node landed in a, where the rewind moved the directory")
	}
}

// The directory descriptors a mount keeps are closed when it unmounts: a
// process that mounts and unmounts workspaces (the tests, a library user)
// keeps none open.
func TestDirDescriptorsClosedAtUnmount(t *testing.T) {
	m := mountT(t, Options{})
	mp, ws := m.Mountpoint(), m.fs.workspace
	if err := os.MkdirAll(filepath.Join(mp, "a", "b"), 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(mp, "a", "b", "f"), "x")
	if m.fs.dirs.opened.Load() == 0 {
		t.Fatal("no directory descriptor was kept")
	}
	if err := m.Unmount(); err != nil {
		t.Fatal(err)
	}
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	for _, ent := range ents {
		target, err := os.Readlink(filepath.Join("/proc/self/fd", ent.Name()))
		if err == nil && strings.HasPrefix(target, filepath.Join(ws, "a")) {
			t.Errorf("descriptor %s still open on %s after the unmount", ent.Name(), target)
		}
	}
}

// A kept directory moved behind the daemon's back (another process renames
// it in the backing directory: within the workspace, or out of it) is no
// longer used: a create through the mount in the name the kernel still
// knows fails as a walk of its path would, and lands neither where the
// directory went nor outside the workspace.
func TestDirDescriptorMovedBehindBack(t *testing.T) {
	for _, to := range []string{"inside", "outside"} {
		t.Run(to, func(t *testing.T) {
			m := mountT(t, Options{})
			mp, ws := m.Mountpoint(), m.fs.workspace
			if err := os.MkdirAll(filepath.Join(mp, "a", "b"), 0o755); err != nil {
				t.Fatal(err)
			}
			writeFile(t, filepath.Join(mp, "a", "b", "f"), "x")
			dest := filepath.Join(ws, "z")
			if to == "outside" {
				dest = filepath.Join(t.TempDir(), "z")
			}
			if err := os.Rename(filepath.Join(ws, "a"), dest); err != nil {
				t.Fatal(err)
			}
			// The move is reported asynchronously: wait for it.
			n := 0
			if testsupport.Poll(5*time.Second, func() bool {
				m.fs.dirs.mu.Lock()
				n = len(m.fs.dirs.m)
				m.fs.dirs.mu.Unlock()
				return n == 0
			}) != nil {
				t.Fatalf("%d directories still kept 5 s after they moved", n)
			}
			err := os.WriteFile(filepath.Join(mp, "a", "b", "g"), []byte("y"), 0o644)
			if _, serr := os.Lstat(filepath.Join(dest, "b", "g")); serr == nil {
				t.Fatalf("a create in a/b through the mount (%v) landed in %s, where a went", err, dest)
			}
		})
	}
}
