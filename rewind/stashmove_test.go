package rewind

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/zerofs/zerofs/internal/testsupport"
)

// TestUnlinkMovedStoreOnOtherMount: a store on another mount of the
// workspace's filesystem (a bind mount: the same device, but rename(2) and
// link(2) across it fail with EXDEV) can take neither the unlink's rename
// nor a link: the removal still succeeds (no move is prepared for a file
// on another mount, and the link's EXDEV turns keeping off), its
// before-state is the file's content, and keeping is off.
func TestUnlinkMovedStoreOnOtherMount(t *testing.T) {
	testsupport.RequireRoot(t, "a bind mount")
	dir := t.TempDir()
	ws, store := filepath.Join(dir, "ws"), filepath.Join(dir, "store")
	for _, d := range []string{ws, store} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := unix.Mount(store, store, "", unix.MS_BIND, ""); err != nil {
		testsupport.Unavailable(t, "bind mount: "+err.Error())
	}
	t.Cleanup(func() {
		if err := unix.Unmount(store, 0); err != nil {
			unix.Unmount(store, unix.MNT_DETACH)
		}
	})
	files := map[string]string{"a": "the first\n", "b": "the second\n"}
	for p, c := range files {
		if err := os.WriteFile(filepath.Join(ws, p), []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	root, err := os.Open(ws)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	ctx := context.Background()
	e, err := Open(ctx, root, Options{StoreDir: store})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	ev, err := e.BeginStep(ctx, "rm", nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"a", "b"} {
		if err := unlinkMoved(e, int(root.Fd()), p); err != nil {
			t.Fatalf("unlink %s: %v", p, err)
		}
		if _, err := os.Lstat(filepath.Join(ws, p)); !os.IsNotExist(err) {
			t.Fatalf("%s still there after its unlink: %v", p, err)
		}
	}
	for p, want := range files {
		ent, err := e.StateAt(p, ev.Seq)
		if err != nil || !ent.Exists {
			t.Fatalf("@%d/%s: exists %v, %v", ev.Seq, p, ent.Exists, err)
		}
		c, err := e.OpenContent(ent)
		if err != nil {
			t.Fatalf("@%d/%s: %v", ev.Seq, p, err)
		}
		got, err := io.ReadAll(c)
		c.Close()
		if err != nil || string(got) != want {
			t.Fatalf("@%d/%s: %q, %v; want %q", ev.Seq, p, got, err, want)
		}
	}
	if ok, why := e.Blobs().KeepMode(); ok {
		t.Errorf("keeping still on after an EXDEV (%s)", why)
	}
}
