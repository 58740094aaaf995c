package main

import (
	"os"
	"path/filepath"
	"testing"
)

// TestMCPMerge: zerofs_merge over MCP, with a mounted workspace and a
// mounted fork: a dry run previews, names the fork's steps and lists a
// conflict with both sides' steps; the merge itself is then a tool error
// naming the path and changes nothing; settle takes the fork's side as one
// action zerofs_undo takes back.
func TestMCPMerge(t *testing.T) {
	dir := t.TempDir()
	ws, fork := filepath.Join(dir, "ws"), filepath.Join(dir, "fork")
	os.Mkdir(ws, 0o755)
	writeFile(t, filepath.Join(ws, "a.txt"), "1\n2\n3\n")
	writeFile(t, filepath.Join(ws, "b.txt"), "b\n")
	mountT(t, ws)
	binOK(t, ws, "fork", readTrim(t, filepath.Join(ws, ".zero/head")), fork)
	mountT(t, fork)
	binOK(t, ws, "step", "ours")
	sh(t, ws, `echo ours > b.txt`)
	binOK(t, fork, "step", "theirs")
	sh(t, fork, `echo theirs > b.txt && sed -i 's/^3$/three/' a.txt`)
	c := newMCPClient(t, ws)

	_, dry := c.ok("zerofs_merge", map[string]any{"dir": fork, "dry_run": true, "settle": "theirs"})
	if dry["dry_run"] != true || len(dry["preview"].([]any)) != 2 || len(dry["steps"].([]any)) != 1 {
		t.Fatalf("dry run: %v", dry)
	}
	if readTrim(t, filepath.Join(ws, "a.txt")) != "1\n2\n3" {
		t.Fatal("a dry run changed a.txt")
	}
	_, res := c.ok("zerofs_merge", map[string]any{"dir": fork, "dry_run": true})
	cs, _ := res["conflicts"].([]any)
	if len(cs) != 1 {
		t.Fatalf("conflicts: %v", res)
	}
	cf := cs[0].(map[string]any)
	if cf["path"] != "b.txt" || cf["ours"].(map[string]any)["label"] != "ours" || cf["theirs"].(map[string]any)["label"] != "theirs" {
		t.Errorf("conflict: %v", cf)
	}
	c.fail("zerofs_merge", map[string]any{"dir": fork}, "nothing changed", "b.txt", "settle")
	if readTrim(t, filepath.Join(ws, "b.txt")) != "ours" || readTrim(t, filepath.Join(ws, "a.txt")) != "1\n2\n3" {
		t.Fatal("a refused merge changed the workspace")
	}
	_, done := c.ok("zerofs_merge", map[string]any{"dir": fork, "settle": "theirs", "paths": []string{"b.txt"}})
	if done["sequence"] == nil || readTrim(t, filepath.Join(ws, "b.txt")) != "theirs" || readTrim(t, filepath.Join(ws, "a.txt")) != "1\n2\nthree" {
		t.Fatalf("merge: %v", done)
	}
	c.ok("zerofs_undo", map[string]any{})
	if readTrim(t, filepath.Join(ws, "b.txt")) != "ours" || readTrim(t, filepath.Join(ws, "a.txt")) != "1\n2\n3" {
		t.Fatal("undo did not take the merge back")
	}
	c.fail("zerofs_merge", map[string]any{"dir": dir}, "not a fork of this workspace")
}
