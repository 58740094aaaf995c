package rewind

import (
	"bytes"
	"errors"
	iofs "io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/zerofs/zerofs/blobstore"
	"github.com/zerofs/zerofs/record"
)

// TestLegacyStoreRefused: a store written by the code before packs (one
// file per blob, blobs/ab/<hex>; testdata/legacy was made by main at
// 66d441b) is older than the store-format baseline: opening it fails with
// an error that names a blob in the old layout and says why, and changes
// nothing in the store or the workspace.
func TestLegacyStoreRefused(t *testing.T) {
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
	logBefore, err := os.ReadFile(filepath.Join(store, record.LogName))
	if err != nil {
		t.Fatal(err)
	}
	wsBefore := diskTree(t, ws)
	err = openRefused(t, "a store from before packs", ws, Options{StoreDir: store})
	if !errors.Is(err, blobstore.ErrBeforeBaseline) || !strings.Contains(err.Error(), filepath.Join(store, "blobs")) || !strings.Contains(err.Error(), "older than the store format") {
		t.Fatalf("got %v, want blobstore.ErrBeforeBaseline naming a blob under %s", err, filepath.Join(store, "blobs"))
	}
	if logAfter, _ := os.ReadFile(filepath.Join(store, record.LogName)); !bytes.Equal(logAfter, logBefore) {
		t.Error("the refused open changed the log")
	}
	if loose, _ := filepath.Glob(filepath.Join(store, "blobs", "??", "*")); len(loose) != 3 {
		t.Errorf("the refused store holds %d loose blobs, want its 3", len(loose))
	}
	if d := diffTrees(diskTree(t, ws), wsBefore); d != "" {
		t.Errorf("the refused open changed the workspace:\n%s", d)
	}
}
