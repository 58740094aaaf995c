package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/zerofs/zerofs/history"
	"github.com/zerofs/zerofs/internal/testsupport"
)

// agentBinary is a real agent CLI: from $ZEROFS_AGENTS_BIN (a directory,
// e.g. an npm prefix's node_modules/.bin), else from PATH. A test that
// needs one skips, saying so, when it is not installed.
func agentBinary(t *testing.T, name string) string {
	t.Helper()
	if dir := os.Getenv("ZEROFS_AGENTS_BIN"); dir != "" {
		p := filepath.Join(dir, name)
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	p, err := exec.LookPath(name)
	if err != nil {
		t.Skipf("%s is not installed (not in $ZEROFS_AGENTS_BIN nor on PATH): the real agent cannot be run", name)
	}
	return p
}

// fakeModel starts one of hooks/testdata/capture's fake model servers
// for workspace ws (with the script's further args) and returns its port.
// It is stopped when the test ends.
func fakeModel(t *testing.T, script, ws string, args ...string) int {
	t.Helper()
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 is not installed: the fake model server cannot run")
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	src, err := filepath.Abs(filepath.Join("..", "..", "hooks", "testdata", "capture", script))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(py, append([]string{src, fmt.Sprint(port), ws}, args...)...)
	log := filepath.Join(t.TempDir(), "model.log")
	f, err := os.Create(log)
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = f, f
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
		f.Close()
		if t.Failed() {
			b, _ := os.ReadFile(log)
			t.Logf("fake model's log:\n%s", b)
		}
	})
	if err := testsupport.Poll(10*time.Second, func() bool {
		c, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err == nil {
			c.Close()
		}
		return err == nil
	}); err != nil {
		t.Fatal("the fake model server did not start listening")
	}
	return port
}

// runAgent runs an agent's command in dir, with a deadline, and returns
// its output.
func runAgent(t *testing.T, dir string, env []string, argv ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), append([]string{"PWD=" + dir}, env...)...)
	cmd.Stdin = strings.NewReader("")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v\n%s", strings.Join(argv, " "), err, out)
	}
	return string(out)
}

// TestOpenCodeRealRunMounted runs the real OpenCode (`opencode run`)
// against a fake model on a mounted workspace after `zerofs hooks install
// opencode`: the plugin loads and records the prompt as typed (without the
// quotes `run` adds) and the edit as a step of the turn, the install is a
// step of its own, and the workspace holds only the files the person and
// the agent made plus the one zerofs wrote (opencode.json): nothing of
// what OpenCode installs into a .opencode directory.
func TestOpenCodeRealRunMounted(t *testing.T) {
	opencode := agentBinary(t, "opencode")
	built.NeedFUSE(t)
	home := t.TempDir()
	t.Setenv("HOME", home)
	for _, v := range []string{"XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_CACHE_HOME", "XDG_STATE_HOME"} {
		t.Setenv(v, "")
	}
	ws := filepath.Join(t.TempDir(), "app")
	if err := os.Mkdir(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(ws, "app.py"), "print(\"hi\")\n")
	port := fakeModel(t, "openai_chat.py", ws)
	// The person's OpenCode: a provider answering on the fake model.
	writeFile(t, filepath.Join(home, ".config", "opencode", "opencode.json"), fmt.Sprintf(`{
  "$schema": "https://opencode.ai/config.json",
  "provider": {"mock": {"npm": "@ai-sdk/openai-compatible", "name": "Mock",
    "options": {"baseURL": "http://127.0.0.1:%d/v1", "apiKey": "fake"}, "models": {"m": {"name": "m"}}}},
  "model": "mock/m",
  "permission": {"edit": "allow", "bash": "allow"},
  "autoupdate": false, "share": "disabled"
}
`, port))
	mountT(t, ws)
	out := binOK(t, ws, "hooks", "install", "opencode")
	if !strings.Contains(out, "created "+filepath.Join(ws, "opencode.json")) {
		t.Errorf("hooks install opencode:\n%s", out)
	}
	agentOut := runAgent(t, ws, []string{"OPENCODE_DISABLE_AUTOUPDATE=1"}, opencode, "run", "--print-logs", "Say hello instead of hi")
	defer func() {
		if t.Failed() {
			t.Logf("opencode run:\n%s", agentOut)
		}
	}()

	if got := readTrim(t, filepath.Join(ws, "app.py")); got != `print("hello")` {
		t.Errorf("app.py: %q: the agent's edit did not happen", got)
	}
	var names []string
	entries, err := os.ReadDir(ws)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.Name() != ".zero" {
			names = append(names, e.Name())
		}
	}
	if want := []string{"app.py", "opencode.json"}; !slices.Equal(names, want) {
		t.Errorf("the workspace holds %q, want %q", names, want)
	}

	var log []history.Entry
	if err := json.Unmarshal([]byte(binOK(t, ws, "log", "--json", "--all")), &log); err != nil {
		t.Fatal(err)
	}
	var turn, edit, install *history.Entry
	for i := range log {
		e := &log[i]
		switch {
		case e.Type == "turn":
			turn = e
		case e.Label == "edit app.py":
			edit = e
		case e.Label == "hooks install opencode":
			install = e
		}
	}
	switch {
	case turn == nil:
		t.Fatalf("no turn recorded: %+v", log)
	case turn.Prompt != "Say hello instead of hi" || turn.Agent != "opencode":
		t.Errorf("the turn: prompt %q, agent %q; want what the person typed, by opencode", turn.Prompt, turn.Agent)
	}
	if edit == nil || edit.Turn != turn.Sequence || len(edit.Changes) != 1 || edit.Changes[0].Path != "app.py" {
		t.Errorf("the edit's step: %+v, want app.py changed in turn %d", edit, turn.Sequence)
	}
	if install == nil || len(install.Changes) != 1 || install.Changes[0].Path != "opencode.json" || install.Changes[0].Change != "added" {
		t.Errorf("the install's step: %+v, want opencode.json added", install)
	}
	for _, e := range log {
		for _, c := range e.Changes {
			if strings.HasPrefix(c.Path, ".opencode") {
				t.Errorf("the history holds %s (%s)", c.Path, e.Label)
			}
		}
	}
}

// codexHookList asks the real Codex's app-server (JSON-RPC on stdio) for
// the hooks it finds in dir: each one's key, current hash and trust.
func codexHookList(t *testing.T, codex, dir string) []map[string]any {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, codex, "app-server")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "PWD="+dir)
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { in.Close(); cmd.Process.Kill(); cmd.Wait() }()
	list, _ := json.Marshal(map[string]any{"id": 2, "method": "hooks/list", "params": map[string]any{"cwds": []string{dir}}})
	fmt.Fprintf(in, "%s\n%s\n%s\n", `{"id":1,"method":"initialize","params":{"clientInfo":{"name":"zerofs-test","version":"0"}}}`, `{"method":"initialized"}`, list)
	dec := json.NewDecoder(out)
	for {
		var msg struct {
			ID     int `json:"id"`
			Result struct {
				Data []struct {
					Hooks []map[string]any `json:"hooks"`
				} `json:"data"`
			} `json:"result"`
		}
		if err := dec.Decode(&msg); err != nil {
			t.Fatalf("codex app-server: %v", err)
		}
		if msg.ID == 2 {
			if len(msg.Result.Data) != 1 {
				t.Fatalf("codex app-server hooks/list: %+v", msg)
			}
			return msg.Result.Data[0].Hooks
		}
	}
}

// TestCodexTrustRealMounted runs the real Codex (`codex exec`) against a
// fake model on a mounted workspace with zerofs's project-level hooks,
// through the trust Codex asks for, and checks at each stage that what
// `hooks install` and `hooks check` say is missing is what keeps Codex
// from running the hooks: untrusted, nothing recorded ("Untrusted
// project-local configuration is disabled"); trusted but not reviewed,
// nothing recorded; reviewed as Codex's /hooks records it (a trusted_hash
// per hook in config.toml, which Codex's own hooks/list then reports as
// trusted), the turn and its apply_patch step recorded, and nothing said
// to be missing but the sandbox note.
func TestCodexTrustRealMounted(t *testing.T) {
	codex := agentBinary(t, "codex")
	built.NeedFUSE(t)
	home := t.TempDir()
	t.Setenv("HOME", home)
	t.Setenv("CODEX_HOME", "")
	ws := filepath.Join(t.TempDir(), "app")
	if err := os.MkdirAll(filepath.Join(ws, "src"), 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(ws, "src", "a.go"), "package src\n\nfunc A() int {\n\treturn 1\n}\n")
	port := fakeModel(t, "openai_responses.py", ws)
	// Without the model catalog Codex's fallback metadata offers no
	// apply_patch tool.
	catalog := filepath.Join(home, "models.json")
	models, err := exec.Command(codex, "debug", "models").Output()
	if err != nil {
		t.Fatalf("codex debug models: %v", err)
	}
	writeFile(t, catalog, string(models))
	cfg := filepath.Join(home, ".codex", "config.toml")
	writeFile(t, cfg, fmt.Sprintf(`model = "gpt-5.5"
model_provider = "mock"
model_catalog_json = %q

[model_providers.mock]
name = "mock"
base_url = "http://127.0.0.1:%d/v1"
wire_api = "responses"
env_key = "MOCK_API_KEY"
`, catalog, port))
	mountT(t, ws)
	out := binOK(t, ws, "hooks", "install", "codex")
	for _, want := range []string{"until it trusts the project", "need review", "--sandbox workspace-write"} {
		if !strings.Contains(out, want) {
			t.Errorf("hooks install codex does not say %q:\n%s", want, out)
		}
	}
	run := func(extra ...string) string {
		writeFile(t, filepath.Join(ws, "src", "a.go"), "package src\n\nfunc A() int {\n\treturn 1\n}\n")
		os.Remove(filepath.Join(ws, "src", "b.go"))
		argv := append([]string{codex, "exec", "--skip-git-repo-check", "--sandbox", "workspace-write"}, extra...)
		return runAgent(t, ws, []string{"MOCK_API_KEY=fake"}, append(argv, "Make A return 2")...)
	}
	turns := func() int {
		var log []history.Entry
		if err := json.Unmarshal([]byte(binOK(t, ws, "log", "--json", "--all")), &log); err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, e := range log {
			if e.Type == "turn" && e.Agent == "codex" {
				n++
			}
		}
		return n
	}
	needs := func() []string {
		var n []string
		for l := range strings.Lines(binOK(t, ws, "hooks", "check")) {
			if strings.Contains(l, "needs (project)") {
				n = append(n, l)
			}
		}
		return n
	}

	if got := run(); !strings.Contains(got, "Untrusted project-local configuration is disabled") || turns() != 0 {
		t.Fatalf("untrusted: %d turns recorded; codex said:\n%s", turns(), got)
	}
	run("--trust") // trusts the project (config.toml), runs no unreviewed hook
	if n := needs(); turns() != 0 || len(n) != 1 || !strings.Contains(n[0], "need review") {
		t.Fatalf("trusted, not reviewed: %d turns; hooks check needs %q", turns(), n)
	}
	// Review them as /hooks does: each hook's current hash, trusted.
	var review strings.Builder
	for _, h := range codexHookList(t, codex, ws) {
		fmt.Fprintf(&review, "\n[hooks.state.%q]\ntrusted_hash = %q\n", h["key"], h["currentHash"])
	}
	f, err := os.OpenFile(cfg, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString(review.String())
	f.Close()
	for _, h := range codexHookList(t, codex, ws) {
		if h["trustStatus"] != "trusted" {
			t.Fatalf("Codex reads the review as %v for %v", h["trustStatus"], h["key"])
		}
	}
	if n := needs(); len(n) != 0 {
		t.Errorf("reviewed: hooks check still needs %q", n)
	}
	run()
	if got := readTrim(t, filepath.Join(ws, "src", "a.go")); !strings.Contains(got, "return 2") {
		t.Errorf("src/a.go: %q: the agent's patch did not happen", got)
	}
	var log []history.Entry
	json.Unmarshal([]byte(binOK(t, ws, "log", "--json")), &log)
	var turn, patch *history.Entry
	for i := range log {
		switch {
		case log[i].Type == "turn" && turn == nil:
			turn = &log[i]
		case log[i].Label == "apply_patch: src/a.go, src/b.go" && patch == nil:
			patch = &log[i]
		}
	}
	if turn == nil || turn.Prompt != "Make A return 2" || patch == nil || patch.Turn != turn.Sequence || len(patch.Changes) != 2 {
		t.Errorf("reviewed: turn %+v, patch step %+v; want the prompt's turn and its apply_patch step changing 2 files", turn, patch)
	}
}

// TestGeminiTrustRealMounted runs the real Gemini CLI (`gemini -p`)
// against a fake model on a mounted workspace with zerofs's project
// hooks: with --skip-trust in a folder it does not trust, it changes the
// file and records nothing, which `hooks install` said beforehand; once
// the folder is trusted (trustedFolders.json, as Gemini CLI writes it),
// `hooks check` says nothing is missing and the run records its turn and
// steps; and the user-level install, which the need offers, records a
// --skip-trust run in a folder Gemini CLI is told not to trust.
func TestGeminiTrustRealMounted(t *testing.T) {
	gemini := agentBinary(t, "gemini")
	built.NeedFUSE(t)
	home := t.TempDir()
	t.Setenv("HOME", home)
	for _, v := range []string{"GEMINI_CLI_HOME", "GEMINI_CLI_TRUSTED_FOLDERS_PATH", "GEMINI_CLI_TRUST_WORKSPACE", "XDG_CONFIG_HOME"} {
		t.Setenv(v, "")
	}
	ws := appWS(t)
	port := fakeModel(t, "gemini.py", ws)
	writeFile(t, filepath.Join(home, ".gemini", "settings.json"), `{"security":{"auth":{"selectedType":"gemini-api-key"}}}`)
	mountT(t, ws)
	out := binOK(t, ws, "hooks", "install", "gemini")
	if !strings.Contains(out, "not trusted yet") || !strings.Contains(out, "--skip-trust") {
		t.Errorf("hooks install gemini does not say the folder is untrusted and what --skip-trust does:\n%s", out)
	}
	env := []string{"GEMINI_API_KEY=fake", fmt.Sprintf("GOOGLE_GEMINI_BASE_URL=http://127.0.0.1:%d", port)}
	turns := func() int {
		var log []history.Entry
		if err := json.Unmarshal([]byte(binOK(t, ws, "log", "--json", "--all")), &log); err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, e := range log {
			if e.Type == "turn" {
				n++
			}
		}
		return n
	}
	runAgent(t, ws, env, gemini, "-p", "Add a greeting to app.py", "--yolo", "--skip-trust")
	if got := readTrim(t, filepath.Join(ws, "app.py")); got != "print('greetings')" || turns() != 0 {
		t.Fatalf("--skip-trust: app.py %q, %d turns; want the agent's change and nothing recorded", got, turns())
	}
	writeFile(t, filepath.Join(ws, "app.py"), "print('hi')\n")
	writeFile(t, filepath.Join(home, ".gemini", "trustedFolders.json"), fmt.Sprintf("{\n  %q: \"TRUST_FOLDER\"\n}", ws))
	if check := binOK(t, ws, "hooks", "check"); strings.Contains(check, "needs (") {
		t.Errorf("trusted: hooks check still needs something:\n%s", check)
	}
	runAgent(t, ws, env, gemini, "-p", "Add a greeting to app.py", "--yolo")
	var log []history.Entry
	json.Unmarshal([]byte(binOK(t, ws, "log", "--json")), &log)
	labels := map[string]bool{}
	for _, e := range log {
		labels[e.Label] = true
	}
	if turns() != 1 || !labels["write_file app.py"] || !labels["replace app.py"] {
		t.Errorf("trusted: %d turns, steps %v; want the turn with write_file and replace of app.py", turns(), labels)
	}
	// What the need offers: the user-level install records a --skip-trust
	// run, in a folder Gemini CLI is told not to trust.
	writeFile(t, filepath.Join(home, ".gemini", "trustedFolders.json"), fmt.Sprintf(`{%q: "DO_NOT_TRUST"}`, ws))
	writeFile(t, filepath.Join(ws, "app.py"), "print('hi')\n")
	binOK(t, ws, "hooks", "install", "gemini", "--user")
	runAgent(t, ws, env, gemini, "-p", "Add a greeting to app.py", "--yolo", "--skip-trust")
	if turns() != 2 {
		t.Errorf("--user, --skip-trust in a distrusted folder: %d turns, want 2", turns())
	}
}
