package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/zerofs/zerofs/history"
)

// TestRunRecordsResult: `zerofs run` records its command's exit status and
// how long it ran in its step; `log` marks the failed step ("failed", the
// exit code), `log --failed` lists only it, whether it changed anything or
// not, `log --json` carries each step's result and `show STEP` says it.
func TestRunRecordsResult(t *testing.T) {
	ws := filepath.Join(t.TempDir(), "app")
	if err := os.Mkdir(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	mountT(t, ws)
	if r := bin(t, ws, "", "run", "--label", "build", "--", "sh", "-c", "echo built > out.txt"); r.code != 0 {
		t.Fatalf("run: exit %d: %s", r.code, r.stderr)
	}
	if r := bin(t, ws, "", "run", "--label", "test", "--", "sh", "-c", "echo broken > out.txt; exit 3"); r.code != 3 {
		t.Fatalf("run of a failing command: exit %d, want 3: %s", r.code, r.stderr)
	}
	if r := bin(t, ws, "", "run", "--label", "check", "--", "false"); r.code != 1 {
		t.Fatalf("run false: exit %d, want 1: %s", r.code, r.stderr)
	}
	var entries []history.Entry
	if err := json.Unmarshal([]byte(binOK(t, ws, "log", "--json", "--all")), &entries); err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, e := range entries {
		if e.Label == "test" {
			if out := binOK(t, ws, "show", itoaT(int(e.Sequence))); !strings.Contains(out, "result: failed (exit 3, ") {
				t.Errorf("show %d lacks its result:\n%s", e.Sequence, out)
			}
		}
		r := e.Result
		if r == nil || r.ExitCode == nil || r.DurationMs == nil || r.Step != e.Sequence {
			t.Fatalf("step %d %q: result %+v", e.Sequence, e.Label, r)
		}
		got[e.Label] = r.Status + " " + itoaT(*r.ExitCode)
	}
	want := map[string]string{"build": "ok 0", "test": "error 3", "check": "error 1"}
	if len(got) != len(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("step %q: result %q, want %q", k, got[k], v)
		}
	}
	out := binOK(t, ws, "log")
	if !strings.Contains(out, "test  failed (exit 3, ") || strings.Contains(out, "build  failed") {
		t.Errorf("log does not mark the failed step:\n%s", out)
	}
	// check changed nothing: --failed lists it all the same.
	failed := binOK(t, ws, "log", "--failed")
	if !strings.Contains(failed, "check  failed (exit 1") || !strings.Contains(failed, "test  failed") || strings.Contains(failed, "build") {
		t.Errorf("log --failed:\n%s", failed)
	}
}

func itoaT(n int) string {
	b, _ := json.Marshal(n)
	return string(b)
}

// TestResultHookEdges: an after-tool hook never stops the agent: a result
// no step matches, one for an unmounted workspace, and JSON that is no
// hook's each exit 0 with a warning and append nothing; --no-prompt keeps
// the error's first line out of the log.
func TestResultHookEdges(t *testing.T) {
	ws := filepath.Join(t.TempDir(), "app")
	if err := os.Mkdir(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	mountT(t, ws)
	hook := func(name string, args ...string) result {
		t.Helper()
		r := bin(t, "/", fixture(t, name, ws), append([]string{"step", "--hook", "--agent", "claude"}, args...)...)
		if r.code != 0 {
			t.Fatalf("%s: exit %d: %s", name, r.code, r.stderr)
		}
		return r
	}
	head := binOK(t, ws, "status")
	// Its tool call was never recorded: no step to put it in.
	if r := hook("claude-PostToolUseFailure-Bash.json"); !strings.Contains(r.stderr, "warning") {
		t.Errorf("a result that matches no step: no warning: %q", r.stderr)
	}
	if now := binOK(t, ws, "status"); now != head {
		t.Errorf("a result that matched no step changed the history:\n%s\n%s", head, now)
	}
	hook("claude-PreToolUse-Bash-fails.json")
	hook("claude-PostToolUseFailure-Bash.json", "--no-prompt")
	var entries []history.Entry
	json.Unmarshal([]byte(binOK(t, ws, "log", "--json", "--all")), &entries)
	if len(entries) != 1 || entries[0].Result == nil || entries[0].Result.Status != "error" || entries[0].Result.Summary != "" {
		t.Fatalf("with --no-prompt: %+v", entries)
	}
	if check := binOK(t, ws, "hooks", "check"); !strings.Contains(check, "(step "+itoaT(int(entries[0].Sequence))+"): error, exit 2") {
		t.Errorf("hooks check does not name claude's last result:\n%s", check)
	}
	// Unmounted: a warning, exit 0.
	other := filepath.Join(t.TempDir(), "other")
	os.Mkdir(other, 0o755)
	r := bin(t, "/", fixture(t, "claude-PostToolUse-Bash.json", other), "step", "--hook", "--agent", "claude")
	if r.code != 0 || !strings.Contains(r.stderr, "warning") {
		t.Errorf("a result outside a mounted workspace: exit %d, %q", r.code, r.stderr)
	}
}

// TestHooksCheckOldInstall: an install from before results (the tool and
// prompt hooks only) is found by `hooks check`, which says the after-tool
// hooks are missing; installing again adds them and keeps the rest.
func TestHooksCheckOldInstall(t *testing.T) {
	home, project := t.TempDir(), t.TempDir()
	t.Setenv("HOME", home)
	t.Setenv("XDG_CONFIG_HOME", "")
	mustRun(t, project, "hooks", "install", "claude", "--zerofs", "/usr/local/bin/zerofs")
	path := filepath.Join(project, ".claude", "settings.json")
	var cfg map[string]map[string]any
	b, err := os.ReadFile(path)
	if err != nil || json.Unmarshal(b, &cfg) != nil || cfg["hooks"]["PostToolUse"] == nil || cfg["hooks"]["PostToolUseFailure"] == nil {
		t.Fatalf("the install lacks the after-tool hooks: %v\n%s", err, b)
	}
	delete(cfg["hooks"], "PostToolUse")
	delete(cfg["hooks"], "PostToolUseFailure")
	b, _ = json.Marshal(cfg)
	writeFile(t, path, string(b))
	check := mustRun(t, project, "hooks", "check")
	if !strings.Contains(check, "claude    installed: project") || !strings.Contains(check, "without the after-tool hooks") {
		t.Errorf("hooks check of an old install:\n%s", check)
	}
	if out := mustRun(t, project, "hooks", "install", "claude", "--zerofs", "/usr/local/bin/zerofs"); !strings.Contains(out, "+    \"PostToolUse\"") {
		t.Errorf("installing again:\n%s", out)
	}
	if check := mustRun(t, project, "hooks", "check"); strings.Contains(check, "without the after-tool hooks") {
		t.Errorf("hooks check after installing again:\n%s", check)
	}
}
