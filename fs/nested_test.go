package fs

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/zerofs/zerofs/record"
)

// firstCaptures returns, for every path a checkpoint after t names, the
// first before-state recorded for it: what @t shows for the path.
func firstCaptures(t *testing.T, mp string, after record.Seq) map[string]record.FileState {
	t.Helper()
	got := map[string]record.FileState{}
	for line := range strings.Lines(ctlRead(t, mp, "log")) {
		var ev struct {
			Sequence record.Seq        `json:"sequence"`
			Type     string            `json:"type"`
			Payload  record.Checkpoint `json:"payload"`
		}
		readJSON(t, line, &ev)
		if ev.Type != "session_checkpoint" || ev.Sequence <= after {
			continue
		}
		for _, st := range ev.Payload.Files {
			if _, ok := got[st.Path]; !ok {
				got[st.Path] = st
			}
		}
	}
	return got
}

// mountBelowT mounts a fresh tmpfs, or bind-mounts a fresh directory, at
// dir, and unmounts it when the test ends (after any zerofs mount made
// later, since cleanups run last-first).
func mountBelowT(t *testing.T, kind, dir string) {
	t.Helper()
	var err error
	switch kind {
	case "tmpfs":
		err = unix.Mount("tmpfs", dir, "tmpfs", 0, "size=4m,mode=0755")
	case "bind":
		err = unix.Mount(t.TempDir(), dir, "", unix.MS_BIND, "")
	}
	if err != nil {
		t.Fatalf("mount %s at %s: %v", kind, dir, err)
	}
	t.Cleanup(func() {
		if err := unix.Unmount(dir, 0); err != nil {
			t.Errorf("unmount %s at %s: %v; detaching", kind, dir, err)
			unix.Unmount(dir, unix.MNT_DETACH)
		}
	})
}

// TestNestedMountCaptured: with a tmpfs (or a bind mount) mounted at
// ws/sub, a write through zerofs to sub/f gets a checkpoint with sub/f's
// real before-state, @T/sub/f shows it, and a rewind restores it on the
// nested filesystem. (On 66d441b the capture crossed no mount point and
// recorded sub/f as absent: @T/sub/f was ENOENT and a rewind deleted it.)
func TestNestedMountCaptured(t *testing.T) {
	requireFUSE(t)
	for _, kind := range []string{"tmpfs", "bind"} {
		for _, inPlace := range []bool{false, true} {
			name := kind
			if inPlace {
				name += "/in-place"
			}
			t.Run(name, func(t *testing.T) { nestedMount(t, kind, inPlace) })
		}
	}
}

func nestedMount(t *testing.T, kind string, inPlace bool) {
	ws := t.TempDir()
	sub := filepath.Join(ws, "sub")
	if err := os.Mkdir(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	mountBelowT(t, kind, sub)
	writeFile(t, filepath.Join(sub, "f"), "before")
	if err := os.Mkdir(filepath.Join(sub, "d"), 0o750); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(sub, "d", "g"), "deep before")
	// The nested filesystem itself, to check the rewind from outside the
	// mount (an in-place mount covers ws).
	nested, err := os.Open(sub)
	if err != nil {
		t.Fatal(err)
	}
	defer nested.Close()

	opts := Options{Workspace: ws}
	if inPlace {
		opts.Mountpoint = ws
	}
	mp := mountT(t, opts).Mountpoint()
	T := stepT(t, mp, "nested")
	writeFile(t, filepath.Join(mp, "sub", "f"), "after")
	writeFile(t, filepath.Join(mp, "sub", "d", "g"), "deep after")
	writeFile(t, filepath.Join(mp, "sub", "new"), "new")
	if err := os.Chmod(filepath.Join(mp, "sub", "d"), 0o700); err != nil {
		t.Fatal(err)
	}

	// df of the nested mount through zerofs shows the nested filesystem.
	var want, got unix.Statfs_t
	if err := unix.Fstatfs(int(nested.Fd()), &want); err != nil {
		t.Fatal(err)
	}
	if err := unix.Statfs(filepath.Join(mp, "sub", "d"), &got); err != nil {
		t.Fatal(err)
	}
	if got.Blocks != want.Blocks || got.Bsize != want.Bsize {
		t.Errorf("statfs of sub/d through the mount: %d blocks of %d; want the %s's %d of %d", got.Blocks, got.Bsize, kind, want.Blocks, want.Bsize)
	}

	caps := firstCaptures(t, mp, T)
	for _, want := range []record.FileState{
		{Path: "sub/f", Kind: record.KindFile, Bytes: 6, Mode: 0o644},
		{Path: "sub/d/g", Kind: record.KindFile, Bytes: 11, Mode: 0o644},
		{Path: "sub/d", Kind: record.KindDir, Mode: 0o750},
	} {
		got, ok := caps[want.Path]
		switch {
		case !ok:
			t.Errorf("%s: no capture after %d", want.Path, T)
		case got.Absent || got.Kind != want.Kind || got.Mode != want.Mode || (want.Kind == record.KindFile && (got.Bytes != want.Bytes || got.Blob == "")):
			t.Errorf("%s captured as %+v; want it present: kind %s, mode %o, %d bytes", want.Path, got, want.Kind, want.Mode, want.Bytes)
		}
	}
	if got := caps["sub/new"]; !got.Absent {
		t.Errorf("sub/new captured as %+v; want absent", got)
	}

	v := view(mp, T)
	if got := readFile(t, filepath.Join(v, "sub", "f")); got != "before" {
		t.Errorf("@%d/sub/f = %q, want before", T, got)
	}
	if got := readFile(t, filepath.Join(v, "sub", "d", "g")); got != "deep before" {
		t.Errorf("@%d/sub/d/g = %q, want deep before", T, got)
	}
	if _, err := os.Lstat(filepath.Join(v, "sub", "new")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("@%d/sub/new: got %v, want ENOENT", T, err)
	}

	rewindT(t, mp, T)
	for _, c := range []struct{ path, want string }{{"f", "before"}, {"d/g", "deep before"}} {
		if got := readFile(t, filepath.Join(mp, "sub", c.path)); got != c.want {
			t.Errorf("sub/%s after the rewind = %q, want %q", c.path, got, c.want)
		}
		fd, err := unix.Openat(int(nested.Fd()), c.path, unix.O_RDONLY, 0)
		if err != nil {
			t.Errorf("sub/%s on the %s after the rewind: %v", c.path, kind, err)
			continue
		}
		b := make([]byte, 64)
		n, _ := unix.Read(fd, b)
		unix.Close(fd)
		if string(b[:n]) != c.want {
			t.Errorf("sub/%s on the %s after the rewind = %q, want %q", c.path, kind, b[:n], c.want)
		}
	}
	var st unix.Stat_t
	if err := unix.Fstatat(int(nested.Fd()), "d", &st, 0); err != nil || st.Mode&0o7777 != 0o750 {
		t.Errorf("sub/d on the %s after the rewind: mode %o, err %v; want 0750", kind, st.Mode&0o7777, err)
	}
	if err := unix.Fstatat(int(nested.Fd()), "new", &st, 0); err != unix.ENOENT {
		t.Errorf("sub/new on the %s after the rewind: %v, want ENOENT", kind, err)
	}
}
