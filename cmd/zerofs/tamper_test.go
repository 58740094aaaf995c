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
	"github.com/zerofs/zerofs/record"

	"github.com/zerofs/zerofs/internal/testsupport"
)

// The attack on a copy of a real store: a checkpoint naming ".."
// (a directory of mode 0777, or absent) and a rewind intent naming it. The
// next mount chmod-ed the workspace's parent to 0777, or tried to remove
// it, and `zerofs verify` said ok. Now verify exits 1 naming the line, the
// mount refuses to start naming it, and the parent is untouched.
func TestTamperedStoreDotDotRefusedByMountAndVerify(t *testing.T) {
	built.NeedFUSE(t)
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
			ev, err := l.Append(context.Background(), record.TypeCheckpoint, map[string]any{"tool": "rewind", "files": []any{tc.record}})
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
			if testsupport.FUSEMounted(copyWS) {
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

// The CLI reads the log again for log, diff and show: a line written to a
// mounted store's log behind the daemon's back (the store kept outside the
// workspace) is as untrusted as one there at mount time. A checkpoint
// naming "../../../etc" made the mounted diff read outside the workspace
// through "@T/../../..". Now the command fails naming the line.
func TestMountedHistoryRefusesLineTamperedAfterMount(t *testing.T) {
	built.NeedFUSE(t)
	dir := t.TempDir()
	ws, store := filepath.Join(dir, "ws"), filepath.Join(dir, "store")
	os.Mkdir(ws, 0o755)
	os.WriteFile(filepath.Join(ws, "a.txt"), []byte("one\n"), 0o644)
	mountT(t, ws, "--store", store)
	binOK(t, ws, "step", "edit")
	sh(t, ws, "echo two > a.txt")
	head := readTrim(t, filepath.Join(ws, ".zero", "head"))
	n, _ := strconv.Atoi(head)
	outside := filepath.Join(dir, "secret")
	os.WriteFile(outside, []byte("outside the workspace\n"), 0o600)
	rel, _ := filepath.Rel(filepath.Join(ws, "@0"), outside) // ../../secret
	line, _ := json.Marshal(map[string]any{
		"id": "00000000-0000-0000-0000-000000000000", "sessionId": "00000000-0000-0000-0000-000000000000",
		"sequence": n + 1, "type": "session_checkpoint", "createdAt": "2026-01-01T00:00:00.000000000Z",
		"payload": map[string]any{"tool": "x", "files": []any{map[string]any{"path": rel, "kind": "file", "mode": 0o644, "bytes": 22,
			"blob": strings.Repeat("0", 64)}}},
	})
	f, err := os.OpenFile(filepath.Join(store, "events.jsonl"), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.Write(append(line, '\n'))
	f.Close()
	want := "line " + strconv.Itoa(n+1)
	for _, args := range [][]string{{"diff", "0"}, {"log", "--stat"}} {
		r := bin(t, ws, "", args...)
		if strings.Contains(r.stdout, "outside the workspace") {
			t.Fatalf("zerofs %s printed a file outside the workspace:\n%s", strings.Join(args, " "), r.stdout)
		}
		if r.code != 1 || !strings.Contains(r.stderr, want) {
			t.Errorf("zerofs %s: exit %d, stderr %q; want exit 1 naming %s", strings.Join(args, " "), r.code, r.stderr, want)
		}
	}
}
