package main

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/zerofs/zerofs/eventlog"
)

// The attack on a copy of a real store: a checkpoint naming ".."
// (a directory of mode 0777, or absent) and a rewind intent naming it. The
// next mount chmod-ed the workspace's parent to 0777, or tried to remove
// it, and `zerofs verify` said ok. Now verify exits 1 naming the line, the
// mount refuses to start naming it, and the parent is untouched.
func TestTamperedStoreDotDotRefusedByMountAndVerify(t *testing.T) {
	needFUSE(t)
	// A real store: a mounted workspace with a few steps and an undo.
	orig := filepath.Join(t.TempDir(), "orig")
	os.MkdirAll(filepath.Join(orig, "ws"), 0o755)
	ws := filepath.Join(orig, "ws")
	os.WriteFile(filepath.Join(ws, "a.txt"), []byte("one\n"), 0o644)
	mountT(t, ws)
	binOK(t, ws, "step", "edit a")
	sh(t, ws, "echo two > a.txt; mkdir d; echo x > d/x")
	binOK(t, ws, "step", "edit more")
	sh(t, ws, "echo three > a.txt; rm d/x")
	binOK(t, ws, "undo")
	unmountT(t, ws)

	for _, tc := range []struct {
		name   string
		record map[string]any
	}{
		{"chmod parent", map[string]any{"path": "..", "kind": "dir", "mode": 0o777}},
		{"remove parent", map[string]any{"path": "..", "absent": true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			parent := filepath.Join(t.TempDir(), "parent")
			os.Mkdir(parent, 0o755)
			if out, err := exec.Command("cp", "-a", ws, parent).CombinedOutput(); err != nil {
				t.Fatalf("cp: %v: %s", err, out)
			}
			copyWS := filepath.Join(parent, "ws")
			store := filepath.Join(copyWS, ".zero")
			l, err := eventlog.Open(filepath.Join(store, "events.jsonl"), eventlog.Options{Sync: true})
			if err != nil {
				t.Fatal(err)
			}
			ev, err := l.Append(context.Background(), eventlog.TypeCheckpoint, map[string]any{"tool": "rewind", "files": []any{tc.record}})
			l.Close()
			if err != nil {
				t.Fatal(err)
			}
			intent, _ := json.Marshal(map[string]any{"target": 0, "checkpoint": ev.Seq})
			if err := os.WriteFile(filepath.Join(store, "rewind-intent.json"), intent, 0o600); err != nil {
				t.Fatal(err)
			}
			line := "line " + strconv.FormatUint(uint64(ev.Seq), 10)

			r := zerofs(t, copyWS, "", "verify")
			if r.code != 1 || !strings.Contains(r.stdout, line) || !strings.Contains(r.stdout, `".."`) {
				t.Errorf("verify: exit %d, stdout %q; want exit 1 naming %s and \"..\"", r.code, r.stdout, line)
			}

			r = bin(t, "/", "", "mount", copyWS)
			if r.code == 0 {
				unmountT(t, copyWS)
				t.Fatal("zerofs mount of the tampered store succeeded")
			}
			if !strings.Contains(r.stderr, line) {
				t.Errorf("mount refused with %q, want it to name %s", r.stderr, line)
			}
			if ok, _ := fuseMounted(copyWS); ok {
				unmountT(t, copyWS)
				t.Fatal("the tampered store is mounted")
			}
			fi, err := os.Stat(parent)
			if err != nil {
				t.Fatalf("the workspace's parent is gone: %v", err)
			}
			if fi.Mode().Perm() != 0o755 {
				t.Fatalf("the workspace's parent has mode %v, want 0755", fi.Mode().Perm())
			}
			if b, err := os.ReadFile(filepath.Join(copyWS, "a.txt")); err != nil || string(b) != "two\n" {
				t.Fatalf("a.txt = %q, %v; want the workspace as the undo left it", b, err)
			}
		})
	}
}
