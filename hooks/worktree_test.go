package hooks

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestParseWorktreeRealPayloads reads the WorktreeCreate and
// WorktreeRemove payloads Claude Code 2.1.328 sent (testdata/payloads,
// SOURCES.md): EnterWorktree's named one, a subagent's with Claude Code's
// own name, and ExitWorktree's removal, whose cwd is the worktree itself.
func TestParseWorktreeRealPayloads(t *testing.T) {
	cases := []struct {
		file string
		want WorktreeRequest
	}{
		{"claude-WorktreeCreate.json", WorktreeRequest{Name: "greet", Cwd: "/work/app", Session: "f215d595-0938-41e6-91cd-00eed0bafe31"}},
		{"claude-WorktreeCreate-subagent.json", WorktreeRequest{Name: "agent-a51dc467bf860b5bc", Cwd: "/work/app", Session: "680b6a24-9219-424c-839c-f73220e0f01d"}},
		{"claude-WorktreeRemove.json", WorktreeRequest{Remove: true, Path: "/work/app-worktrees/greet", Cwd: "/work/app-worktrees/greet", Session: "f215d595-0938-41e6-91cd-00eed0bafe31"}},
	}
	for _, tc := range cases {
		t.Run(tc.file, func(t *testing.T) {
			raw, err := os.ReadFile(filepath.Join("testdata", "payloads", tc.file))
			if err != nil {
				t.Fatal(err)
			}
			got, err := ParseWorktree(raw)
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
			// The step hook records nothing for them.
			c, err := Parse(raw, "claude")
			if err != nil || c.Kind != KindOther {
				t.Errorf("Parse: kind %v, %v; want KindOther", c.Kind, err)
			}
		})
	}
}

// TestParseWorktreeRefuses: a payload is untrusted; a name or path that
// could reach outside where it belongs is refused, never cleaned up.
func TestParseWorktreeRefuses(t *testing.T) {
	for _, raw := range []string{
		`{"hook_event_name":"WorktreeCreate","cwd":"/w","name":""}`,
		`{"hook_event_name":"WorktreeCreate","cwd":"/w","name":".."}`,
		`{"hook_event_name":"WorktreeCreate","cwd":"/w","name":"a/../b"}`,
		`{"hook_event_name":"WorktreeCreate","cwd":"/w","name":"/abs"}`,
		`{"hook_event_name":"WorktreeCreate","cwd":"/w","name":"a b"}`,
		`{"hook_event_name":"WorktreeCreate","cwd":"/w","name":"a\nb"}`,
		`{"hook_event_name":"WorktreeCreate","cwd":"/w","name":"` + strings.Repeat("a", 65) + `"}`,
		`{"hook_event_name":"WorktreeCreate","cwd":"rel","name":"x"}`,
		`{"hook_event_name":"WorktreeCreate","cwd":"/w/../etc","name":"x"}`,
		`{"hook_event_name":"WorktreeRemove","worktree_path":"rel/x"}`,
		`{"hook_event_name":"WorktreeRemove","worktree_path":"/a/../b"}`,
		`{"hook_event_name":"WorktreeRemove","worktree_path":"/a/b\n"}`,
		`{"hook_event_name":"WorktreeRemove"}`,
		`{"hook_event_name":"PreToolUse","tool_name":"Bash"}`,
		`[1]`,
	} {
		if r, err := ParseWorktree([]byte(raw)); err == nil {
			t.Errorf("%s: accepted as %+v", raw, r)
		}
	}
	r, err := ParseWorktree([]byte(`{"hook_event_name":"WorktreeCreate","cwd":"/w","name":"feature/auth.v2_x-y"}`))
	if err != nil || r.Name != "feature/auth.v2_x-y" {
		t.Errorf("a name Claude Code allows: %+v, %v", r, err)
	}
}

// TestWorktreeDirs: a branch goes beside the workspace, else in the
// user's state directory, one directory per name.
func TestWorktreeDirs(t *testing.T) {
	t.Setenv("XDG_STATE_HOME", "")
	got := WorktreeDirs("/work/app", "feature/auth", "/home/ada")
	if len(got) != 2 || got[0] != "/work/app-branches/feature-auth" ||
		!strings.HasPrefix(got[1], "/home/ada/.local/state/zerofs/branches/app-") || filepath.Base(got[1]) != "feature-auth" {
		t.Errorf("got %q", got)
	}
	if other := WorktreeDirs("/elsewhere/app", "x", "/home/ada"); filepath.Dir(other[1]) == filepath.Dir(got[1]) {
		t.Errorf("two workspaces named app share %s", filepath.Dir(got[1]))
	}
	t.Setenv("XDG_STATE_HOME", "/state")
	if got := WorktreeDirs("/work/app", "x", "/home/ada"); !strings.HasPrefix(got[1], "/state/zerofs/branches/app-") {
		t.Errorf("XDG_STATE_HOME: got %q", got)
	}
}

// TestInstallWorktrees: `--worktrees` adds Claude Code's WorktreeCreate
// and WorktreeRemove hooks running `zerofs branch --hook`, once each and
// without a matcher; a second install changes nothing; an install without
// --worktrees keeps them (pointed at the new zerofs); an uninstall of the
// worktrees takes out exactly them, and a full uninstall leaves the file
// byte for byte as the person had it.
func TestInstallWorktrees(t *testing.T) {
	a, _ := Lookup("claude")
	project := t.TempDir()
	path := filepath.Join(project, ".claude", "settings.json")
	own := "{\n  \"model\": \"best\",\n  \"hooks\": {\n    \"WorktreeCreate\": [\n      {\n        \"hooks\": [\n          {\n            \"type\": \"command\",\n            \"command\": \"./setup-env.sh\"\n          }\n        ]\n      }\n    ]\n  }\n}\n"
	os.MkdirAll(filepath.Dir(path), 0o755)
	if err := os.WriteFile(path, []byte(own), 0o644); err != nil {
		t.Fatal(err)
	}
	opts := InstallOptions{Scope: ScopeProject, Project: project, Home: t.TempDir(), Zerofs: "/opt/zerofs", Worktrees: true}
	apply := func(cs ...FileChange) {
		t.Helper()
		for _, c := range cs {
			if err := Apply(c); err != nil {
				t.Fatal(err)
			}
		}
	}
	c, err := Plan(a, opts)
	if err != nil {
		t.Fatal(err)
	}
	apply(c)
	commands := func() map[string][]string {
		t.Helper()
		b, _ := os.ReadFile(path)
		var cfg struct {
			Hooks map[string][]struct {
				Matcher *string `json:"matcher"`
				Hooks   []struct{ Command string }
			}
		}
		if err := json.Unmarshal(b, &cfg); err != nil {
			t.Fatal(err)
		}
		out := map[string][]string{}
		for ev, es := range cfg.Hooks {
			for _, e := range es {
				if e.Matcher != nil && strings.HasPrefix(ev, "Worktree") {
					t.Errorf("%s has a matcher", ev)
				}
				for _, h := range e.Hooks {
					out[ev] = append(out[ev], h.Command)
				}
			}
		}
		return out
	}
	got := commands()
	if w := got["WorktreeCreate"]; len(w) != 2 || w[0] != "./setup-env.sh" || w[1] != "/opt/zerofs branch --hook --agent claude" {
		t.Errorf("WorktreeCreate: %q", w)
	}
	if w := got["WorktreeRemove"]; len(w) != 1 || w[0] != "/opt/zerofs branch --hook --agent claude" {
		t.Errorf("WorktreeRemove: %q", w)
	}
	if w := got["PreToolUse"]; len(w) != 1 || w[0] != "/opt/zerofs step --hook --agent claude" {
		t.Errorf("PreToolUse: %q", w)
	}
	if ok, err := WorktreesInstalled(a, path); !ok || err != nil {
		t.Errorf("WorktreesInstalled: %v %v", ok, err)
	}
	if c, _ := Plan(a, opts); c.Changed() {
		t.Errorf("the second install changes the file:\n%s", c.After)
	}
	// Without --worktrees: kept, pointed at this zerofs.
	plain := opts
	plain.Worktrees, plain.Zerofs = false, "/new/zerofs"
	c, _ = Plan(a, plain)
	apply(c)
	if w := commands()["WorktreeRemove"]; len(w) != 1 || w[0] != "/new/zerofs branch --hook --agent claude" {
		t.Errorf("an install without --worktrees: WorktreeRemove %q", w)
	}
	// Uninstall the worktrees only.
	wt := plain
	wt.Worktrees = true
	cs, err := PlanUninstall(a, wt)
	if err != nil {
		t.Fatal(err)
	}
	apply(cs...)
	got = commands()
	if w := got["WorktreeCreate"]; len(w) != 1 || w[0] != "./setup-env.sh" {
		t.Errorf("after uninstalling the worktrees, WorktreeCreate: %q", w)
	}
	if _, ok := got["WorktreeRemove"]; ok {
		t.Errorf("after uninstalling the worktrees, WorktreeRemove is still there")
	}
	if len(got["PreToolUse"]) != 1 {
		t.Errorf("uninstalling the worktrees took the step hooks too: %q", got)
	}
	if ok, _ := WorktreesInstalled(a, path); ok {
		t.Error("WorktreesInstalled after uninstalling them")
	}
	cs, err = PlanUninstall(a, plain)
	if err != nil {
		t.Fatal(err)
	}
	apply(cs...)
	if b, _ := os.ReadFile(path); string(b) != own {
		t.Errorf("after uninstall the file is\n%s\nwant\n%s", b, own)
	}
	if cs, _ := PlanUninstall(a, plain); len(cs) != 1 || cs[0].Changed() {
		t.Errorf("a second uninstall changes %+v", cs)
	}
}

// TestUninstallEveryAgent installs each agent's hooks (with the worktree
// hooks where the agent has them) and uninstalls them, in both scopes:
// into nothing, the file goes (and OpenCode's user plugin); into a file of
// the person's own, the file holds their JSON again and nothing of
// zerofs's.
func TestUninstallEveryAgent(t *testing.T) {
	for _, a := range Agents {
		for _, scope := range []Scope{ScopeUser, ScopeProject} {
			for _, fresh := range []bool{true, false} {
				name := a.Name + "/" + string(scope) + "/own"
				if fresh {
					name = a.Name + "/" + string(scope) + "/fresh"
				}
				t.Run(name, func(t *testing.T) {
					t.Setenv("XDG_CONFIG_HOME", "")
					t.Setenv("XDG_DATA_HOME", "")
					opts := InstallOptions{Scope: scope, Home: t.TempDir(), Project: t.TempDir(), Zerofs: "/opt/zerofs", Worktrees: true}
					path := a.Path(opts)
					var own []byte
					if !fresh {
						if a.kind == kindPlugin && scope == ScopeUser {
							t.Skip("the user plugin file is zerofs's whole")
						}
						own = []byte(ownConfig(a))
						if a.kind == kindPlugin {
							own = []byte(`{"model": "mock/m", "plugin": ["./mine.js"]}`)
						}
						os.MkdirAll(filepath.Dir(path), 0o755)
						if err := os.WriteFile(path, own, 0o644); err != nil {
							t.Fatal(err)
						}
					}
					cs, err := PlanAll(a, opts)
					if err != nil {
						t.Fatal(err)
					}
					for _, c := range cs {
						if err := Apply(c); err != nil {
							t.Fatal(err)
						}
					}
					un, err := PlanUninstall(a, InstallOptions{Scope: scope, Home: opts.Home, Project: opts.Project})
					if err != nil {
						t.Fatal(err)
					}
					if len(un) == 0 || !un[0].Changed() {
						t.Fatalf("the uninstall changes nothing: %+v", un)
					}
					for _, c := range un {
						if err := Apply(c); err != nil {
							t.Fatal(err)
						}
					}
					b, err := os.ReadFile(path)
					if fresh {
						if err == nil {
							t.Fatalf("%s is left behind:\n%s", path, b)
						}
						return
					}
					if err != nil {
						t.Fatal(err)
					}
					if !bytes.Equal(normalize(b), normalize(own)) {
						t.Errorf("after uninstall\n%s\nwant the person's\n%s", b, own)
					}
					if bytes.Contains(b, []byte("zerofs")) {
						t.Errorf("zerofs is still named:\n%s", b)
					}
				})
			}
		}
	}
}
