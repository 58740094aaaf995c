package rewind

import (
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/zerofs/zerofs/blobstore"
)

// keptFiles lists the store's kept blobs by name, with their inodes.
func keptFiles(t *testing.T, e *Engine) map[string]uint64 {
	t.Helper()
	ents, err := os.ReadDir(filepath.Join(e.Blobs().Dir(), "kept"))
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	out := map[string]uint64{}
	for _, de := range ents {
		var st syscall.Stat_t
		if err := syscall.Stat(filepath.Join(e.Blobs().Dir(), "kept", de.Name()), &st); err != nil {
			t.Fatal(err)
		}
		out[de.Name()] = st.Ino
	}
	return out
}

func inodeOf(t *testing.T, p string) uint64 {
	t.Helper()
	var st syscall.Stat_t
	if err := syscall.Lstat(p, &st); err != nil {
		t.Fatal(err)
	}
	return st.Ino
}

// TestRemovedFileKept: the capture of a file about to be removed keeps its
// inode (kept/<sha256> is the workspace file's own inode) and the
// checkpoint names its sha256; @T and a rewind give it back byte for
// byte, in both sync modes. A file with another link, one open for
// writing, a symlink and a change not marked Removed are copied.
func TestRemovedFileKept(t *testing.T) {
	ctx := context.Background()
	for _, sync := range []bool{false, true} {
		t.Run(map[bool]string{false: "batch", true: "always"}[sync], func(t *testing.T) {
			var writing func(dev, ino uint64) bool
			opts := Options{Sync: sync, OpenForWrite: func(dev, ino uint64) bool { return writing != nil && writing(dev, ino) }}
			e, ws := openT(t, opts)
			if got := e.CaptureMode(); got != CaptureLink {
				t.Fatalf("CaptureMode: %q, want %q", got, CaptureLink)
			}
			files := map[string]string{"a": "alpha\n", "b": "bravo\n", "linked": "two names\n", "open": "held for writing\n", "plain": "not marked\n"}
			for n, c := range files {
				if err := os.WriteFile(filepath.Join(ws, n), []byte(c), 0o640); err != nil {
					t.Fatal(err)
				}
			}
			if err := os.Link(filepath.Join(ws, "linked"), filepath.Join(ws, "linked2")); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink("a", filepath.Join(ws, "sym")); err != nil {
				t.Fatal(err)
			}
			inoA, openIno := inodeOf(t, filepath.Join(ws, "a")), inodeOf(t, filepath.Join(ws, "open"))
			writing = func(_, ino uint64) bool { return ino == openIno }
			s1, err := e.BeginStep(ctx, "rm", nil)
			if err != nil {
				t.Fatal(err)
			}
			for _, n := range []string{"a", "b", "linked", "open", "sym"} {
				change(t, e, func() error { return os.Remove(filepath.Join(ws, n)) }, Change{Path: n, Removed: true})
			}
			change(t, e, func() error { return os.Remove(filepath.Join(ws, "plain")) }, Change{Path: "plain"})
			if err := e.Sync(); err != nil {
				t.Fatal(err)
			}
			kept := keptFiles(t, e)
			want := map[string]bool{blobstore.Sum([]byte("alpha\n")).String(): true, blobstore.Sum([]byte("bravo\n")).String(): true}
			if len(kept) != len(want) {
				t.Fatalf("kept/ holds %v, want exactly a and b", kept)
			}
			for n := range want {
				if _, ok := kept[n]; !ok {
					t.Fatalf("kept/ lacks %s: %v", n, kept)
				}
			}
			if got := kept[blobstore.Sum([]byte("alpha\n")).String()]; got != inoA {
				t.Fatalf("kept a is inode %d, want the workspace file's %d (a link, not a copy)", got, inoA)
			}
			for n, c := range files {
				if got, ok := readAt(t, e, n, s1.Seq); !ok || got != c {
					t.Fatalf("@%d/%s: %q %v, want %q", s1.Seq, n, got, ok, c)
				}
			}
			if _, err := e.Rewind(ctx, s1.Seq); err != nil {
				t.Fatal(err)
			}
			for n, c := range files {
				b, err := os.ReadFile(filepath.Join(ws, n))
				if err != nil || string(b) != c {
					t.Fatalf("after the rewind %s: %q %v, want %q", n, b, err, c)
				}
			}
			if err := e.Blobs().Verify(blobstore.Sum([]byte("alpha\n"))); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestStoreOnOtherFilesystemCopies: with the store on a tmpfs (/dev/shm)
// and the workspace on disk, removed files are copied and CaptureMode says
// why.
func TestStoreOnOtherFilesystemCopies(t *testing.T) {
	if st, err := os.Stat("/dev/shm"); err != nil || !st.IsDir() {
		t.Skip("no /dev/shm tmpfs here")
	}
	shm, err := os.MkdirTemp("/dev/shm", "zerofs-store")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(shm) })
	var a, b syscall.Statfs_t
	syscall.Statfs(shm, &a)
	syscall.Statfs(t.TempDir(), &b)
	if a.Type == b.Type && a.Fsid == b.Fsid {
		t.Skip("/dev/shm is on the same filesystem as the test's directory")
	}
	e, ws := openT(t, Options{StoreDir: filepath.Join(shm, "store")})
	if got, want := e.CaptureMode(), "copy: "+CopyOtherFS; got != want {
		t.Fatalf("CaptureMode: %q, want %q", got, want)
	}
	if err := os.WriteFile(filepath.Join(ws, "f"), []byte("copied"), 0o644); err != nil {
		t.Fatal(err)
	}
	s1, err := e.BeginStep(context.Background(), "rm", nil)
	if err != nil {
		t.Fatal(err)
	}
	change(t, e, func() error { return os.Remove(filepath.Join(ws, "f")) }, Change{Path: "f", Removed: true})
	if k := keptFiles(t, e); len(k) != 0 {
		t.Fatalf("kept/ holds %v with the store on another filesystem", k)
	}
	if got, ok := readAt(t, e, "f", s1.Seq); !ok || got != "copied" {
		t.Fatalf("@%d/f: %q %v", s1.Seq, got, ok)
	}
}

// TestUnnamedKeptBlobGoes: a crash between a kept file's link and the
// checkpoint naming it leaves a kept blob nothing names. The next open
// reads the store as usual, and gc removes that blob; the named one it
// absorbs into a pack (copied, its link removed), still readable.
func TestUnnamedKeptBlobGoes(t *testing.T) {
	ctx := context.Background()
	e, ws := openT(t, Options{})
	store := e.opts.StoreDir
	for n, c := range map[string]string{"named": "named by a checkpoint\n", "orphan": "linked, then the crash\n"} {
		if err := os.WriteFile(filepath.Join(ws, n), []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := e.BeginStep(ctx, "rm", nil); err != nil {
		t.Fatal(err)
	}
	change(t, e, func() error { return os.Remove(filepath.Join(ws, "named")) }, Change{Path: "named", Removed: true})
	// The state a SIGKILL after the link and before the checkpoint
	// leaves: the link, and no event naming it.
	f, err := os.Open(filepath.Join(ws, "orphan"))
	if err != nil {
		t.Fatal(err)
	}
	if _, _, ok, err := e.Blobs().Keep(f, nil); err != nil || !ok {
		t.Fatalf("Keep: %v %v", ok, err)
	}
	f.Close()
	os.Remove(filepath.Join(ws, "orphan"))
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	e = openAt(t, ws, Options{StoreDir: store})
	if n := len(keptFiles(t, e)); n != 2 {
		t.Fatalf("kept/ holds %d blobs before gc, want 2", n)
	}
	res, err := e.GC(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	if kept := keptFiles(t, e); len(kept) != 0 || res.BlobsRemoved != 1 {
		t.Fatalf("after gc: kept %v, %d blobs removed; want the orphan removed and the named one absorbed", kept, res.BlobsRemoved)
	}
	if e.Blobs().Has(blobstore.Sum([]byte("linked, then the crash\n"))) {
		t.Fatalf("the unnamed kept blob survived gc")
	}
	if got, err := e.Blobs().Get(blobstore.Sum([]byte("named by a checkpoint\n"))); err != nil || string(got) != "named by a checkpoint\n" {
		t.Fatalf("the named blob after gc: %q, %v", got, err)
	}
}
