package hooks

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
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
				t.Setenv("XDG_DATA_HOME", "")
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
				all1, err := PlanAll(a, opts)
				if err != nil {
					t.Fatal(err)
				}
				c1, err := Plan(a, opts)
				if err != nil {
					t.Fatal(err)
				}
				if !c1.Changed() {
					t.Fatal("the first install changes nothing")
				}
				for _, c := range all1 {
					if err := Apply(c); err != nil {
						t.Fatal(err)
					}
				}
				all2, err := PlanAll(a, opts)
				if err != nil {
					t.Fatal(err)
				}
				for _, c2 := range all2 {
					if c2.Changed() {
						t.Fatalf("the second install changes %s:\n%s\n---\n%s", c2.Path, c2.Before, c2.After)
					}
					if err := Apply(c2); err != nil {
						t.Fatal(err)
					}
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
				if a.kind == kindPlugin && scope == ScopeProject {
					plugin, err := os.ReadFile(opencodeProjectPlugin(opts))
					if err != nil {
						t.Fatal(err)
					}
					checkPlugin(t, plugin)
					return
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
	for _, ev := range append(append(append([]string{}, a.ToolEvents...), a.PromptEvents...), a.ResultEvents...) {
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
	for _, want := range []string{`"tool.execute.before"`, `"tool.execute.after"`, `"chat.message"`, `["/opt/zero fs/zerofs", "step", "--hook", "--agent", "opencode"]`} {
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
	if bytes.Contains(b, []byte("/old/zerofs")) || bytes.Count(b, []byte("/new/zerofs")) != 2+len(a.ResultEvents) || !bytes.Contains(b, []byte("--no-prompt")) {
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

// TestOpenCodeRefusesBadConfig: a project opencode.json zerofs cannot
// rewrite (JSON with comments, which OpenCode reads, or no object) is left
// alone, nothing else is written, and the error says what to add by hand.
func TestOpenCodeRefusesBadConfig(t *testing.T) {
	a, _ := Lookup("opencode")
	home, project := t.TempDir(), t.TempDir()
	t.Setenv("XDG_DATA_HOME", "")
	opts := InstallOptions{Scope: ScopeProject, Home: home, Project: project, Zerofs: "zerofs"}
	path := a.Path(opts)
	for _, bad := range []string{"{\n  // mine\n  \"model\": \"m\"\n}", `{"plugin": "one"}`, "[1]"} {
		os.WriteFile(path, []byte(bad), 0o644)
		_, err := PlanAll(a, opts)
		if err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "file://"+home) {
			t.Errorf("%q: got %v, want an error naming %s and the plugin to add", bad, err, path)
		}
		if got, _ := os.ReadFile(path); string(got) != bad {
			t.Errorf("%q: the file became %q", bad, got)
		}
	}
	if n, _ := os.ReadDir(home); len(n) != 0 {
		t.Errorf("a refused install wrote into the home: %v", n)
	}
}

// TestOpenCodePluginSends runs the installed OpenCode plugin in node (where
// node is installed) with the arguments OpenCode 1.18.33 passes its hooks
// (@opencode-ai/plugin's Hooks type) and a zerofs that keeps its stdin:
// what the plugin sends is byte for byte the payload captured from the
// same plugin inside OpenCode itself (testdata/payloads), and Parse reads
// it as that tool call or prompt.
func TestOpenCodePluginSends(t *testing.T) {
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("node is not installed")
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	dir := t.TempDir()
	ws := filepath.Join(dir, "app")
	must(os.Mkdir(ws, 0o755))
	out := filepath.Join(dir, "sent")
	// The capture runs' stand-in for zerofs keeps each payload a line.
	fake, err := filepath.Abs(filepath.Join("testdata", "capture", "keep-stdin.sh"))
	must(err)
	a, ok := Lookup("opencode")
	if !ok {
		t.Fatal("no agent opencode")
	}
	plugin := filepath.Join(dir, "zerofs.mjs")
	must(os.WriteFile(plugin, []byte(opencodePlugin(a, InstallOptions{Zerofs: fake})), 0o644))
	driver := filepath.Join(dir, "driver.mjs")
	must(os.WriteFile(driver, []byte(`
import { ZerofsPlugin } from "./zerofs.mjs"
const ws = process.argv[2]
// What OpenCode's own process.argv was for `+"`opencode run \"Say hello instead of hi\"`"+`.
process.argv = [process.argv[0], "/$bunfs/root/src/index.js", "run", "Say hello instead of hi"]
const hooks = await ZerofsPlugin({ directory: ws, worktree: ws })
const sessionID = "ses_dbb1d410fffe9uZ9WoTUC3izEx"
await hooks["chat.message"](
  { sessionID, agent: "build", model: { providerID: "mock", modelID: "m" }, messageID: "msg_1" },
  { message: { id: "msg_1", sessionID, role: "user" }, parts: [
    { id: "prt_1", sessionID, messageID: "msg_1", type: "text", text: "\"Say hello instead of hi\"" },
    { id: "prt_2", sessionID, messageID: "msg_1", type: "text", text: "<system-reminder>", synthetic: true },
    { id: "prt_3", sessionID, messageID: "msg_1", type: "file", mime: "text/plain", url: "file:///x" },
  ] })
await hooks["tool.execute.before"](
  { tool: "bash", sessionID, callID: "call_38cf3fb1cb24" },
  { args: { command: "go test ./...", description: "Runs the tests" } })
await hooks["tool.execute.before"](
  { tool: "edit", sessionID, callID: "call_9d0cf4c0e8a7" },
  { args: { filePath: ws + "/app.py", oldString: "hi", newString: "hello" } })
`), 0o644))
	cmd := exec.Command(node, driver, ws)
	cmd.Env = append(os.Environ(), "ZEROFS_CAPTURE="+out)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("node: %v\n%s", err, b)
	}
	sent, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(sent)), "\n")
	fixtures := []string{"opencode-chat.message.json", "opencode-tool.execute.before-bash.json", "opencode-tool.execute.before-edit.json"}
	if len(lines) != len(fixtures) {
		t.Fatalf("the plugin sent %d payloads, want %d:\n%s", len(lines), len(fixtures), sent)
	}
	for i, f := range fixtures {
		want, err := os.ReadFile(filepath.Join("testdata", "payloads", f))
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.ReplaceAll(lines[i], ws, "/work/app"); got != strings.TrimSpace(string(want)) {
			t.Errorf("%s: the plugin sent\n%s\nwant\n%s", f, got, want)
		}
		if c, err := Parse([]byte(lines[i]), "opencode"); err != nil || c.Session != "ses_dbb1d410fffe9uZ9WoTUC3izEx" || c.Cwd != ws {
			t.Errorf("%s: Parse: %+v, %v", f, c, err)
		}
	}
}

// TestOpenCodeProjectInstall: a project install for OpenCode writes one
// file into the project, its opencode.json, naming a plugin file kept
// outside it (so OpenCode, which installs its packages into every
// .opencode directory, finds none there); it keeps what opencode.json
// held, replaces the plugin an earlier install named, and removes an
// earlier install's .opencode/plugins/zerofs.js (never a file of the
// person's own). Without its plugin file the install is not installed.
func TestOpenCodeProjectInstall(t *testing.T) {
	home, project := t.TempDir(), t.TempDir()
	t.Setenv("XDG_DATA_HOME", "")
	a, _ := Lookup("opencode")
	opts := InstallOptions{Scope: ScopeProject, Home: home, Project: project, Zerofs: "/usr/bin/zerofs"}
	write := func(rel, content string) {
		t.Helper()
		p := filepath.Join(project, rel)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("opencode.json", `{"model": "mock/m", "plugin": ["opencode-wakatime", "file:///old/home/.local/share/zerofs/opencode/zerofs.js"]}`)
	old := opencodePlugin(a, InstallOptions{Zerofs: "/old/zerofs"})
	write(opencodeLegacyFile, old)
	write(".opencode/plugins/mine.js", "export const Mine = async () => ({})\n")
	all, err := PlanAll(a, opts)
	if err != nil {
		t.Fatal(err)
	}
	var inProject []string
	for _, c := range all {
		if strings.HasPrefix(c.Path, project+"/") && !c.Remove {
			inProject = append(inProject, c.Path)
		}
		if err := Apply(c); err != nil {
			t.Fatal(err)
		}
	}
	if want := []string{filepath.Join(project, "opencode.json")}; !slices.Equal(inProject, want) {
		t.Errorf("the install writes %q into the project, want %q", inProject, want)
	}
	cfg, _ := os.ReadFile(filepath.Join(project, "opencode.json"))
	var got struct {
		Model  string   `json:"model"`
		Plugin []string `json:"plugin"`
	}
	if err := json.Unmarshal(cfg, &got); err != nil {
		t.Fatal(err)
	}
	plugin := filepath.Join(home, ".local/share/zerofs/opencode/zerofs.js")
	if want := []string{"opencode-wakatime", "file://" + plugin}; got.Model != "mock/m" || !slices.Equal(got.Plugin, want) {
		t.Errorf("opencode.json: %s, want the model kept and plugins %q", cfg, want)
	}
	if _, err := os.Stat(filepath.Join(project, opencodeLegacyFile)); !os.IsNotExist(err) {
		t.Errorf("the earlier install's plugin is still there: %v", err)
	}
	if _, err := os.Stat(filepath.Join(project, ".opencode/plugins/mine.js")); err != nil {
		t.Errorf("the person's own plugin: %v", err)
	}
	if ok, err := Installed(a, a.Path(opts)); !ok || err != nil {
		t.Fatalf("Installed: %v, %v", ok, err)
	}
	again, err := PlanAll(a, opts)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range again {
		if c.Changed() {
			t.Errorf("the second install changes %s", c.Path)
		}
	}
	if err := os.Remove(plugin); err != nil {
		t.Fatal(err)
	}
	if ok, _ := Installed(a, a.Path(opts)); ok {
		t.Error("installed, with the plugin file gone")
	}
	if m := MissingPlugins(a, opts); len(m) != 1 || m[0] != plugin {
		t.Errorf("MissingPlugins: %q, want %q", m, plugin)
	}
	// With --no-prompt, a plugin file of its own: projects installed
	// without it keep theirs.
	opts.NoPrompt = true
	c, err := Plan(a, opts)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(c.After, []byte("zerofs-no-prompt.js")) {
		t.Errorf("--no-prompt names %s", c.After)
	}
}
