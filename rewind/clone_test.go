package rewind

import (
	"bytes"
	"context"
	"crypto/rand"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/zerofs/zerofs/blobstore"
	"github.com/zerofs/zerofs/internal/testsupport"
)

// freeBytes is the free space of the filesystem holding p.
func freeBytes(t *testing.T, p string) int64 {
	t.Helper()
	var st syscall.Statfs_t
	if err := syscall.Statfs(p, &st); err != nil {
		t.Fatal(err)
	}
	return int64(st.Bfree) * st.Bsize
}

// TestCloneBeforeWrite: on XFS with reflinks, the capture of a large file
// about to be written is a clone (FICLONE) in the store, not a copy: its
// own inode under kept/<sha256>, taking next to no space; the write that
// follows leaves it alone, and @T and a rewind give the old content back
// byte for byte. A small file is still packed.
func TestCloneBeforeWrite(t *testing.T) {
	mnt := testsupport.MountXFS(t)
	ctx := context.Background()
	for _, sync := range []bool{false, true} {
		ws := filepath.Join(mnt, "ws"+map[bool]string{false: "batch", true: "always"}[sync])
		if err := os.Mkdir(ws, 0o755); err != nil {
			t.Fatal(err)
		}
		root, err := os.Open(ws)
		if err != nil {
			t.Fatal(err)
		}
		e, err := Open(ctx, root, Options{StoreDir: ws + ".store", Sync: sync})
		if err != nil {
			t.Fatal(err)
		}
		if got := e.CaptureMode(); got != CaptureLink+"; "+CaptureClone {
			t.Errorf("CaptureMode: %q, want links and clones", got)
		}
		old := make([]byte, 16<<20)
		rand.Read(old)
		big, small := filepath.Join(ws, "big"), filepath.Join(ws, "small")
		if err := os.WriteFile(big, old, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(small, []byte("small\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		s1, err := e.BeginStep(ctx, "edit", nil)
		if err != nil {
			t.Fatal(err)
		}
		syscall.Sync()
		free := freeBytes(t, mnt)
		change(t, e, func() error {
			f, err := os.OpenFile(big, os.O_WRONLY, 0)
			if err != nil {
				return err
			}
			defer f.Close()
			_, err = f.WriteAt(bytes.Repeat([]byte("new"), 1000), 4<<20)
			return err
		}, Change{Path: "big"})
		change(t, e, func() error { return os.WriteFile(small, []byte("changed\n"), 0o644) }, Change{Path: "small"})
		if err := e.Sync(); err != nil {
			t.Fatal(err)
		}
		syscall.Sync()
		if used := free - freeBytes(t, mnt); used > 4<<20 {
			t.Errorf("capturing a 16 MiB file took %d bytes: a copy, not a clone", used)
		}
		id := blobstore.Sum(old)
		kept := keptFiles(t, e)
		if ino, ok := kept[id.String()]; !ok || len(kept) != 1 || ino == inodeOf(t, big) {
			t.Fatalf("kept/ holds %v; want the big file's clone %s alone, an inode of its own", kept, id.Short())
		}
		if got, ok := readAt(t, e, "big", s1.Seq); !ok || got != string(old) {
			t.Fatalf("@%d/big: %d bytes, want the 16 MiB before the write", s1.Seq, len(got))
		}
		if got, _ := readAt(t, e, "small", s1.Seq); got != "small\n" {
			t.Fatalf("@%d/small: %q", s1.Seq, got)
		}
		if _, err := e.Rewind(ctx, s1.Seq); err != nil {
			t.Fatal(err)
		}
		if b, err := os.ReadFile(big); err != nil || !bytes.Equal(b, old) {
			t.Fatalf("after the rewind big: %d bytes (%v), want its old content", len(b), err)
		}
		if err := e.Blobs().Verify(id); err != nil {
			t.Fatal(err)
		}
		e.Close()
		root.Close()
	}
}
