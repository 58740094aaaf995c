package rewind

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/zerofs/zerofs/record"
)

// renameDir renames from to to through RenameDir, as the FUSE layer does,
// and fails the test unless the engine recorded it as one record.
func renameDir(t *testing.T, e *Engine, ws, from, to string) {
	t.Helper()
	release, _, err := e.Begin(context.Background(), Caller{PID: 1, Comm: "mv"})
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	handled, err := e.RenameDir(context.Background(), Caller{PID: 1, Comm: "mv"}, from, to, func() error {
		return os.Rename(filepath.Join(ws, from), filepath.Join(ws, to))
	})
	if !handled || err != nil {
		t.Fatalf("RenameDir(%q, %q) = %v, %v", from, to, handled, err)
	}
}

// lastCheckpoint is the payload of the log's last session_checkpoint.
func lastCheckpoint(t *testing.T, e *Engine) (record.Seq, record.Checkpoint) {
	t.Helper()
	var cp record.Checkpoint
	var seq record.Seq
	for ev, err := range e.log.Events(1) {
		if err != nil {
			t.Fatal(err)
		}
		if ev.Type == record.TypeCheckpoint {
			seq = ev.Seq
			cp = record.Checkpoint{}
			if err := json.Unmarshal(ev.Payload, &cp); err != nil {
				t.Fatal(err)
			}
		}
	}
	return seq, cp
}

func TestRenameRecordIsOneRecord(t *testing.T) {
	e, ws := openT(t, Options{RenameRecords: true})
	step(t, e, "setup")
	for i := range 50 {
		p := fmt.Sprintf("a/d%d/f%d", i%5, i)
		write(t, e, ws, p, fmt.Sprintf("content %d\n", i))
	}
	t0 := step(t, e, "mv")
	renameDir(t, e, ws, "a", "b")
	_, cp := lastCheckpoint(t, e)
	if len(cp.Files) != 2 || cp.Files[0].Path != "a" || cp.Files[0].RenamedTo != "b" ||
		cp.Files[1].Path != "b" || cp.Files[1].RenamedFrom != "a" || !cp.Files[1].Absent {
		t.Fatalf("the rename's checkpoint is %+v, want one record of a -> b", cp.Files)
	}
	// An edit inside the moved directory in a later step.
	t1 := step(t, e, "edit")
	write(t, e, ws, "b/d1/f1", "changed\n")
	t2 := step(t, e, "mv back")
	renameDir(t, e, ws, "b", "a")
	t3 := step(t, e, "end")

	for _, c := range []struct {
		t         record.Seq
		path, has string
	}{
		{t0, "a/d1/f1", "content 1\n"}, {t0, "a/d2/f7", "content 7\n"},
		{t1, "b/d1/f1", "content 1\n"}, {t2, "b/d1/f1", "changed\n"},
		{t3, "a/d1/f1", "changed\n"}, {t3, "a/d2/f7", "content 7\n"},
	} {
		if got := contentAt(t, e, c.path, c.t); got != c.has {
			t.Errorf("@%d/%s = %q, want %q", c.t, c.path, got, c.has)
		}
	}
	for _, c := range []struct {
		t    record.Seq
		path string
	}{{t0, "b"}, {t1, "a"}, {t2, "a/d1/f1"}, {t3, "b"}} {
		if ent, err := e.StateAt(c.path, c.t); err != nil || ent.Exists {
			t.Errorf("@%d/%s exists (%v)", c.t, c.path, err)
		}
	}
	ents, err := e.ReadDirAt("a/d1", t0)
	if err != nil || len(ents) != 10 {
		t.Fatalf("ReadDirAt(a/d1, %d) = %d entries, %v; want 10", t0, len(ents), err)
	}

	// Rewinds put the tree back under its old name, and undo brings the
	// later one back.
	for _, tt := range []record.Seq{t1, t0, t2} {
		if _, err := e.Rewind(context.Background(), tt); err != nil {
			t.Fatalf("Rewind(%d): %v", tt, err)
		}
		want := map[record.Seq]string{t0: "a", t1: "b", t2: "b"}[tt]
		if got := readFile(t, ws, want+"/d2/f7"); got != "content 7\n" {
			t.Fatalf("after Rewind(%d) %s/d2/f7 = %q", tt, want, got)
		}
		f1 := map[record.Seq]string{t0: "content 1\n", t1: "content 1\n", t2: "changed\n"}[tt]
		if got := readFile(t, ws, want+"/d1/f1"); got != f1 {
			t.Fatalf("after Rewind(%d) %s/d1/f1 = %q, want %q", tt, want, got, f1)
		}
		other := map[string]string{"a": "b", "b": "a"}[want]
		if _, err := os.Lstat(filepath.Join(ws, other)); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("after Rewind(%d) %s exists (%v)", tt, other, err)
		}
		last, _, _ := e.LastRewind()
		if _, err := e.Rewind(context.Background(), last.CheckpointSequence-1); err != nil {
			t.Fatal(err)
		}
		if got := readFile(t, ws, "a/d1/f1"); got != "changed\n" {
			t.Fatalf("undoing Rewind(%d): a/d1/f1 = %q", tt, got)
		}
	}
}

// A rename that fails after its record is taken back by a second record:
// every state still shows the names as they were.
func TestRenameRecordOfAFailedRename(t *testing.T) {
	e, ws := openT(t, Options{RenameRecords: true})
	step(t, e, "setup")
	write(t, e, ws, "a/x", "x\n")
	t0 := step(t, e, "mv")
	release, _, err := e.Begin(context.Background(), Caller{PID: 1, Comm: "mv"})
	if err != nil {
		t.Fatal(err)
	}
	handled, err := e.RenameDir(context.Background(), Caller{PID: 1, Comm: "mv"}, "a", "b", func() error { return syscall.EXDEV })
	release()
	if !handled || !errors.Is(err, syscall.EXDEV) {
		t.Fatalf("RenameDir = %v, %v; want the rename's own error", handled, err)
	}
	write(t, e, ws, "a/x", "after\n")
	t1 := step(t, e, "end")
	if got := contentAt(t, e, "a/x", t0); got != "x\n" {
		t.Errorf("@%d/a/x = %q", t0, got)
	}
	if got := contentAt(t, e, "a/x", t1); got != "after\n" {
		t.Errorf("@%d/a/x = %q", t1, got)
	}
	if ent, err := e.StateAt("b", t1); err != nil || ent.Exists {
		t.Errorf("@%d/b exists (%v)", t1, err)
	}
	if _, err := e.Rewind(context.Background(), t0); err != nil {
		t.Fatal(err)
	}
	if got := readFile(t, ws, "a/x"); got != "x\n" {
		t.Fatalf("after Rewind(%d) a/x = %q", t0, got)
	}
}

// A destination that is not empty is not recorded this way (the rename
// would fail): the caller captures as before.
func TestRenameRecordNotForNonEmptyDestination(t *testing.T) {
	e, ws := openT(t, Options{RenameRecords: true})
	write(t, e, ws, "a/x", "x\n")
	write(t, e, ws, "b/y", "y\n")
	release, _, err := e.Begin(context.Background(), Caller{PID: 1, Comm: "mv"})
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	handled, err := e.RenameDir(context.Background(), Caller{}, "a", "b", func() error { t.Fatal("renamed"); return nil })
	if handled || err != nil {
		t.Fatalf("RenameDir onto a non-empty directory = %v, %v", handled, err)
	}
}

// contentAt is the content of file p at t.
func contentAt(t *testing.T, e *Engine, p string, at record.Seq) string {
	t.Helper()
	ent, err := e.StateAt(p, at)
	if err != nil || !ent.Exists {
		t.Fatalf("@%d/%s: exists %v, %v", at, p, ent.Exists, err)
	}
	f, err := e.OpenContent(ent)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b := make([]byte, 1<<16)
	n, _ := f.Read(b)
	return string(b[:n])
}

// step begins a step; the state before it is at the returned sequence.
func step(t *testing.T, e *Engine, label string) record.Seq {
	t.Helper()
	ev, err := e.BeginStep(context.Background(), label, nil)
	if err != nil {
		t.Fatal(err)
	}
	return ev.Seq
}

// write writes file p (making its missing parents) through captures, as
// the FUSE layer does.
func write(t *testing.T, e *Engine, ws, p, content string) {
	t.Helper()
	dir := filepath.Dir(p)
	var parents []string
	for d := dir; d != "."; d = filepath.Dir(d) {
		parents = append([]string{d}, parents...)
	}
	for _, d := range parents {
		change(t, e, func() error {
			if err := os.Mkdir(filepath.Join(ws, d), 0o755); err != nil && !errors.Is(err, os.ErrExist) {
				return err
			}
			return nil
		}, Change{Path: d})
	}
	change(t, e, func() error { return os.WriteFile(filepath.Join(ws, p), []byte(content), 0o644) }, Change{Path: p})
}

// crashRenameDir is the crash child's directory rename of a to b (the
// crash point "rename:recorded" comes between its record and the rename).
func crashRenameDir(e *Engine, ws string) error {
	release, _, err := e.Begin(context.Background(), Caller{PID: 1, Comm: "mv"})
	if err != nil {
		return err
	}
	defer release()
	_, err = e.RenameDir(context.Background(), Caller{PID: 1, Comm: "mv"}, "a", "b", func() error {
		return os.Rename(filepath.Join(ws, "a"), filepath.Join(ws, "b"))
	})
	return err
}

// TestRenameRecordCrash kills the process between a directory rename's
// record and the rename: the next open takes the record back, so every
// state, the workspace and a rewind agree that nothing moved.
func TestRenameRecordCrash(t *testing.T) {
	dir := t.TempDir()
	ws, store := filepath.Join(dir, "ws"), filepath.Join(dir, "store")
	os.Mkdir(ws, 0o755)
	e := openAt(t, ws, Options{StoreDir: store, Sync: true, RenameRecords: true})
	write(t, e, ws, "a/x", "x\n")
	write(t, e, ws, "a/d/y", "y\n")
	t0 := step(t, e, "mv")
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	killedAt(t, "crash", "rename:recorded", "ZEROFS_TEST_WS="+ws, "ZEROFS_TEST_FORM=renamedir", "ZEROFS_TEST_STORE="+store)
	e2 := openAt(t, ws, Options{StoreDir: store, Sync: true, RenameRecords: true}) // reopened after the crash
	if e2.Head() != t0+2 {
		t.Fatalf("head %d after the crash: want the record (%d) and its taking back (%d)", e2.Head(), t0+1, t0+2)
	}
	if _, err := os.Lstat(filepath.Join(ws, "b")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("b exists after the crash: %v", err)
	}
	for _, at := range []record.Seq{t0, e2.Head()} {
		if got := contentAt(t, e2, "a/d/y", at); got != "y\n" {
			t.Errorf("@%d/a/d/y = %q", at, got)
		}
		if ent, err := e2.StateAt("b", at); err != nil || ent.Exists {
			t.Errorf("@%d/b exists (%v)", at, err)
		}
	}
	// The workspace goes on: the rename made now, an edit, a rewind.
	renameDir(t, e2, ws, "a", "b")
	write(t, e2, ws, "b/x", "edited\n")
	if _, err := e2.Rewind(context.Background(), t0); err != nil {
		t.Fatal(err)
	}
	if got := readFile(t, ws, "a/x"); got != "x\n" {
		t.Fatalf("after Rewind(%d) a/x = %q", t0, got)
	}
	if got := readFile(t, ws, "a/d/y"); got != "y\n" {
		t.Fatalf("after Rewind(%d) a/d/y = %q", t0, got)
	}
	if _, err := os.Lstat(filepath.Join(ws, "b")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("b exists after Rewind(%d): %v", t0, err)
	}
}
