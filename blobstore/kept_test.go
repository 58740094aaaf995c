package blobstore

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync/atomic"
	"syscall"
	"testing"
)

// wsSeq names the workspace files keepT writes.
var wsSeq atomic.Int64

// keepT writes data to a new file in directory ws (made if needed), keeps
// it in s as a capture of a removed file would, and removes the file's
// name, as the unlink the capture protects does. It fails the test if the
// file was not kept.
func keepT(t testing.TB, s *Store, ws string, data []byte) ID {
	t.Helper()
	f := wsFile(t, ws, data)
	defer f.Close()
	id, n, ok, err := s.Keep(f, func(_, _ uint64) bool { return false })
	if err != nil || !ok {
		t.Fatalf("Keep: ok %v, err %v; want it kept", ok, err)
	}
	if id != Sum(data) || n != int64(len(data)) {
		t.Fatalf("Keep: got %s, %d bytes; want %s, %d", id.Short(), n, Sum(data).Short(), len(data))
	}
	if err := os.Remove(f.Name()); err != nil {
		t.Fatal(err)
	}
	return id
}

// wsFile writes data to a new file in ws and opens it for reading.
func wsFile(t testing.TB, ws string, data []byte) *os.File {
	t.Helper()
	if err := os.MkdirAll(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(ws, "f"+strconv.FormatInt(wsSeq.Add(1), 10))
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// inode is f's inode number and link count.
func inode(t testing.TB, path string) (ino uint64, nlink uint64) {
	t.Helper()
	var st syscall.Stat_t
	if err := syscall.Stat(path, &st); err != nil {
		t.Fatal(err)
	}
	return st.Ino, uint64(st.Nlink)
}

// TestKeepLinks: a kept file is its own inode under kept/<sha256>, not a
// copy; it reads back verified, is listed as kept, counted in Size and
// Stats, survives a reopen, and Prune removes it when nothing keeps it.
func TestKeepLinks(t *testing.T) {
	base := t.TempDir()
	s, err := Open(filepath.Join(base, "blobs"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { s.closeFiles() }()
	data := randBytes(7, 300<<10)
	f := wsFile(t, filepath.Join(base, "ws"), data)
	wsIno, _ := inode(t, f.Name())
	id, _, ok, err := s.Keep(f, func(_, _ uint64) bool { return false })
	f.Close()
	if err != nil || !ok {
		t.Fatalf("Keep: ok %v, err %v", ok, err)
	}
	os.Remove(f.Name())
	if err := s.Sync(); err != nil {
		t.Fatal(err)
	}
	path, _, n, err := s.Locate(id)
	if err != nil {
		t.Fatal(err)
	}
	if ino, nlink := inode(t, path); ino != wsIno || nlink != 1 || path != s.keptPath(id) || n != int64(len(data)) {
		t.Fatalf("kept blob at %s: inode %d (links %d), %d bytes; want %s, the workspace file's inode %d, 1 link, %d bytes", path, ino, nlink, n, s.keptPath(id), wsIno, len(data))
	}
	got, err := s.Get(id)
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("Get: %d bytes, %v; want the content", len(got), err)
	}
	// The same content again: kept already (EEXIST), nothing new linked;
	// content already packed: nothing linked at all.
	keepT(t, s, filepath.Join(base, "ws"), data)
	packed := putT(t, s, []byte("packed before"))
	if got := keepT(t, s, filepath.Join(base, "ws"), []byte("packed before")); got != packed {
		t.Fatalf("Keep of packed content: %s, want %s", got.Short(), packed.Short())
	}
	if ents, _ := os.ReadDir(filepath.Join(s.Dir(), keptDirName)); len(ents) != 1 {
		t.Fatalf("kept/ holds %d files, want 1 (dedup)", len(ents))
	}
	if s.Size() < int64(len(data)) {
		t.Fatalf("Size %d does not count the kept blob of %d bytes", s.Size(), len(data))
	}
	s.Close()
	if s, err = Open(filepath.Join(base, "blobs"), Options{}); err != nil {
		t.Fatal(err)
	}
	st, err := s.Stats()
	if err != nil || st.Kept != 1 || st.Blobs != 2 {
		t.Fatalf("Stats after reopen: %+v, %v; want one blob, kept", st, err)
	}
	var kept []BlobInfo
	for _, b := range walkAll(t, s) {
		if b.Kept {
			kept = append(kept, b)
		}
	}
	if len(kept) != 1 || kept[0].ID != id {
		t.Fatalf("Walk: kept %+v, want the kept blob", kept)
	}
	if err := s.Verify(id); err != nil {
		t.Fatal(err)
	}
	res, err := s.Prune(func(b ID) bool { return b == packed })
	if err != nil || len(res.Removed) != 1 || res.Removed[0] != id {
		t.Fatalf("Prune: %+v, %v; want the kept blob removed", res, err)
	}
	if s.Has(id) {
		t.Fatalf("kept blob still there after Prune")
	}
}

// TestKeepFallsBack: Keep refuses (the caller copies) a file with another
// link, one open for writing, one on another filesystem than the store
// (and then stops keeping, saying why), and no file is linked for them.
func TestKeepFallsBack(t *testing.T) {
	base := t.TempDir()
	s := openT(t, Options{})
	ws := filepath.Join(base, "ws")
	refuse := func(name string, f *os.File, writing bool) {
		t.Helper()
		id, _, ok, err := s.Keep(f, func(_, _ uint64) bool { return writing })
		if err != nil || ok {
			t.Fatalf("%s: Keep: %s, ok %v, err %v; want it refused", name, id.Short(), ok, err)
		}
	}
	f := wsFile(t, ws, []byte("two links"))
	if err := os.Link(f.Name(), f.Name()+".other"); err != nil {
		t.Fatal(err)
	}
	refuse("two links", f, false)
	f.Close()
	f = wsFile(t, ws, []byte("open for writing"))
	refuse("open for writing", f, true)
	f.Close()
	if ok, why := s.KeepMode(); !ok {
		t.Fatalf("KeepMode: off (%s) before any EXDEV", why)
	}
	if st, err := os.Stat("/dev/shm"); err == nil && st.IsDir() {
		shm, err := os.MkdirTemp("/dev/shm", "kept-test")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.RemoveAll(shm) })
		f = wsFile(t, shm, []byte("another filesystem"))
		refuse("another filesystem", f, false)
		f.Close()
	}
	ents, _ := os.ReadDir(filepath.Join(s.Dir(), keptDirName))
	if len(ents) != 0 {
		t.Fatalf("kept/ holds %d files after refusals, want none", len(ents))
	}
	// A link the kernel refuses with EXDEV (a bind mount of the same
	// filesystem, the store on a tmpfs) turns keeping off.
	s.KeepOff("store on another filesystem")
	if ok, why := s.KeepMode(); ok || why != "store on another filesystem" {
		t.Fatalf("KeepMode after KeepOff: %v %q", ok, why)
	}
	f = wsFile(t, ws, []byte("after keeping went off"))
	refuse("keeping off", f, false)
	f.Close()
}

// TestKeepDetach: a kept inode that is opened for writing (its unlink
// failed, or a hard link brought it back) is copied into a pack by Detach
// before the write, and its link goes at the next Sync; the blob keeps its
// content.
func TestKeepDetach(t *testing.T) {
	for _, sync := range []bool{false, true} {
		t.Run(map[bool]string{false: "batch", true: "always"}[sync], func(t *testing.T) {
			base := t.TempDir()
			s := openT(t, Options{Sync: sync})
			data := textBytes(9, 50<<10)
			f := wsFile(t, filepath.Join(base, "ws"), data)
			id, _, ok, err := s.Keep(f, func(_, _ uint64) bool { return false })
			f.Close()
			if err != nil || !ok {
				t.Fatalf("Keep: %v %v", ok, err)
			}
			// The unlink failed, say: the workspace name stays, and a
			// writer opens it. Detach copies the blob into a pack first.
			w, err := os.OpenFile(f.Name(), os.O_RDWR, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer w.Close()
			if _, err := s.Detach(int(w.Fd())); err != nil {
				t.Fatal(err)
			}
			if _, inPack := s.lookup(id); !inPack {
				t.Fatalf("after Detach the blob is not in a pack")
			}
			if _, err := w.WriteAt([]byte("changed"), 0); err != nil {
				t.Fatal(err)
			}
			if got, err := s.Get(id); err != nil || !bytes.Equal(got, data) {
				t.Fatalf("Get after the write: %v; want the kept content", err)
			}
			if err := s.Sync(); err != nil {
				t.Fatal(err)
			}
			if _, err := os.Lstat(s.keptPath(id)); !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("kept link still there after Detach and Sync: %v", err)
			}
			if _, err := s.Detach(int(w.Fd())); err != nil {
				t.Fatalf("second Detach: %v", err)
			}
			if err := s.Verify(id); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestCloneRefusedWithoutReflinks: on a filesystem without reflinks (the
// ext4 or tmpfs the tests run on) Clone stores nothing and says why;
// small files are never cloned. (rewind/TestCloneBeforeWrite clones on a
// loop XFS.)
func TestCloneRefusedWithoutReflinks(t *testing.T) {
	base := t.TempDir()
	s := openT(t, Options{})
	var fs syscall.Statfs_t
	if err := syscall.Statfs(s.Dir(), &fs); err != nil {
		t.Fatal(err)
	}
	const xfsMagic, btrfsMagic = 0x58465342, 0x9123683e
	if fs.Type == xfsMagic || fs.Type == btrfsMagic {
		t.Skip("the test directory is on a filesystem that may clone")
	}
	if ok, why := s.CloneMode(); ok || why != "no reflinks on the store's filesystem" {
		t.Fatalf("CloneMode: %v %q", ok, why)
	}
	f := wsFile(t, filepath.Join(base, "ws"), randBytes(11, 2<<20))
	defer f.Close()
	if id, _, ok, err := s.Clone(f); ok || err != nil {
		t.Fatalf("Clone without reflinks: %s, %v, %v; want it refused", id.Short(), ok, err)
	}
	if ents, _ := os.ReadDir(filepath.Join(s.Dir(), keptDirName)); len(ents) != 0 {
		t.Fatalf("kept/ holds %d files after a refused clone", len(ents))
	}
}

// TestDetachDamaged: a kept inode changed behind the store's back (a
// writer outside the mount) is ErrCorrupt to Detach once, and to every
// read; it is not detached again.
func TestDetachDamaged(t *testing.T) {
	base := t.TempDir()
	s := openT(t, Options{})
	data := []byte("kept, then changed outside\n")
	f := wsFile(t, filepath.Join(base, "ws"), data)
	id, _, ok, err := s.Keep(f, func(_, _ uint64) bool { return false })
	f.Close()
	if err != nil || !ok {
		t.Fatalf("Keep: %v %v", ok, err)
	}
	if err := os.WriteFile(f.Name(), []byte("changed behind the store's back\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	w, err := os.OpenFile(f.Name(), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if _, err := s.Detach(int(w.Fd())); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("Detach of a changed kept inode: %v, want ErrCorrupt", err)
	}
	if _, err := s.Detach(int(w.Fd())); err != nil {
		t.Fatalf("second Detach: %v, want nil (not again)", err)
	}
	if err := s.Verify(id); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("Verify: %v, want ErrCorrupt", err)
	}
}

// TestKeepSyncManyWithSyncfs: a batch-mode Sync of at least syncfsFrom
// kept files makes them durable with one syncfs of the store's filesystem
// (their data and their entries in one commit), not an fdatasync each and
// a directory fsync; fewer are synced one by one (TestKeepSyncOrder).
// --sync always is unaffected: Keep itself syncs each file.
func TestKeepSyncManyWithSyncfs(t *testing.T) {
	var log []string
	realData, realDir, realFS, realFrom, realRingFrom, realDirty := fdatasync, syncDirFile, syncFS, syncfsFrom, syncfsRingFrom, dirtyBytes
	t.Cleanup(func() {
		fdatasync, syncDirFile, syncFS, syncfsFrom, syncfsRingFrom, dirtyBytes = realData, realDir, realFS, realFrom, realRingFrom, realDirty
	})
	syncfsRingFrom = 3
	dirtyBytes = func() (int64, bool) { return 0, true } // the files are all that is dirty
	fdatasync = func(f *os.File) error { log = append(log, "data"); return realData(f) }
	syncDirFile = func(d *os.File) error { log = append(log, "dir"); return realDir(d) }
	syncFS = func(d *os.File) error { log = append(log, "fs "+filepath.Base(d.Name())); return realFS(d) }
	syncfsFrom = 3
	base := t.TempDir()
	s := openT(t, Options{})
	var ids []ID
	for i := range 3 {
		f := wsFile(t, filepath.Join(base, "ws"), []byte(fmt.Sprintf("kept %d\n", i)))
		id, _, ok, err := s.Keep(f, nil)
		f.Close()
		if err != nil || !ok {
			t.Fatalf("Keep: %v %v", ok, err)
		}
		ids = append(ids, id)
	}
	if len(log) != 0 {
		t.Fatalf("batch Keep synced %v before Sync", log)
	}
	if err := s.Sync(); err != nil {
		t.Fatal(err)
	}
	if want := []string{"fs " + keptDirName}; !slices.Equal(log, want) {
		t.Fatalf("syncs %v, want %v", log, want)
	}
	for _, id := range ids {
		if err := s.Verify(id); err != nil {
			t.Fatalf("Verify %s: %v", id.Short(), err)
		}
	}
	// A failed syncfs fails Sync, and the files stay pending: the next
	// Sync tries again.
	log = nil
	f := wsFile(t, filepath.Join(base, "ws"), []byte("one more\n"))
	if _, _, ok, err := s.Keep(f, nil); err != nil || !ok {
		t.Fatalf("Keep: %v %v", ok, err)
	}
	f.Close()
	for i := range 2 {
		f := wsFile(t, filepath.Join(base, "ws"), []byte(fmt.Sprintf("more %d\n", i)))
		if _, _, ok, err := s.Keep(f, nil); err != nil || !ok {
			t.Fatalf("Keep: %v %v", ok, err)
		}
		f.Close()
	}
	syncFS = func(*os.File) error { return errors.New("injected syncfs failure") }
	if err := s.Sync(); err == nil {
		t.Fatal("Sync with a failing syncfs succeeded")
	}
	syncFS = func(d *os.File) error { log = append(log, "fs again"); return realFS(d) }
	if err := s.Sync(); err != nil {
		t.Fatal(err)
	}
	if want := []string{"fs again"}; !slices.Equal(log, want) {
		t.Fatalf("after a failed syncfs: syncs %v, want %v", log, want)
	}
}

// TestKeepSyncOrder: with Options.Sync, Keep returns only after the kept
// file's data and then the kept/ directory are synced; in batch mode Keep
// syncs nothing and Sync does both, data first (here on the plain path;
// through io_uring kept/'s fsync is drained behind the files':
// TestKeepSyncRing).
func TestKeepSyncOrder(t *testing.T) {
	var log []string
	realData, realDir, realRing := fdatasync, syncDirFile, newSyncRing
	t.Cleanup(func() { fdatasync, syncDirFile, newSyncRing = realData, realDir, realRing })
	newSyncRing = func() (*ring, error) { return nil, errors.New("no io_uring in this test") }
	fdatasync = func(f *os.File) error { log = append(log, "data "+filepath.Base(f.Name())); return realData(f) }
	syncDirFile = func(d *os.File) error { log = append(log, "dir "+filepath.Base(d.Name())); return realDir(d) }
	for _, sync := range []bool{true, false} {
		base := t.TempDir()
		s := openT(t, Options{Sync: sync})
		data := []byte(fmt.Sprintf("sync %v\n", sync))
		f := wsFile(t, filepath.Join(base, "ws"), data)
		log = nil
		id, _, ok, err := s.Keep(f, nil)
		f.Close()
		if err != nil || !ok {
			t.Fatalf("Keep: %v %v", ok, err)
		}
		file := filepath.Base(f.Name())
		want := []string{"data " + file, "dir " + keptDirName}
		if !sync {
			if len(log) != 0 {
				t.Fatalf("batch Keep synced %v before Sync", log)
			}
			if err := s.Sync(); err != nil {
				t.Fatal(err)
			}
			want = []string{"data " + id.String(), "dir " + keptDirName}
		}
		if !slices.Equal(log, want) {
			t.Fatalf("sync %v: syncs %v, want %v", sync, log, want)
		}
	}
}
