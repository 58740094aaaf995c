package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestMCPBisect: zerofs_bisect takes the command as an argument vector
// (never a shell string, never flags) and returns the first bad step, its
// changes and the probes in structured form; a command that does not fail
// now is a tool error that says so. zerofs_log carries each step's result.
func TestMCPBisect(t *testing.T) {
	ws := filepath.Join(t.TempDir(), "ws")
	if err := os.Mkdir(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(ws, "flag"), "ok\n")
	mountT(t, ws)
	for i, label := range []string{"one", "two", "break it", "four", "five"} {
		binOK(t, ws, "step", label)
		writeFile(t, filepath.Join(ws, label+".txt"), "x\n")
		if i == 2 {
			writeFile(t, filepath.Join(ws, "flag"), "broken\n")
		}
	}
	if r := bin(t, ws, "", "run", "--label", "check", "--", "sh", "-c", "grep -qx ok flag"); r.code != 1 {
		t.Fatalf("run: exit %d: %s", r.code, r.stderr)
	}
	c := newMCPClient(t, ws)
	text, out := c.ok("zerofs_bisect", map[string]any{"command": []string{"grep", "-qx", "ok", "flag"}, "timeout_seconds": 60})
	fb, _ := out["first_bad"].(map[string]any)
	if fb["label"] != "break it" || !strings.Contains(text, `first bad step`) {
		t.Fatalf("zerofs_bisect: %v\n%s", out, text)
	}
	changes, _ := fb["changes"].([]any)
	var paths []string
	for _, ch := range changes {
		paths = append(paths, ch.(map[string]any)["path"].(string))
	}
	if strings.Join(paths, " ") != "break it.txt flag" {
		t.Errorf("the first bad step's changes: %v", paths)
	}
	if probes, _ := out["probes"].([]any); len(probes) == 0 || len(probes) > 4 {
		t.Errorf("probes: %v", out["probes"])
	}
	c.fail("zerofs_bisect", map[string]any{"command": []string{"true"}}, "does not fail")
	c.fail("zerofs_bisect", map[string]any{"command": []string{"--help"}}, "--help")
	c.fail("zerofs_bisect", map[string]any{"command": []string{}}, "empty")
	// The workspace is as it was.
	if b, _ := os.ReadFile(filepath.Join(ws, "flag")); string(b) != "broken\n" {
		t.Errorf("flag is %q after bisect", b)
	}
	_, log := c.ok("zerofs_log", map[string]any{"all": true})
	entries, _ := log["entries"].([]any)
	var found bool
	for _, e := range entries {
		m := e.(map[string]any)
		if m["label"] == "check" {
			r, _ := m["result"].(map[string]any)
			found = r["status"] == "error" && r["exit_code"] == float64(1)
		}
	}
	if !found {
		t.Errorf("zerofs_log: the failed step's result is missing: %v", entries)
	}
}
