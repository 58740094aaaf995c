package main

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/zerofs/zerofs/rewind"
)

func TestFindWorkspace(t *testing.T) {
	root := t.TempDir()
	ws := filepath.Join(root, "ws")
	deep := filepath.Join(ws, "a", "b")
	if err := os.MkdirAll(deep, 0o755); err != nil {
		t.Fatal(err)
	}
	// A .zero without a log is not a store (a mount that never started).
	os.MkdirAll(filepath.Join(ws, "a", ".zero"), 0o755)
	if _, err := findWorkspace(deep); !errors.Is(err, errNoWorkspace) {
		t.Fatalf("before the store exists: got %v, want errNoWorkspace", err)
	}
	os.MkdirAll(filepath.Join(ws, ".zero"), 0o755)
	writeFile(t, filepath.Join(ws, ".zero", "events.jsonl"), "")
	for _, dir := range []string{ws, deep, filepath.Join(ws, "a")} {
		got, err := findWorkspace(dir)
		if err != nil {
			t.Fatalf("from %s: %v", dir, err)
		}
		if got.Root != ws || got.Mounted || got.Store != filepath.Join(ws, ".zero") {
			t.Errorf("from %s: got %+v, want the unmounted store at %s", dir, got, ws)
		}
	}
	w := &workspace{Root: ws}
	for _, tc := range []struct{ cwd, arg, want string }{
		{ws, "x.go", "x.go"},
		{deep, "x.go", "a/b/x.go"},
		{deep, "../x.go", "a/x.go"},
		{deep, ".", "a/b"},
		{ws, ".", ""},
		{ws, filepath.Join(ws, "a", "y"), "a/y"},
	} {
		got, err := w.relPath(tc.cwd, tc.arg)
		if err != nil || got != tc.want {
			t.Errorf("relPath(%s, %s) = %q, %v; want %q", tc.cwd, tc.arg, got, err, tc.want)
		}
	}
	for _, bad := range []string{"..", "../x", "/etc/passwd"} {
		if got, err := w.relPath(ws, bad); err == nil {
			t.Errorf("relPath(%s) = %q, want an error", bad, got)
		}
	}
}

func TestParseMountinfo(t *testing.T) {
	for _, tc := range []struct{ line, mp, fstype string }{
		{`36 35 98:0 /mnt1 /mnt2 rw,noatime master:1 - ext3 /dev/root rw,errors=continue`, "/mnt2", "ext3"},
		{`80 25 0:48 / /tmp/my\040ws rw,nosuid,nodev,relatime shared:1 - fuse.zerofs zerofs rw,user_id=0`, "/tmp/my ws", "fuse.zerofs"},
		{`81 25 0:49 / /x rw - fuse zerofs rw`, "/x", "fuse"},
	} {
		mp, fstype, ok := parseMountinfo(tc.line)
		if !ok || mp != tc.mp || fstype != tc.fstype {
			t.Errorf("parseMountinfo(%q) = %q, %q, %v; want %q, %q", tc.line, mp, fstype, ok, tc.mp, tc.fstype)
		}
	}
	if _, _, ok := parseMountinfo("garbage"); ok {
		t.Error("parseMountinfo(garbage) ok")
	}
}

func TestUndoRedoTargets(t *testing.T) {
	step := func(start, end Seq, changed bool) *block {
		b := &block{Type: blockStep, Seq: start, Start: start, End: end}
		if changed {
			b.Files = append(b.Files, fileState("a"))
		}
		return b
	}
	rw := func(start, seq, target Seq) *block {
		return &block{Type: blockRewind, Seq: seq, Start: start, End: seq, Rewind: rewindPayload(target, start)}
	}
	for _, tc := range []struct {
		name       string
		blocks     []*block
		undo, redo Seq
		canUndo    bool
		canRedo    bool
	}{
		{"empty", nil, 0, 0, false, false},
		{"one step", []*block{step(1, 3, true)}, 0, 0, true, false},
		{"empty last step", []*block{step(1, 3, true), step(4, 4, false)}, 0, 0, true, false},
		{"after an undo", []*block{step(1, 3, true), step(4, 6, true), rw(7, 8, 3)}, 0, 6, true, true},
		{"changes after a rewind", []*block{step(1, 3, true), rw(4, 5, 0), step(6, 7, true)}, 5, 0, true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			u, ok := undoTarget(tc.blocks)
			if ok != tc.canUndo || (ok && u != tc.undo) {
				t.Errorf("undo: got %d, %v; want %d, %v", u, ok, tc.undo, tc.canUndo)
			}
			r, ok := redoTarget(tc.blocks)
			if ok != tc.canRedo || (ok && r != tc.redo) {
				t.Errorf("redo: got %d, %v; want %d, %v", r, ok, tc.redo, tc.canRedo)
			}
		})
	}
}

func fileState(p string) rewind.FileState { return rewind.FileState{Path: p} }

func rewindPayload(target, checkpoint Seq) *rewind.RewindPayload {
	return &rewind.RewindPayload{TargetSequence: target, CheckpointSequence: checkpoint}
}
