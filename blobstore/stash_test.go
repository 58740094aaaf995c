package blobstore

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/zerofs/zerofs/record"
)

// TestStashNameUnstash: a stash is the workspace file's own inode under a
// stash name, not read and not a blob; Name hashes it and links the same
// inode as kept/<sha256>, which then reads back verified; Unstash removes
// only the stash's link; the same content stashed twice names one blob;
// after a reopen a stash is named from the store.
func TestStashNameUnstash(t *testing.T) {
	for _, sync := range []bool{false, true} {
		t.Run(map[bool]string{false: "batch", true: "always"}[sync], func(t *testing.T) {
			base := t.TempDir()
			s, err := Open(filepath.Join(base, "blobs"), Options{Sync: sync})
			if err != nil {
				t.Fatal(err)
			}
			data := randBytes(11, 200<<10)
			f := wsFile(t, filepath.Join(base, "ws"), data)
			wsIno, _ := inode(t, f.Name())
			name, n, ok, err := s.Stash(f, func(_, _ uint64) bool { return false })
			f.Close()
			if err != nil || !ok || n != int64(len(data)) || !record.IsStashName(name) {
				t.Fatalf("Stash: %q, %d bytes, ok %v, err %v", name, n, ok, err)
			}
			os.Remove(f.Name())
			if ino, _ := inode(t, filepath.Join(base, "blobs", keptDirName, name)); ino != wsIno {
				t.Fatalf("stash is inode %d, want the workspace file's %d", ino, wsIno)
			}
			if _, err := s.Get(Sum(data)); !errors.Is(err, ErrNotFound) {
				t.Fatalf("Get before Name: %v, want ErrNotFound (a stash is no blob)", err)
			}
			id, n, err := s.Name(name)
			if err != nil || id != Sum(data) || n != int64(len(data)) {
				t.Fatalf("Name: %s, %d bytes, %v; want %s", id.Short(), n, err, Sum(data).Short())
			}
			// The same content stashed again names the same blob.
			g := wsFile(t, filepath.Join(base, "ws"), data)
			name2, _, ok, err := s.Stash(g, nil)
			g.Close()
			if err != nil || !ok {
				t.Fatalf("second Stash: ok %v, err %v", ok, err)
			}
			os.Remove(g.Name())
			if id2, _, err := s.Name(name2); err != nil || id2 != id {
				t.Fatalf("second Name: %s, %v; want %s", id2.Short(), err, id.Short())
			}
			if err := s.Sync(); err != nil {
				t.Fatal(err)
			}
			if err := s.Unstash([]string{name, name2}); err != nil {
				t.Fatal(err)
			}
			if left, err := s.Stashes(); err != nil || len(left) != 0 {
				t.Fatalf("Stashes after Unstash: %v, %v; want none", left, err)
			}
			if ino, nlink := inode(t, s.keptPath(id)); ino != wsIno || nlink != 1 {
				t.Fatalf("kept/%s: inode %d, %d links; want the workspace file's %d, 1 link", id.Short(), ino, nlink, wsIno)
			}
			if got, err := s.Get(id); err != nil || !bytes.Equal(got, data) {
				t.Fatalf("Get after Name: %d bytes, %v", len(got), err)
			}

			// A stash left by a crash is named from the store after a
			// reopen.
			h := wsFile(t, filepath.Join(base, "ws"), []byte("left by a crash\n"))
			name3, _, ok, err := s.Stash(h, nil)
			h.Close()
			if err != nil || !ok {
				t.Fatalf("third Stash: ok %v, err %v", ok, err)
			}
			os.Remove(h.Name())
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			s, err = Open(filepath.Join(base, "blobs"), Options{Sync: sync})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			if left, _ := s.Stashes(); len(left) != 1 || left[0] != name3 {
				t.Fatalf("Stashes after reopen: %v, want [%s]", left, name3)
			}
			if id3, _, err := s.Name(name3); err != nil || id3 != Sum([]byte("left by a crash\n")) {
				t.Fatalf("Name after reopen: %s, %v", id3.Short(), err)
			}
		})
	}
}

// TestStashUntrusted: a name read back from the store is checked: one that
// is not a stash name is ErrCorrupt without touching anything, one that is
// not there ErrNotFound, one that is not a regular file ErrCorrupt.
func TestStashUntrusted(t *testing.T) {
	base := t.TempDir()
	s, err := Open(filepath.Join(base, "blobs"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for _, name := range []string{"../../etc/passwd", "p-", "p-0123456789abcdef0123456789ABCDEF", Sum(nil).String(), "p-0123456789abcdef0123456789abcdef/x"} {
		if _, _, err := s.Name(name); !errors.Is(err, ErrCorrupt) {
			t.Errorf("Name(%q): %v, want ErrCorrupt", name, err)
		}
	}
	const missing = "p-0123456789abcdef0123456789abcdef"
	if _, _, err := s.Name(missing); !errors.Is(err, ErrNotFound) {
		t.Errorf("Name of a missing stash: %v, want ErrNotFound", err)
	}
	for _, mk := range []func(string) error{
		func(p string) error { return os.Mkdir(p, 0o700) },
		func(p string) error { return os.Symlink("/etc/passwd", p) },
	} {
		p := filepath.Join(base, "blobs", keptDirName, missing)
		os.RemoveAll(p)
		if err := mk(p); err != nil {
			t.Fatal(err)
		}
		if _, _, err := s.Name(missing); !errors.Is(err, ErrCorrupt) {
			t.Errorf("Name of a stash that is not a regular file: %v, want ErrCorrupt", err)
		}
	}
}

// TestStashDetach: an open for writing of a stashed inode not yet named
// (an unlink that failed after its stash) copies its content into a pack
// first; Name then returns that content's id, whatever was written since.
func TestStashDetach(t *testing.T) {
	base := t.TempDir()
	s, err := Open(filepath.Join(base, "blobs"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	data := []byte("before the write\n")
	f := wsFile(t, filepath.Join(base, "ws"), data)
	name, _, ok, err := s.Stash(f, nil)
	f.Close()
	if err != nil || !ok {
		t.Fatalf("Stash: ok %v, err %v", ok, err)
	}
	w, err := os.OpenFile(f.Name(), os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	got, err := s.Detach(int(w.Fd()))
	if err != nil || got != name {
		t.Fatalf("Detach: %q, %v; want the stash %q", got, err, name)
	}
	if _, err := w.WriteAt([]byte("AFTER"), 0); err != nil {
		t.Fatal(err)
	}
	id, _, err := s.Name(name)
	if err != nil || id != Sum(data) {
		t.Fatalf("Name after the write: %s, %v; want the content before it (%s)", id.Short(), err, Sum(data).Short())
	}
	if b, err := s.Get(id); err != nil || !bytes.Equal(b, data) {
		t.Fatalf("Get: %q, %v", b, err)
	}
}

// TestStashMove: HashStash hashes a stash and links nothing; MoveStashes
// then renames it to its blob (the same inode, one link, read back
// verified), removes a second stash of the same content instead, removes
// a stash that an open for writing detached into a pack between the hash
// and the move (the write never reaches the blob), and treats a stash
// already gone as moved. After a reopen a stash left behind is moved from
// the store.
func TestStashMove(t *testing.T) {
	for _, sync := range []bool{false, true} {
		t.Run(map[bool]string{false: "batch", true: "always"}[sync], func(t *testing.T) {
			base := t.TempDir()
			s, err := Open(filepath.Join(base, "blobs"), Options{Sync: sync})
			if err != nil {
				t.Fatal(err)
			}
			stash := func(data []byte) (string, uint64, string) {
				t.Helper()
				f := wsFile(t, filepath.Join(base, "ws"), data)
				ino, _ := inode(t, f.Name())
				name, _, ok, err := s.Stash(f, nil)
				f.Close()
				if err != nil || !ok {
					t.Fatalf("Stash: ok %v, err %v", ok, err)
				}
				return name, ino, f.Name()
			}
			data := randBytes(12, 300<<10)
			name, ino, ws := stash(data)
			os.Remove(ws)
			id, n, err := s.HashStash(name)
			if err != nil || id != Sum(data) || n != int64(len(data)) {
				t.Fatalf("HashStash: %s, %d, %v; want %s", id.Short(), n, err, Sum(data).Short())
			}
			if s.Has(id) {
				t.Fatalf("HashStash linked the blob")
			}
			name2, _, ws2 := stash(data)
			os.Remove(ws2)
			small := []byte("detached before the move\n")
			name3, _, ws3 := stash(small)
			id3, _, err := s.HashStash(name3)
			if err != nil {
				t.Fatal(err)
			}
			// An unlink that failed after its stash: the workspace name
			// still holds the inode, and an open for writing detaches it.
			w, err := os.OpenFile(ws3, os.O_WRONLY, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer w.Close()
			if got, err := s.Detach(int(w.Fd())); err != nil || got != name3 {
				t.Fatalf("Detach: %q, %v; want %q", got, err, name3)
			}
			if _, err := w.WriteAt([]byte("WRITTEN"), 0); err != nil {
				t.Fatal(err)
			}
			const gone = "p-0123456789abcdef0123456789abcdef"
			if err := s.MoveStashes([]Moved{{name, id}, {name2, id}, {name3, id3}, {gone, Sum(nil)}}); err != nil {
				t.Fatal(err)
			}
			if left, err := s.Stashes(); err != nil || len(left) != 0 {
				t.Fatalf("Stashes after MoveStashes: %v, %v; want none", left, err)
			}
			if got, nlink := inode(t, s.keptPath(id)); got != ino || nlink != 1 {
				t.Fatalf("kept/%s: inode %d, %d links; want the removed file's %d, 1 link", id.Short(), got, nlink, ino)
			}
			if got, err := s.Get(id); err != nil || !bytes.Equal(got, data) {
				t.Fatalf("Get after the move: %d bytes, %v", len(got), err)
			}
			if got, err := s.Get(id3); err != nil || !bytes.Equal(got, small) {
				t.Fatalf("Get of the detached stash's blob: %q, %v; want %q", got, err, small)
			}
			if _, err := os.Lstat(s.keptPath(id3)); err == nil {
				t.Fatalf("the detached stash was moved to kept/%s: a written inode as a blob", id3.Short())
			}
			if err := s.Sync(); err != nil {
				t.Fatal(err)
			}

			// Left by a crash: moved from the store after a reopen.
			other := []byte("left by a crash\n")
			name4, _, ws4 := stash(other)
			os.Remove(ws4)
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			if s, err = Open(filepath.Join(base, "blobs"), Options{Sync: sync}); err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			id4, _, err := s.HashStash(name4)
			if err != nil || id4 != Sum(other) {
				t.Fatalf("HashStash after reopen: %s, %v", id4.Short(), err)
			}
			if err := s.MoveStashes([]Moved{{name4, id4}}); err != nil {
				t.Fatal(err)
			}
			if got, err := s.Get(id4); err != nil || !bytes.Equal(got, other) {
				t.Fatalf("Get after reopen and move: %q, %v", got, err)
			}
			if left, _ := s.Stashes(); len(left) != 0 {
				t.Fatalf("Stashes after the move: %v", left)
			}
		})
	}
}

// TestHashStashes: a batch of stashes of every small size, more than one
// io_uring submission holds, hashes as HashStash does each: a large one,
// one gone from the store, one not a stash name, and one that grew since
// it was stashed (read again whole) among them.
func TestHashStashes(t *testing.T) {
	base := t.TempDir()
	s, err := Open(filepath.Join(base, "blobs"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var names []string
	var want [][]byte
	add := func(data []byte, remove bool) *os.File {
		f := wsFile(t, filepath.Join(base, "ws"), data)
		name, _, ok, err := s.Stash(f, nil)
		if err != nil || !ok {
			t.Fatalf("Stash: ok %v, err %v", ok, err)
		}
		if remove {
			os.Remove(f.Name())
		}
		names, want = append(names, name), append(want, data)
		return f
	}
	for i := range 300 {
		size := []int{0, 1, 100, 4096, hashSmall - 1, hashSmall}[i%6]
		add(randBytes(uint64(i), size), true).Close()
	}
	add(randBytes(301, 3*hashSmall), true).Close()
	grown := add([]byte("short\n"), false)
	grown.Close()
	w, err := os.OpenFile(grown.Name(), os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	_, err = w.WriteAt([]byte("and longer since\n"), 6)
	w.Close()
	if err != nil {
		t.Fatal(err)
	}
	want[len(want)-1] = []byte("short\nand longer since\n")
	const missing = "p-0123456789abcdef0123456789abcdef"
	names = append(names, missing, "../x")
	before := ringHashed.Load()
	got := s.HashStashes(names)
	if len(got) != len(names) {
		t.Fatalf("HashStashes: %d results for %d names", len(got), len(names))
	}
	for i, data := range want {
		if got[i].Err != nil || got[i].ID != Sum(data) || got[i].N != int64(len(data)) {
			t.Fatalf("stash %d (%d bytes): %s, %d, %v; want %s", i, len(data), got[i].ID.Short(), got[i].N, got[i].Err, Sum(data).Short())
		}
	}
	if err := got[len(want)].Err; !errors.Is(err, ErrNotFound) {
		t.Errorf("a stash gone from the store: %v, want ErrNotFound", err)
	}
	if err := got[len(want)+1].Err; !errors.Is(err, ErrCorrupt) {
		t.Errorf("not a stash name: %v, want ErrCorrupt", err)
	}
	if s.uring() == nil {
		t.Logf("no io_uring here: every stash was hashed by HashStash")
	} else if n := ringHashed.Load() - before; n != 300 {
		t.Errorf("%d stashes hashed through io_uring, want the 300 small ones", n)
	}
}

// TestMoveAcrossMounts: PrepareMove prepares no move of a file on another
// mount than the store's (a bind mount of the same filesystem, where a
// rename fails with EXDEV); where the kernel gives no mount id, Do's
// rename and link fail with EXDEV, nothing changes (the file keeps its
// name, no stash), and keeping goes off.
func TestMoveAcrossMounts(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("a bind mount needs root")
	}
	base := t.TempDir()
	ws := filepath.Join(base, "ws")
	if err := os.Mkdir(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount(ws, ws, "", unix.MS_BIND, ""); err != nil {
		t.Skipf("bind mount: %v", err)
	}
	t.Cleanup(func() {
		if unix.Unmount(ws, 0) != nil {
			unix.Unmount(ws, unix.MNT_DETACH)
		}
	})
	s, err := Open(filepath.Join(base, "blobs"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := os.WriteFile(filepath.Join(ws, "f"), []byte("data\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	dir, err := os.Open(ws)
	if err != nil {
		t.Fatal(err)
	}
	defer dir.Close()
	if s.kept.mnt != 0 {
		if _, _, ok, err := s.PrepareMove(int(dir.Fd()), "f", nil); ok || err != nil {
			t.Fatalf("PrepareMove of a file on another mount: ok %v, %v; want no move", ok, err)
		}
	}
	s.kept.mnt = 0 // as on a kernel that gives no mount id
	m, _, ok, err := s.PrepareMove(int(dir.Fd()), "f", nil)
	if !ok || err != nil {
		t.Fatalf("PrepareMove: ok %v, %v", ok, err)
	}
	stashed, err := m.Do(int(dir.Fd()), "f")
	if stashed || !errors.Is(err, unix.EXDEV) {
		t.Fatalf("Do across mounts: stashed %v, %v; want nothing stashed, EXDEV", stashed, err)
	}
	if _, err := os.Stat(filepath.Join(ws, "f")); err != nil {
		t.Fatalf("the file lost its name: %v", err)
	}
	if left, _ := s.Stashes(); len(left) != 0 {
		t.Fatalf("stashes after a failed move: %v", left)
	}
	if ok, _ := s.KeepMode(); ok {
		t.Fatalf("keeping still on after EXDEV")
	}
}
