package rewind

import (
	"context"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"

	"golang.org/x/sys/unix"
)

// A capture that reads a path through its parent's descriptor
// (Change.InDir, as the mount's creates and removals do) records what a
// capture by path records: an unlinked file stashed (on its bare
// descriptor, in batch mode), one held open for writing or with a second
// link copied instead, a symlink's target, an absent name; in both sync
// modes.
func TestCaptureThroughDirfd(t *testing.T) {
	for _, sync := range []bool{false, true} {
		var writing atomic.Bool
		e, ws := openT(t, Options{Sync: sync, OpenForWrite: func(dev, ino uint64) bool { return writing.Load() }})
		if err := os.Mkdir(filepath.Join(ws, "d"), 0o755); err != nil {
			t.Fatal(err)
		}
		files := map[string]string{"d/plain": "plain\n", "d/held": "held\n", "d/linked": "linked\n"}
		for p, c := range files {
			if err := os.WriteFile(filepath.Join(ws, p), []byte(c), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.Link(filepath.Join(ws, "d/linked"), filepath.Join(ws, "d/other")); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink("plain", filepath.Join(ws, "d/sym")); err != nil {
			t.Fatal(err)
		}
		dfd, err := unix.Open(filepath.Join(ws, "d"), unix.O_PATH|unix.O_DIRECTORY, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer unix.Close(dfd)
		ctx := context.Background()
		t0, err := e.BeginStep(ctx, "remove", nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, name := range []string{"plain", "held", "linked", "sym", "absent"} {
			writing.Store(name == "held")
			c := Change{Path: "d/" + name, Removed: true, Stash: true, Dirfd: dfd, InDir: true}
			change(t, e, func() error {
				err := unix.Unlinkat(dfd, name, 0)
				if name == "absent" && err == unix.ENOENT {
					return nil
				}
				return err
			}, c)
		}
		writing.Store(false)
		for p, want := range files {
			if got, ok := readAt(t, e, p, t0.Seq); !ok || got != want {
				t.Errorf("sync %v: %s at the step: %q (exists %v), want %q", sync, p, got, ok, want)
			}
		}
		if ent, err := e.StateAt("d/sym", t0.Seq); err != nil || !ent.Exists || ent.State.Target != "plain" {
			t.Errorf("sync %v: d/sym at the step: %+v, %v; want a symlink to plain", sync, ent.State, err)
		}
		if ent, err := e.StateAt("d/absent", t0.Seq); err != nil || ent.Exists {
			t.Errorf("sync %v: d/absent at the step exists (%v)", sync, err)
		}
	}
}
