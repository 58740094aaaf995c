package rewind

import (
	"context"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// A store on a full disk: the capture fails with ENOSPC, the caller is told
// (and so never makes its change), and the history written before is intact.
func TestCaptureOnFullDisk(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("needs root to mount a small tmpfs as the store")
	}
	ctx := context.Background()
	store := t.TempDir()
	if err := unix.Mount("tmpfs", store, "tmpfs", 0, "size=256k,mode=0700"); err != nil {
		t.Skipf("cannot mount tmpfs: %v", err)
	}
	t.Cleanup(func() { unix.Unmount(store, unix.MNT_DETACH) })
	e, ws := openT(t, Options{StoreDir: store, Sync: true})
	small := filepath.Join(ws, "small")
	change(t, e, func() error { return os.WriteFile(small, []byte("v1"), 0o644) }, Change{Path: "small"})
	s, _ := e.BeginStep(ctx, "s", nil)
	change(t, e, func() error { return os.WriteFile(small, []byte("v2"), 0o644) }, Change{Path: "small"})
	big := filepath.Join(ws, "big")
	// Random bytes: compression must not make them fit.
	noise := make([]byte, 1<<20)
	rand.NewChaCha8([32]byte{1}).Read(noise)
	if err := os.WriteFile(big, noise, 0o644); err != nil {
		t.Fatal(err)
	}
	head := e.Head()
	release, _, err := e.Begin(ctx, Caller{}, Change{Path: "big"})
	if err == nil {
		release()
	}
	if !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("capture on a full store: got %v, want ENOSPC", err)
	}
	if e.Head() != head {
		t.Fatalf("a failed capture appended: head %d, want %d", e.Head(), head)
	}
	ents, _ := os.ReadDir(filepath.Join(store, "blobs", "tmp"))
	if len(ents) != 0 {
		t.Fatalf("a failed put left %d temporary files", len(ents))
	}
	// Smaller captures still work, and all history is readable.
	if got, _ := readAt(t, e, "small", s.Seq); got != "v1" {
		t.Fatalf("small at %d: %q, want v1", s.Seq, got)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	e2 := openAt(t, ws, Options{StoreDir: store}) // reopened after ENOSPC
	if e2.Head() != head {
		t.Fatalf("reopened head %d, want %d", e2.Head(), head)
	}
}
