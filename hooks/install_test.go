package hooks

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestInstallEveryAgentTwice installs each agent's hooks into a temporary
// home and project, twice, in both scopes: the first install writes the
// agent's configuration with zerofs's hook for each of its events, keeps
// what the file held, and the second changes nothing.
func TestInstallEveryAgentTwice(t *testing.T) {
	for _, a := range Agents {
		for _, scope := range []Scope{ScopeUser, ScopeProject} {
			t.Run(a.Name+"/"+string(scope), func(t *testing.T) {
				home, project := t.TempDir(), t.TempDir()
				t.Setenv("XDG_CONFIG_HOME", "")
				opts := InstallOptions{Scope: scope, Home: home, Project: project, Zerofs: "/opt/zero fs/zerofs"}
				path := a.Path(opts)
				root := home
				if scope == ScopeProject {
					root = project
				}
				if !strings.HasPrefix(path, root+"/") {
					t.Fatalf("config path %s is not under %s", path, root)
				}
				// Something of the person's own is already there.
				var own []byte
				if a.kind != kindPlugin {
					own = []byte(ownConfig(a))
					os.MkdirAll(filepath.Dir(path), 0o755)
					if err := os.WriteFile(path, own, 0o600); err != nil {
						t.Fatal(err)
					}
				}
				c1, err := Plan(a, opts)
				if err != nil {
					t.Fatal(err)
				}
				if !c1.Changed() {
					t.Fatal("the first install changes nothing")
				}
				if err := Apply(c1); err != nil {
					t.Fatal(err)
				}
				c2, err := Plan(a, opts)
				if err != nil {
					t.Fatal(err)
				}
				if c2.Changed() {
					t.Fatalf("the second install changes the file:\n%s\n---\n%s", c2.Before, c2.After)
				}
				if err := Apply(c2); err != nil {
					t.Fatal(err)
				}
				got, err := os.ReadFile(path)
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(got, c1.After) {
					t.Fatal("the file is not what the first install planned")
				}
				if ok, err := Installed(a, path); !ok || err != nil {
					t.Fatalf("Installed: %v, %v", ok, err)
				}
				if a.kind == kindPlugin {
					checkPlugin(t, got)
					return
				}
				checkConfig(t, a, got, opts)
				if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o600 {
					t.Errorf("the install changed the file's mode to %v", fi.Mode().Perm())
				}
			})
		}
	}
}

// ownConfig is a configuration holding a setting and a hook of the
// person's own for one of the agent's events.
func ownConfig(a Agent) string {
	ev := a.ToolEvents[0]
	if a.kind == kindFlat {
		return `{"version": 1, "theme": "dark", "hooks": {"` + ev + `": [{"command": "./audit.sh"}]}}`
	}
	return `{"model": "best", "hooks": {"` + ev + `": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "./audit.sh"}]}]}}`
}

// checkConfig checks a merged JSON configuration: the person's setting and
// hook kept first, zerofs's command once for each event.
func checkConfig(t *testing.T, a Agent, b []byte, opts InstallOptions) {
	t.Helper()
	var cfg map[string]json.RawMessage
	if err := json.Unmarshal(b, &cfg); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, b)
	}
	if _, ok := cfg["model"]; !ok && a.kind == kindNested {
		t.Error("the person's \"model\" setting is gone")
	}
	var hooks map[string][]map[string]any
	if err := json.Unmarshal(cfg["hooks"], &hooks); err != nil {
		t.Fatal(err)
	}
	for _, ev := range append(append([]string{}, a.ToolEvents...), a.PromptEvents...) {
		var cmds []string
		for _, e := range hooks[ev] {
			if c, ok := e["command"].(string); ok {
				cmds = append(cmds, c)
			}
			if hs, ok := e["hooks"].([]any); ok {
				for _, h := range hs {
					cmds = append(cmds, h.(map[string]any)["command"].(string))
				}
			}
		}
		want := "'/opt/zero fs/zerofs' step --hook --agent " + a.Name
		n := 0
		for _, c := range cmds {
			if c == want {
				n++
			}
		}
		if n != 1 {
			t.Errorf("%s: commands %q, want %q once", ev, cmds, want)
		}
		if ev == a.ToolEvents[0] && (len(cmds) == 0 || cmds[0] != "./audit.sh") {
			t.Errorf("%s: the person's own hook is not kept first: %q", ev, cmds)
		}
	}
}

// checkPlugin checks the OpenCode plugin: it runs zerofs for both events
// and, where node is installed, parses as JavaScript.
func checkPlugin(t *testing.T, b []byte) {
	t.Helper()
	for _, want := range []string{`"tool.execute.before"`, `"chat.message"`, `["/opt/zero fs/zerofs", "step", "--hook", "--agent", "opencode"]`} {
		if !bytes.Contains(b, []byte(want)) {
			t.Errorf("the plugin lacks %s", want)
		}
	}
	node, err := exec.LookPath("node")
	if err != nil {
		t.Log("node is not installed: the plugin's syntax is not checked")
		return
	}
	f := filepath.Join(t.TempDir(), "zerofs.mjs")
	os.WriteFile(f, b, 0o644)
	if out, err := exec.Command(node, "--check", f).CombinedOutput(); err != nil {
		t.Errorf("node --check: %v\n%s", err, out)
	}
}

// TestInstallReplacesOldCommand: an install with another zerofs path or
// flags replaces zerofs's entry in place instead of adding a second.
func TestInstallReplacesOldCommand(t *testing.T) {
	a, _ := Lookup("claude")
	home := t.TempDir()
	opts := InstallOptions{Scope: ScopeUser, Home: home, Zerofs: "/old/zerofs"}
	c, _ := Plan(a, opts)
	if err := Apply(c); err != nil {
		t.Fatal(err)
	}
	opts.Zerofs, opts.NoPrompt = "/new/zerofs", true
	c, err := Plan(a, opts)
	if err != nil || !c.Changed() {
		t.Fatalf("a new path changes nothing: %v", err)
	}
	Apply(c)
	b, _ := os.ReadFile(c.Path)
	if bytes.Contains(b, []byte("/old/zerofs")) || bytes.Count(b, []byte("/new/zerofs")) != 2 || !bytes.Contains(b, []byte("--no-prompt")) {
		t.Fatalf("got\n%s", b)
	}
}

// TestInstallRefusesBadConfig: a configuration that is not a JSON object
// is left alone, with an error naming it.
func TestInstallRefusesBadConfig(t *testing.T) {
	a, _ := Lookup("gemini")
	home := t.TempDir()
	opts := InstallOptions{Scope: ScopeUser, Home: home, Zerofs: "zerofs"}
	path := a.Path(opts)
	os.MkdirAll(filepath.Dir(path), 0o755)
	for _, bad := range []string{"[1]", "{\"hooks\": 3}", "{\"a\": 1} {}", "not json"} {
		os.WriteFile(path, []byte(bad), 0o644)
		if _, err := Plan(a, opts); err == nil || !strings.Contains(err.Error(), path) {
			t.Errorf("%q: got %v, want an error naming %s", bad, err, path)
		}
	}
}
