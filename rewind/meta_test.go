package rewind

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/zerofs/zerofs/internal/testsupport"
	"github.com/zerofs/zerofs/record"
)

// needRoot skips a test that gives files to other users when it cannot.
func needRoot(t *testing.T) {
	t.Helper()
	testsupport.RequireRoot(t, "restoring owners")
}

// asUnprivileged makes the engine act as a daemon that may not chown.
func asUnprivileged(t *testing.T) {
	t.Helper()
	old := canChown
	canChown = func() bool { return false }
	t.Cleanup(func() { canChown = old })
}

type meta struct {
	uid, gid uint32
	mode     uint32
	mtime    time.Time
}

func (m meta) String() string {
	return fmt.Sprintf("%d:%d %04o %s", m.uid, m.gid, m.mode, m.mtime.Format(time.RFC3339Nano))
}

func lstatMeta(t *testing.T, p string) meta {
	t.Helper()
	var st unix.Stat_t
	if err := unix.Lstat(p, &st); err != nil {
		t.Fatal(err)
	}
	return meta{st.Uid, st.Gid, st.Mode & 0o7777, time.Unix(st.Mtim.Unix()).UTC()}
}

// setOwnerTime gives p (never following a symlink) an owner and mtime.
func setOwnerTime(t *testing.T, p string, uid, gid int, mtime time.Time) {
	t.Helper()
	if err := os.Lchown(p, uid, gid); err != nil {
		t.Fatal(err)
	}
	ts := []unix.Timespec{{Nsec: unix.UTIME_OMIT}, unix.NsecToTimespec(mtime.UnixNano())}
	if err := unix.UtimesNanoAt(unix.AT_FDCWD, p, ts, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		t.Fatal(err)
	}
}

// Every rewound path gets back the owner and mtime its before-state
// recorded: files rewritten from their blob, directories recreated, a
// directory and a file that only need their metadata back, and a symlink,
// whose owner is its own (the file it points to, outside the workspace,
// keeps its owner).
func TestRewindRestoresOwnersAndMtimes(t *testing.T) {
	needRoot(t)
	ctx := context.Background()
	e, ws := openT(t, Options{})
	outside := filepath.Join(filepath.Dir(ws), "outside")
	if err := os.WriteFile(outside, []byte("not yours"), 0o644); err != nil {
		t.Fatal(err)
	}
	t1 := time.Date(2021, 3, 4, 5, 6, 7, 123456789, time.UTC)
	t2 := time.Date(2022, 1, 2, 3, 4, 5, 987654321, time.UTC)
	want := map[string]meta{
		"f":     {65534, 65534, 0o640, t1},
		"d":     {1000, 1001, 0o750, t2},
		"d/g":   {1002, 1003, 0o604, t1},
		"same":  {65534, 100, 0o644, t2},
		"kept":  {1005, 1005, 0o711, t1},
		"link":  {1234, 4321, 0o777, t2},
		"link2": {1235, 4322, 0o777, t1},
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	abs := func(p string) string { return filepath.Join(ws, p) }
	must(os.WriteFile(abs("f"), []byte("one"), 0o640))
	must(os.Mkdir(abs("d"), 0o750))
	must(os.WriteFile(abs("d/g"), []byte("g"), 0o604))
	must(os.WriteFile(abs("same"), []byte("same"), 0o644))
	must(os.Mkdir(abs("kept"), 0o711))
	must(os.Symlink("../outside", abs("link")))
	must(os.Symlink("../outside", abs("link2")))
	// Children before parents: setting a child's time changes nothing of
	// the parent's, but creating it did.
	for _, p := range []string{"d/g", "f", "same", "link", "link2", "d", "kept"} {
		m := want[p]
		setOwnerTime(t, abs(p), int(m.uid), int(m.gid), m.mtime)
	}
	for p, m := range want {
		if p == "link" || p == "link2" {
			m.mode = lstatMeta(t, abs(p)).mode
			want[p] = m
		}
	}
	s, err := e.BeginStep(ctx, "change everything", nil)
	must(err)
	change(t, e, func() error { return os.WriteFile(abs("f"), []byte("two"), 0o600) }, Change{Path: "f"})
	change(t, e, func() error { return os.RemoveAll(abs("d")) }, Change{Path: "d", Tree: true})
	change(t, e, func() error { return os.Chown(abs("same"), 0, 0) }, Change{Path: "same"})
	change(t, e, func() error { return os.Chmod(abs("kept"), 0o700) }, Change{Path: "kept"})
	change(t, e, func() error {
		if err := os.Remove(abs("link")); err != nil {
			return err
		}
		return os.Symlink("elsewhere", abs("link"))
	}, Change{Path: "link"})
	change(t, e, func() error { return os.Lchown(abs("link2"), 0, 0) }, Change{Path: "link2"})

	// The checkpoint records them.
	ent, err := e.StateAt("d/g", s.Seq)
	must(err)
	if st := ent.State; st.UID == nil || *st.UID != 1002 || st.GID == nil || *st.GID != 1003 || st.MTime == nil || !st.MTime.Equal(t1) {
		t.Fatalf("d/g's before-state: uid %v gid %v mtime %v, want 1002 1003 %v", st.UID, st.GID, st.MTime, t1)
	}

	if _, err := e.Rewind(ctx, s.Seq); err != nil {
		t.Fatal(err)
	}
	for p, m := range want {
		if got := lstatMeta(t, abs(p)); got != m {
			t.Errorf("%s after rewind: got %v, want %v", p, got, m)
		}
	}
	if got := lstatMeta(t, outside); got.uid != 0 || got.gid != 0 {
		t.Errorf("the symlinks' target outside the workspace: got owner %d:%d, want 0:0", got.uid, got.gid)
	}
	if b, _ := os.ReadFile(abs("f")); string(b) != "one" {
		t.Errorf("f after rewind = %q, want one", b)
	}
	// Rewinding again changes nothing: the metadata is exactly back.
	res, err := e.Rewind(ctx, s.Seq)
	must(err)
	if res.Report.Restored != 0 || res.Report.Deleted != 0 {
		t.Errorf("second rewind to %d: %+v, want nothing to do", s.Seq, res.Report)
	}
}

// The scenario, in the engine: a user's setuid file comes back
// setuid only as that user's. As root, the owner is restored with the bit;
// a daemon that may not chown, or a record that names no owner, restores
// the file without its setuid and setgid bits. A mode-only fix of a file
// now owned by someone else never sets the bit either.
func TestRewindNeverRestoresSetuidWithoutItsOwner(t *testing.T) {
	needRoot(t)
	ctx := context.Background()
	for _, tc := range []struct {
		name         string
		unprivileged bool
		// chownOnly: the later step only gives the file to root and drops
		// its bits (same content: the rewind fixes metadata in place).
		chownOnly bool
		wantUID   uint32
		wantMode  uint32
	}{
		{"root restores owner and bit", false, false, 65534, 0o6755},
		{"root restores owner and bit in place", false, true, 65534, 0o6755},
		{"unprivileged strips the bits", true, false, 0, 0o755},
		{"unprivileged in place strips the bits", true, true, 0, 0o755},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.unprivileged {
				asUnprivileged(t)
			}
			e, ws := openT(t, Options{})
			x := filepath.Join(ws, "id")
			if err := os.WriteFile(x, []byte("#!/bin/sh\nid\n"), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.Chown(x, 65534, 65534); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(x, 0o755|os.ModeSetuid|os.ModeSetgid); err != nil {
				t.Fatal(err)
			}
			s, err := e.BeginStep(ctx, "overwrite", nil)
			if err != nil {
				t.Fatal(err)
			}
			change(t, e, func() error {
				if tc.chownOnly {
					if err := os.Chown(x, 0, 0); err != nil {
						return err
					}
					return os.Chmod(x, 0o755)
				}
				return os.WriteFile(x, []byte("replaced"), 0o755)
			}, Change{Path: "id"})
			if _, err := e.Rewind(ctx, s.Seq); err != nil {
				t.Fatal(err)
			}
			got := lstatMeta(t, x)
			if got.uid != tc.wantUID || got.mode != tc.wantMode {
				t.Fatalf("after rewind: owner %d mode %04o, want owner %d mode %04o", got.uid, got.mode, tc.wantUID, tc.wantMode)
			}
			if got.mode&(unix.S_ISUID|unix.S_ISGID) != 0 && got.uid != 65534 {
				t.Fatalf("setuid file owned by %d", got.uid)
			}
		})
	}
}

// Records written before owners were kept (no uid, gid or mtime) still
// load, read as unowned, and a rewind to them never restores a setuid or
// setgid bit.
func TestOldRecordsWithoutOwner(t *testing.T) {
	ctx := context.Background()
	e, ws := openT(t, Options{})
	x := filepath.Join(ws, "tool")
	if err := os.WriteFile(x, []byte("now"), 0o644); err != nil {
		t.Fatal(err)
	}
	id, n, err := e.blobs.Put(strings.NewReader("then"))
	if err != nil {
		t.Fatal(err)
	}
	// A checkpoint as older zerofs wrote it.
	old := record.FileState{Path: "tool", Kind: record.KindFile, Blob: id.String(), Bytes: n, Mode: 0o6755}
	e.wsMu.Lock()
	ev, err := e.appendCheckpoint(ctx, record.Checkpoint{Tool: "old", Files: []record.FileState{old}})
	e.wsMu.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	line, err := os.ReadFile(filepath.Join(e.opts.StoreDir, "events.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{`"uid"`, `"gid"`, `"mtime"`} {
		if strings.Contains(string(line), key) {
			t.Fatalf("an unowned record is written with %s: %s", key, line)
		}
	}
	// Reopen: the log loads.
	storeDir := e.opts.StoreDir
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	e = openAt(t, ws, Options{StoreDir: storeDir})
	ent, err := e.StateAt("tool", ev.Seq-1)
	if err != nil {
		t.Fatal(err)
	}
	if ent.Live || ent.State.Owned() || ent.State.MTime != nil {
		t.Fatalf("old record read back as %+v, want recorded and unowned", ent)
	}
	if _, err := e.Rewind(ctx, ev.Seq-1); err != nil {
		t.Fatal(err)
	}
	if got := lstatMeta(t, x); got.mode != 0o755 {
		t.Fatalf("restored from an unowned record: mode %04o, want 0755 (no setuid, no setgid)", got.mode)
	}
	if b, _ := os.ReadFile(x); string(b) != "then" {
		t.Fatalf("restored content %q, want then", b)
	}
}

// A store another user could have written is refused: a forged log could
// name owners and setuid bits for a root rewind to create. Taking the
// workspace's .zero while it is unmounted is enough for its owner.
func TestOpenRefusesAStoreOthersCouldWrite(t *testing.T) {
	needRoot(t)
	ctx := context.Background()
	for _, tc := range []struct {
		name  string
		spoil func(store string) error
	}{
		{"store owned by another user", func(store string) error { return os.Chown(store, 65534, 65534) }},
		{"log owned by another user", func(store string) error { return os.Chown(filepath.Join(store, "events.jsonl"), 65534, 65534) }},
		{"store writable by its group", func(store string) error { return os.Chmod(store, 0o770) }},
		{"log writable by others", func(store string) error { return os.Chmod(filepath.Join(store, "events.jsonl"), 0o606) }},
		{"log a symlink", func(store string) error {
			log := filepath.Join(store, "events.jsonl")
			if err := os.Rename(log, log+".real"); err != nil {
				return err
			}
			return os.Symlink("events.jsonl.real", log)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e, ws := openT(t, Options{})
			if _, err := e.BeginStep(ctx, "a step", nil); err != nil {
				t.Fatal(err)
			}
			store := e.opts.StoreDir
			if err := e.Close(); err != nil {
				t.Fatal(err)
			}
			if err := tc.spoil(store); err != nil {
				t.Fatal(err)
			}
			err := openRefused(t, "a store others may write to", ws, Options{StoreDir: store})
			if !errors.Is(err, ErrUntrustedStore) {
				t.Fatalf("Open: %v, want ErrUntrustedStore", err)
			}
		})
	}
}

// A fork belongs to whoever makes it, so a setuid file of another user's
// in the history must not come out of a root fork setuid root; the
// forker's own setuid file keeps its bit.
func TestForkNeverMakesAnotherUsersFileSetuidForTheForker(t *testing.T) {
	needRoot(t)
	ctx := context.Background()
	e, ws := openT(t, Options{})
	for name, uid := range map[string]int{"theirs": 65534, "mine": 0} {
		p := filepath.Join(ws, name)
		if err := os.WriteFile(p, []byte(name), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(p, uid, uid); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, 0o755|os.ModeSetuid|os.ModeSetgid); err != nil {
			t.Fatal(err)
		}
	}
	s, err := e.BeginStep(ctx, "overwrite", nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"theirs", "mine"} {
		change(t, e, func() error { return os.WriteFile(filepath.Join(ws, name), []byte("new"), 0o644) }, Change{Path: name})
	}
	dir := filepath.Join(t.TempDir(), "fork")
	if _, err := e.Fork(ctx, s.Seq, dir, ws); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]meta{"theirs": {0, 0, 0o755, time.Time{}}, "mine": {0, 0, 0o6755, time.Time{}}} {
		got := lstatMeta(t, filepath.Join(dir, name))
		got.mtime = time.Time{}
		if got != want {
			t.Errorf("forked %s: %v, want %v", name, got, want)
		}
	}
}
