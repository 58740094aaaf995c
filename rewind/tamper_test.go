package rewind

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/zerofs/zerofs/blobstore"
	"github.com/zerofs/zerofs/eventlog"
	"github.com/zerofs/zerofs/record"
)

// The store is untrusted: these tests build a real store with the engine,
// copy it, tamper with the copy the way an attacker with write access to the
// store could, and check that opening it refuses the store, naming the line,
// and that nothing outside the workspace was touched.

// realStore builds a workspace and store (the store inside the workspace's
// parent, P/ws and P/store) with a few steps and a rewind, closes the
// engine, and returns a fresh copy of both under a new parent directory.
func realStore(t *testing.T) (parent, ws, store string) {
	t.Helper()
	ctx := context.Background()
	dir := t.TempDir()
	ws, store = filepath.Join(dir, "ws"), filepath.Join(dir, "store")
	os.Mkdir(ws, 0o755)
	root, err := os.Open(ws)
	if err != nil {
		t.Fatal(err)
	}
	e, err := Open(ctx, root, Options{StoreDir: store, Sync: true})
	if err != nil {
		t.Fatal(err)
	}
	change(t, e, func() error { return os.WriteFile(filepath.Join(ws, "a"), []byte("one"), 0o644) }, Change{Path: "a"})
	change(t, e, func() error { return os.Mkdir(filepath.Join(ws, "d"), 0o755) }, Change{Path: "d"})
	s1, err := e.BeginStep(ctx, "s1", nil)
	if err != nil {
		t.Fatal(err)
	}
	change(t, e, func() error { return os.WriteFile(filepath.Join(ws, "a"), []byte("two"), 0o644) }, Change{Path: "a"})
	change(t, e, func() error { return os.Symlink("a", filepath.Join(ws, "d/l")) }, Change{Path: "d/l"})
	if _, err := e.Rewind(ctx, s1.Seq); err != nil {
		t.Fatal(err)
	}
	change(t, e, func() error { return os.WriteFile(filepath.Join(ws, "b"), []byte("three"), 0o644) }, Change{Path: "b"})
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	root.Close()

	parent = filepath.Join(t.TempDir(), "parent")
	os.Mkdir(parent, 0o755)
	if out, err := exec.Command("cp", "-a", ws, store, parent).CombinedOutput(); err != nil {
		t.Fatalf("cp: %v: %s", err, out)
	}
	os.WriteFile(filepath.Join(parent, "victim"), []byte("outside"), 0o644)
	return parent, filepath.Join(parent, "ws"), filepath.Join(parent, "store")
}

// appendRaw appends an event with payload to the store's log through the
// log's own writer, so the line is well formed and in sequence: only its
// content is hostile. It returns the new event's sequence.
func appendRaw(t *testing.T, store, typ string, payload any) record.Seq {
	t.Helper()
	l, err := eventlog.Open(filepath.Join(store, "events.jsonl"), eventlog.Options{Sync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	ev, err := l.Append(context.Background(), typ, payload)
	if err != nil {
		t.Fatal(err)
	}
	return ev.Seq
}

func writeIntent(t *testing.T, store string, target, cp record.Seq) {
	t.Helper()
	b, _ := json.Marshal(intent{Target: target, Checkpoint: cp, Form: record.FormRewind})
	if err := os.WriteFile(filepath.Join(store, intentName), b, 0o600); err != nil {
		t.Fatal(err)
	}
}

func openStore(ws, store string) (*Engine, error) {
	root, err := os.Open(ws)
	if err != nil {
		return nil, err
	}
	defer root.Close()
	return Open(context.Background(), root, Options{StoreDir: store, Sync: true})
}

// wantDamage checks that err is a *DamageError naming line and path, and
// that record.ErrCorrupt is inside it.
func wantDamage(t *testing.T, err error, line int, path string) {
	t.Helper()
	var de *record.DamageError
	if !errors.As(err, &de) {
		t.Fatalf("got %v, want a *DamageError", err)
	}
	if !errors.Is(err, record.ErrCorrupt) {
		t.Errorf("errors.Is(%v, record.ErrCorrupt) = false", err)
	}
	if de.Line != line || de.Path != path {
		t.Errorf("damage names line %d path %q, want line %d path %q (%v)", de.Line, de.Path, line, path, err)
	}
	if line > 0 && !strings.Contains(err.Error(), "line ") {
		t.Errorf("error %q does not name the line", err)
	}
}

// The attack: a checkpoint naming ".." as a directory of mode 0777,
// and an intent naming it, made the next open chmod the workspace's parent
// to 0777; with "absent": true it tried to remove the parent.
func TestTamperedCheckpointDotDotNeverLeavesWorkspace(t *testing.T) {
	for _, tc := range []struct {
		name   string
		record map[string]any
	}{
		{"dir 0777", map[string]any{"path": "..", "kind": "dir", "mode": 0o777}},
		{"absent", map[string]any{"path": "..", "absent": true}},
		{"under parent", map[string]any{"path": "../victim", "absent": true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			parent, ws, store := realStore(t)
			before, _ := os.Stat(parent)
			seq := appendRaw(t, store, record.TypeCheckpoint, map[string]any{"tool": "rewind", "files": []any{tc.record}})
			writeIntent(t, store, 0, seq)
			e, err := openStore(ws, store)
			if err == nil {
				e.Close()
				t.Fatal("Open of a store whose checkpoint names a path outside the workspace succeeded")
			}
			wantDamage(t, err, int(seq), tc.record["path"].(string))
			after, err := os.Stat(parent)
			if err != nil {
				t.Fatalf("the workspace's parent is gone: %v", err)
			}
			if after.Mode() != before.Mode() {
				t.Fatalf("the workspace's parent changed mode: %v -> %v", before.Mode(), after.Mode())
			}
			if b, err := os.ReadFile(filepath.Join(parent, "victim")); err != nil || string(b) != "outside" {
				t.Fatalf("a file beside the workspace changed: %q, %v", b, err)
			}
			if b, err := os.ReadFile(filepath.Join(ws, "b")); err != nil || string(b) != "three" {
				t.Fatalf("the workspace changed: b = %q, %v", b, err)
			}
		})
	}
}

// Every record zerofs could never have written is damage, named with its
// line and path, and Open refuses the store.
func TestTamperedRecordsRefused(t *testing.T) {
	blob := blobstore.Sum([]byte("x")).String()
	for _, tc := range []struct {
		name   string
		record map[string]any
	}{
		{"absolute", map[string]any{"path": "/etc/passwd", "kind": "file", "blob": blob}},
		{"dot dot inside", map[string]any{"path": "d/../../x", "kind": "dir"}},
		{"dot", map[string]any{"path": "./a", "kind": "dir"}},
		{"doubled slash", map[string]any{"path": "d//x", "kind": "dir"}},
		{"trailing slash", map[string]any{"path": "d/", "kind": "dir"}},
		{"NUL", map[string]any{"path": "a\x00b", "kind": "dir"}},
		{"store", map[string]any{"path": ".zero/events.jsonl", "absent": true}},
		{"view", map[string]any{"path": "@3", "kind": "dir"}},
		{"view with many digits", map[string]any{"path": "@99999999999999999999", "kind": "dir"}},
		{"unknown kind", map[string]any{"path": "f", "kind": "fifo"}},
		{"no kind", map[string]any{"path": "f"}},
		{"bad blob id", map[string]any{"path": "f", "kind": "file", "blob": "../../../etc/passwd"}},
		{"no blob", map[string]any{"path": "f", "kind": "file"}},
		{"file type in mode", map[string]any{"path": "f", "kind": "file", "blob": blob, "mode": 0o100644}},
		{"symlink without target", map[string]any{"path": "l", "kind": "symlink"}},
		{"negative size", map[string]any{"path": "f", "kind": "file", "blob": blob, "bytes": -1}},
		{"root as a file", map[string]any{"path": "", "kind": "file", "blob": blob}},
		{"root absent", map[string]any{"path": "", "absent": true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, ws, store := realStore(t)
			seq := appendRaw(t, store, record.TypeCheckpoint, map[string]any{"tool": "edit", "files": []any{tc.record}})
			e, err := openStore(ws, store)
			if err == nil {
				e.Close()
				t.Fatalf("Open of a store holding %v succeeded", tc.record)
			}
			wantDamage(t, err, int(seq), tc.record["path"].(string))
			ev := record.Event{Seq: seq, Type: record.TypeCheckpoint}
			ev.Payload, _ = json.Marshal(map[string]any{"files": []any{tc.record}})
			if err := record.CheckEvent("log", ev); err == nil {
				t.Errorf("CheckEvent of %v: nil, want damage", tc.record)
			}
		})
	}
}

// What zerofs itself writes passes: the untampered copy opens, and every
// event of it passes CheckEvent.
func TestUntamperedStoreOpens(t *testing.T) {
	_, ws, store := realStore(t)
	for ev, err := range eventlog.ReadFile(filepath.Join(store, "events.jsonl"), 1) {
		if err != nil {
			t.Fatal(err)
		}
		if err := record.CheckEvent("log", ev); err != nil {
			t.Errorf("event %d (%s): %v", ev.Seq, ev.Type, err)
		}
	}
	e, err := openStore(ws, store)
	if err != nil {
		t.Fatal(err)
	}
	e.Close()
}

// The intent record is untrusted too: it must name a rewind's checkpoint
// that nothing but that rewind's own session_rewind follows.
func TestTamperedIntentRefused(t *testing.T) {
	for _, tc := range []struct {
		name   string
		tamper func(t *testing.T, store string) // writes the intent
	}{
		{"not JSON", func(t *testing.T, store string) {
			os.WriteFile(filepath.Join(store, intentName), []byte("{"), 0o600)
		}},
		{"beyond head", func(t *testing.T, store string) { writeIntent(t, store, 0, 1000) }},
		{"target not below checkpoint", func(t *testing.T, store string) { writeIntent(t, store, 2, 2) }},
		{"names a tool_call", func(t *testing.T, store string) {
			seq := appendRaw(t, store, record.TypeToolCall, map[string]any{"name": "x"})
			writeIntent(t, store, 0, seq)
		}},
		{"names an edit's checkpoint", func(t *testing.T, store string) {
			seq := appendRaw(t, store, record.TypeCheckpoint, map[string]any{"tool": "edit", "files": []any{map[string]any{"path": "a", "absent": true}}})
			writeIntent(t, store, 0, seq)
		}},
		{"stale", func(t *testing.T, store string) {
			// A rewind's checkpoint with later events after it: replaying
			// it would undo them.
			seq := appendRaw(t, store, record.TypeCheckpoint, map[string]any{"tool": "rewind", "files": []any{map[string]any{"path": "b", "absent": true}}})
			appendRaw(t, store, record.TypeToolCall, map[string]any{"name": "later"})
			writeIntent(t, store, 0, seq)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, ws, store := realStore(t)
			tc.tamper(t, store)
			e, err := openStore(ws, store)
			if err == nil {
				e.Close()
				t.Fatal("Open with a tampered intent succeeded")
			}
			var de *record.DamageError
			if !errors.As(err, &de) || de.File != intentName {
				t.Fatalf("got %v, want a *DamageError naming %s", err, intentName)
			}
			if b, err := os.ReadFile(filepath.Join(ws, "b")); err != nil || string(b) != "three" {
				t.Fatalf("the workspace changed: b = %q, %v", b, err)
			}
		})
	}
}

// A crash after the session_rewind was recorded but before the intent was
// removed: the next open removes the intent and records nothing more.
func TestIntentOfRecordedRewindRemoved(t *testing.T) {
	_, ws, store := realStore(t)
	e, err := openStore(ws, store)
	if err != nil {
		t.Fatal(err)
	}
	last, _, ok := e.LastRewind()
	head := e.Head()
	e.Close()
	if !ok {
		t.Fatal("no rewind in the history")
	}
	// The rewind is not the last event: put a copy of its intent back on a
	// history that ends with it.
	lines, _ := os.ReadFile(filepath.Join(store, "events.jsonl"))
	var keep []string
	for _, l := range strings.SplitAfter(string(lines), "\n") {
		var ev record.Event
		if json.Unmarshal([]byte(l), &ev) == nil && ev.Seq <= last.CheckpointSequence+1 {
			keep = append(keep, l)
		}
	}
	os.WriteFile(filepath.Join(store, "events.jsonl"), []byte(strings.Join(keep, "")), 0o600)
	writeIntent(t, store, last.TargetSequence, last.CheckpointSequence)
	e, err = openStore(ws, store)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	if got, want := e.Head(), last.CheckpointSequence+1; got != want {
		t.Fatalf("head after recovery: got %d, want %d (head was %d): the rewind was recorded again", got, want, head)
	}
	if _, err := os.Stat(filepath.Join(store, intentName)); !os.IsNotExist(err) {
		t.Fatalf("intent still there: %v", err)
	}
}

// The last line of defence: a plan that would act on a path outside the
// workspace (or remove or create its root) is refused before anything is
// done, whatever produced it.
func TestApplyPlanRefusesUnsafePaths(t *testing.T) {
	e, ws := openT(t, Options{})
	parent := filepath.Dir(ws)
	before, _ := os.Stat(parent)
	for _, plan := range []*rewindPlan{
		{removes: []string{".."}},
		{removes: []string{""}},
		{removes: []string{"a/../../x"}},
		{creates: []record.FileState{{Path: "../x", Kind: record.KindDir}}},
		{creates: []record.FileState{{Path: "/tmp/x", Kind: record.KindDir}}},
		{chmods: []record.FileState{{Path: "..", Kind: record.KindDir, Mode: 0o777}}},
		{chmods: []record.FileState{{Path: ".zero", Kind: record.KindDir, Mode: 0o777}}},
	} {
		if err := e.applyPlan(plan, noProgress{}); !errors.Is(err, record.ErrUnsafePath) {
			t.Errorf("applyPlan(%+v): got %v, want ErrUnsafePath", *plan, err)
		}
	}
	if after, _ := os.Stat(parent); after.Mode() != before.Mode() {
		t.Fatalf("the workspace's parent changed mode: %v -> %v", before.Mode(), after.Mode())
	}
}
