package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/zerofs/zerofs/history"
)

// TestHooksInstallIsAStepMounted: `hooks install` in a mounted workspace
// is a step of its own, labelled as what it is (not an implicit change);
// a rewind or undo that would remove the hook file says so in its dry run
// and when it does it, and `hooks check` notices a hook file that is gone
// or no longer what the install wrote.
func TestHooksInstallIsAStepMounted(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	t.Setenv("XDG_CONFIG_HOME", "")
	ws := appWS(t)
	mountT(t, ws)
	binOK(t, ws, "hooks", "install", "claude")
	var log []history.Entry
	if err := json.Unmarshal([]byte(binOK(t, ws, "log", "--json")), &log); err != nil {
		t.Fatal(err)
	}
	if len(log) != 1 || log[0].Label != "hooks install claude" || log[0].Implicit ||
		len(log[0].Changes) != 2 || log[0].Changes[1].Path != ".claude/settings.json" {
		t.Fatalf("the install is recorded as %+v, want one step \"hooks install claude\" adding .claude/settings.json", log)
	}
	warning := `this would delete .claude/settings.json, which holds zerofs's hooks for Claude Code`
	for _, args := range [][]string{{"rewind", "--dry-run", "0"}, {"undo", "--dry-run"}} {
		r := bin(t, ws, "", args...)
		if r.code != 0 || !strings.Contains(r.stderr, warning) {
			t.Errorf("zerofs %s: exit %d, stderr %q; want the warning %q", strings.Join(args, " "), r.code, r.stderr, warning)
		}
	}
	if _, err := os.Stat(filepath.Join(ws, ".claude", "settings.json")); err != nil {
		t.Fatalf("a dry run removed the hooks: %v", err)
	}
	r := bin(t, ws, "", "undo")
	if want := "removed .claude/settings.json, which held zerofs's hooks for Claude Code"; r.code != 0 || !strings.Contains(r.stderr, want) {
		t.Errorf("undo: exit %d, stderr %q; want %q", r.code, r.stderr, want)
	}
	if check := binOK(t, ws, "hooks", "check"); !strings.Contains(check, ".claude/settings.json, which `hooks install claude` wrote at step 1, is gone") {
		t.Errorf("hooks check after the undo:\n%s", check)
	}
	binOK(t, ws, "redo")
	if check := binOK(t, ws, "hooks", "check"); strings.Contains(check, "settings.json") && !strings.Contains(check, "installed: project") {
		t.Errorf("hooks check after the redo:\n%s", check)
	} else if strings.Contains(check, "is gone") || strings.Contains(check, "changed since") {
		t.Errorf("hooks check after the redo still warns:\n%s", check)
	}
	// An edit that keeps the hooks is a change; one that drops them is
	// said so.
	p := filepath.Join(ws, ".claude", "settings.json")
	b, _ := os.ReadFile(p)
	writeFile(t, p, strings.Replace(string(b), "{", `{"model": "best",`, 1))
	if check := binOK(t, ws, "hooks", "check"); !strings.Contains(check, ".claude/settings.json changed since `hooks install claude` wrote it at step 1") {
		t.Errorf("hooks check after an edit:\n%s", check)
	}
	writeFile(t, p, `{"model": "best"}`)
	if check := binOK(t, ws, "hooks", "check"); !strings.Contains(check, ".claude/settings.json no longer holds zerofs's hooks") {
		t.Errorf("hooks check after the hooks were edited out:\n%s", check)
	}
	// A rewind that puts the file back as the install wrote it says that
	// it changed it, and the hooks are still installed.
	r = bin(t, ws, "", "undo")
	if r.code != 0 || strings.Contains(r.stderr, "warning: removed") {
		t.Errorf("undo of the edit: exit %d, stderr %q", r.code, r.stderr)
	}
}

// TestHooksInstallSaysWhatIsMissing: installing Codex's or Gemini CLI's
// project hooks says what the agent still needs before they record
// anything (Codex: the project's trust, the hooks' review, a writable
// sandbox for exec; Gemini CLI: the folder's trust, and that --skip-trust
// loads no project hooks), and `hooks check` says it until it is done.
func TestHooksInstallSaysWhatIsMissing(t *testing.T) {
	home, project := t.TempDir(), t.TempDir()
	t.Setenv("HOME", home)
	for _, v := range []string{"XDG_CONFIG_HOME", "CODEX_HOME", "GEMINI_CLI_HOME", "GEMINI_CLI_TRUSTED_FOLDERS_PATH"} {
		t.Setenv(v, "")
	}
	out := mustRun(t, project, "hooks", "install", "codex")
	for _, want := range []string{"Codex records nothing yet:", "codex exec --trust", "/hooks", "--sandbox workspace-write"} {
		if !strings.Contains(out, want) {
			t.Errorf("hooks install codex does not say %q:\n%s", want, out)
		}
	}
	out = mustRun(t, project, "hooks", "install", "gemini")
	for _, want := range []string{"Gemini CLI records nothing yet:", "not trusted yet", "--skip-trust", "--user"} {
		if !strings.Contains(out, want) {
			t.Errorf("hooks install gemini does not say %q:\n%s", want, out)
		}
	}
	if check := mustRun(t, project, "hooks", "check"); strings.Count(check, "needs (project):") != 3 {
		t.Errorf("hooks check, nothing trusted:\n%s", check)
	}
	writeFile(t, filepath.Join(home, ".gemini", "trustedFolders.json"), `{"`+project+`": "TRUST_FOLDER"}`)
	writeFile(t, filepath.Join(home, ".codex", "config.toml"), "[projects.\""+project+"\"]\ntrust_level = \"trusted\"\n")
	check := mustRun(t, project, "hooks", "check")
	if strings.Count(check, "needs (project):") != 1 || !strings.Contains(check, "need review") {
		t.Errorf("hooks check, both trusted, Codex's hooks not reviewed:\n%s", check)
	}
}

// TestMCPUndoWarnsOfHookFiles: an agent's own zerofs_undo that would take
// back `hooks install` (and so its own recording) says so in the result's
// warnings, in the dry run and when it does it.
func TestMCPUndoWarnsOfHookFiles(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	t.Setenv("XDG_CONFIG_HOME", "")
	ws := filepath.Join(t.TempDir(), "app")
	if err := os.Mkdir(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	mountT(t, ws)
	binOK(t, ws, "hooks", "install", "claude")
	c := newMCPClient(t, ws)
	for _, tc := range []struct {
		args any
		want string
	}{
		{map[string]any{"dry_run": true}, "this would delete .claude/settings.json, which holds zerofs's hooks for Claude Code"},
		{map[string]any{}, "removed .claude/settings.json, which held zerofs's hooks for Claude Code"},
	} {
		_, out := c.ok("zerofs_undo", tc.args)
		ws, _ := out["warnings"].([]any)
		found := false
		for _, w := range ws {
			if s, _ := w.(string); strings.Contains(s, tc.want) {
				found = true
			}
		}
		if !found {
			t.Errorf("zerofs_undo %v: warnings %v, want one saying %q", tc.args, ws, tc.want)
		}
	}
}
