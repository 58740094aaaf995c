package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/zerofs/zerofs/history"
)

// TestHooksWorktreesMounted installs Claude Code's hooks with
// --worktrees into a mounted workspace and takes them out again: the
// install writes WorktreeCreate and WorktreeRemove running this zerofs's
// `branch --hook --agent claude` and `hooks check` says so; an agent
// without worktree hooks refuses the flag, and so does a user-wide
// install; `uninstall --worktrees` (after
// its dry run, which changes nothing) takes out exactly those, and
// `uninstall` the rest, removing the file and the .claude directory the
// install made: the workspace holds what it held before, each uninstall is
// a step of its own, and `hooks check` warns of nothing after it.
func TestHooksWorktreesMounted(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	t.Setenv("XDG_CONFIG_HOME", "")
	ws := filepath.Join(t.TempDir(), "app")
	os.Mkdir(ws, 0o755)
	writeFile(t, filepath.Join(ws, "app.py"), "print('hi')\n")
	mountT(t, ws)
	settings := filepath.Join(ws, ".claude", "settings.json")
	out := binOK(t, ws, "hooks", "install", "claude", "--worktrees")
	if !strings.Contains(out, "created "+settings) || !strings.Contains(out, `"WorktreeCreate"`) || !strings.Contains(out, "is a zerofs branch beside the workspace") {
		t.Errorf("install --worktrees:\n%s", out)
	}
	var cfg struct {
		Hooks map[string][]struct{ Hooks []struct{ Command string } }
	}
	b, _ := os.ReadFile(settings)
	if err := json.Unmarshal(b, &cfg); err != nil {
		t.Fatal(err)
	}
	for _, ev := range []string{"WorktreeCreate", "WorktreeRemove"} {
		if es := cfg.Hooks[ev]; len(es) != 1 || len(es[0].Hooks) != 1 || es[0].Hooks[0].Command != binary+" branch --hook --agent claude" {
			t.Errorf("%s: %+v", ev, es)
		}
	}
	if check := binOK(t, ws, "hooks", "check"); !strings.Contains(check, "with the worktree hooks") {
		t.Errorf("hooks check:\n%s", check)
	}
	if r := bin(t, ws, "", "hooks", "install", "codex", "--worktrees"); r.code != 2 || !strings.Contains(r.stderr, "no worktree hooks") {
		t.Errorf("install codex --worktrees: exit %d, %q", r.code, r.stderr)
	}
	// For every project of the user, they would take Claude Code's git
	// worktrees away where no zerofs workspace is: refused.
	if r := bin(t, ws, "", "hooks", "install", "claude", "--worktrees", "--user"); r.code != 2 || !strings.Contains(r.stderr, "goes with a project's install") {
		t.Errorf("install claude --worktrees --user: exit %d, %q", r.code, r.stderr)
	}
	if _, err := os.Stat(filepath.Join(home, ".claude", "settings.json")); err == nil {
		t.Error("a refused install wrote the user's settings")
	}

	dry := binOK(t, ws, "hooks", "uninstall", "claude", "--worktrees", "--dry-run")
	if !strings.Contains(dry, "would take zerofs's worktree hooks out of "+settings) || !strings.Contains(dry, `-    "WorktreeCreate"`) {
		t.Errorf("uninstall --worktrees --dry-run:\n%s", dry)
	}
	if b2, _ := os.ReadFile(settings); string(b2) != string(b) {
		t.Fatal("a dry run changed the settings")
	}
	binOK(t, ws, "hooks", "uninstall", "claude", "--worktrees")
	b, _ = os.ReadFile(settings)
	if strings.Contains(string(b), "Worktree") || !strings.Contains(string(b), "PreToolUse") {
		t.Errorf("after uninstall --worktrees:\n%s", b)
	}
	out = binOK(t, ws, "hooks", "uninstall", "claude")
	if !strings.Contains(out, "removed "+settings) {
		t.Errorf("uninstall:\n%s", out)
	}
	var names []string
	entries, _ := os.ReadDir(ws)
	for _, e := range entries {
		if e.Name() != ".zero" {
			names = append(names, e.Name())
		}
	}
	if !slices.Equal(names, []string{"app.py"}) {
		t.Errorf("after uninstall the workspace holds %q", names)
	}
	if out := binOK(t, ws, "hooks", "uninstall", "claude"); !strings.Contains(out, "nothing to change") {
		t.Errorf("a second uninstall:\n%s", out)
	}
	check := binOK(t, ws, "hooks", "check")
	if !strings.Contains(check, "claude    not installed") || strings.Contains(check, "is gone") || strings.Contains(check, "no longer holds") {
		t.Errorf("hooks check after uninstall:\n%s", check)
	}
	var log []history.Entry
	if err := json.Unmarshal([]byte(binOK(t, ws, "log", "--json")), &log); err != nil {
		t.Fatal(err)
	}
	var labels []string
	for _, e := range log {
		labels = append(labels, e.Label)
	}
	if !slices.Equal(labels, []string{"hooks uninstall claude", "hooks uninstall claude", "hooks install claude"}) {
		t.Errorf("log: %q", labels)
	}
}
