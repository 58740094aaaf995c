package rewind

import (
	"context"
	iofs "io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/zerofs/zerofs/record"
)

// TestLegacyStore: a store written by the code before packs (one file per
// blob, blobs/ab/<hex>; testdata/legacy was made by main at 66d441b) keeps
// working: every past state reads back, a rewind restores from its loose
// blobs, new captures go into packs beside them, and gc prunes both.
func TestLegacyStore(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	if out, err := exec.Command("cp", "-a", "testdata/legacy/.", dir).CombinedOutput(); err != nil {
		t.Fatalf("copy testdata: %v: %s", err, out)
	}
	ws, store := filepath.Join(dir, "ws"), filepath.Join(dir, "store")
	// git keeps no directory modes: give the store the ones zerofs made
	// it with (it refuses a store others may write to).
	filepath.WalkDir(store, func(p string, d iofs.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			return os.Chmod(p, 0o700)
		}
		if err == nil {
			return os.Chmod(p, 0o600)
		}
		return err
	})
	e := openAt(t, ws, Options{StoreDir: store})
	want := []struct {
		seq  record.Seq
		a, b string // "" when absent
	}{
		{1, "", ""},
		{3, "alpha v1\n", ""},
		{5, "alpha v1\n", "bravo v1\n"},
		{8, "alpha v2\n", "bravo v2\n"},
		{9, "alpha v3\n", "bravo v2\n"},
	}
	check := func(when string) {
		t.Helper()
		for _, w := range want {
			if got, _ := readAt(t, e, "a.txt", w.seq); got != w.a {
				t.Errorf("%s: a.txt at %d: got %q, want %q", when, w.seq, got, w.a)
			}
			if got, _ := readAt(t, e, "d/b.txt", w.seq); got != w.b {
				t.Errorf("%s: d/b.txt at %d: got %q, want %q", when, w.seq, got, w.b)
			}
		}
	}
	check("opened")
	if _, err := e.BeginStep(ctx, "new", nil); err != nil {
		t.Fatal(err)
	}
	// A rewind to 5 restores both files from loose blobs, capturing the
	// current ones into a pack first.
	if _, err := e.Rewind(ctx, 5); err != nil {
		t.Fatal(err)
	}
	for p, w := range map[string]string{"a.txt": "alpha v1\n", "d/b.txt": "bravo v1\n"} {
		if got, _ := os.ReadFile(filepath.Join(ws, p)); string(got) != w {
			t.Errorf("after rewind to 5: %s = %q, want %q", p, got, w)
		}
	}
	check("after the rewind")
	packs, _ := filepath.Glob(filepath.Join(store, "blobs", "packs", "*.pack"))
	if len(packs) == 0 {
		t.Error("new captures made no pack")
	}
	// gc below 8 drops what only states before 8 needed (the loose
	// "bravo v1" of checkpoint 7); later states still read.
	res, err := e.GC(ctx, 8)
	if err != nil {
		t.Fatal(err)
	}
	if res.BlobsRemoved == 0 {
		t.Errorf("gc removed nothing")
	}
	for _, w := range want[3:] {
		if got, _ := readAt(t, e, "a.txt", w.seq); got != w.a {
			t.Errorf("after gc: a.txt at %d: got %q, want %q", w.seq, got, w.a)
		}
	}
}
