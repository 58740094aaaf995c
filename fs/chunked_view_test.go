package fs

import (
	"bytes"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/zerofs/zerofs/record"
)

// A large before-state is stored as chunks; @T/ reads it at random offsets
// (pread, as mmap and seeking tools do) and whole, byte for byte, and a
// rewind brings it back.
func TestChunkedBeforeStateThroughView(t *testing.T) {
	ws := t.TempDir()
	m := mountT(t, Options{Workspace: ws})
	mp := m.Mountpoint()
	old := make([]byte, 5<<20+123)
	rand.NewChaCha8([32]byte{3}).Read(old)
	if err := os.WriteFile(filepath.Join(mp, "big"), old, 0o644); err != nil {
		t.Fatal(err)
	}
	stepT(t, mp, "edit")
	seq := uint64(stepSeqOf(t, mp))
	f, err := os.OpenFile(filepath.Join(mp, "big"), os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte("changed in the middle"), 3<<20); err != nil {
		t.Fatal(err)
	}
	f.Close()
	vf, err := os.Open(filepath.Join(view(mp, record.Seq(seq)), "big"))
	if err != nil {
		t.Fatal(err)
	}
	defer vf.Close()
	r := rand.New(rand.NewPCG(1, 1))
	for range 50 {
		off := r.IntN(len(old))
		buf := make([]byte, 1+r.IntN(300<<10))
		k, _ := vf.ReadAt(buf, int64(off))
		if want := old[off:min(len(old), off+len(buf))]; !bytes.Equal(buf[:k], want) {
			t.Fatalf("@%d/big: pread(%d, %d) got %d bytes that differ, want %d", seq, len(buf), off, k, len(want))
		}
	}
	whole, err := os.ReadFile(filepath.Join(view(mp, record.Seq(seq)), "big"))
	if err != nil || !bytes.Equal(whole, old) {
		t.Fatalf("@%d/big read whole: %d bytes, %v; want the %d before", seq, len(whole), err, len(old))
	}
	rewindT(t, mp, record.Seq(seq))
	if got, err := os.ReadFile(filepath.Join(mp, "big")); err != nil || !bytes.Equal(got, old) {
		t.Fatalf("big after the rewind: %d bytes, %v; want the %d before", len(got), err, len(old))
	}
	packs, _ := filepath.Glob(filepath.Join(ws, ".zero", "blobs", "packs", "*.pack"))
	if len(packs) == 0 {
		t.Fatal("no pack in the store")
	}
}
