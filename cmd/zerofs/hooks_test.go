package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/zerofs/zerofs/history"
	"github.com/zerofs/zerofs/hooks"
	"github.com/zerofs/zerofs/record"
)

// TestHooksInstall runs `zerofs hooks install AGENT` against a temporary
// HOME and project for every agent, in both scopes, twice: the first run
// writes the configuration and shows the change as a diff, the second
// changes nothing and says so, a dry run writes nothing, and `hooks check`
// finds the hooks.
func TestHooksInstall(t *testing.T) {
	for _, a := range hooks.Agents {
		for _, scope := range []string{"--project", "--user"} {
			t.Run(a.Name+scope, func(t *testing.T) {
				home, project := t.TempDir(), t.TempDir()
				t.Setenv("HOME", home)
				t.Setenv("XDG_CONFIG_HOME", "")
				args := []string{"hooks", "install", a.Name, scope, "--zerofs", "/usr/local/bin/zerofs"}
				dry := mustRun(t, project, append(args, "--dry-run")...)
				if !strings.Contains(dry, "would write") || !strings.Contains(dry, "+") {
					t.Fatalf("dry run: %q", dry)
				}
				if n := countFiles(t, home) + countFiles(t, project); n != 0 {
					t.Fatalf("a dry run wrote %d files", n)
				}
				first := mustRun(t, project, args...)
				if !strings.Contains(first, "created") || (!strings.Contains(first, "step --hook --agent "+a.Name) &&
					!strings.Contains(first, `"step", "--hook", "--agent", "`+a.Name+`"`)) {
					t.Fatalf("first install: %q", first)
				}
				second := mustRun(t, project, args...)
				if !strings.Contains(second, "nothing to change") {
					t.Fatalf("second install: %q", second)
				}
				root := project
				if scope == "--user" {
					root = home
				}
				if n := countFiles(t, root); n != 1 {
					t.Errorf("the installs left %d files under %s, want 1", n, root)
				}
				check := mustRun(t, project, "hooks", "check")
				line := ""
				for l := range strings.Lines(check) {
					if strings.HasPrefix(l, a.Name+" ") {
						line = l
					}
				}
				if !strings.Contains(line, "installed: "+strings.TrimPrefix(scope, "--")) {
					t.Errorf("hooks check: %q, want %s installed in %s scope\n%s", line, a.Name, scope, check)
				}
			})
		}
	}
	wantFail(t, t.TempDir(), 2, "unknown agent", "hooks", "install", "vscode")
	wantFail(t, t.TempDir(), 2, "exclude each other", "hooks", "install", "claude", "--user", "--project")
}

func countFiles(t *testing.T, dir string) int {
	n := 0
	filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			n++
		}
		return nil
	})
	return n
}

// fixture is one agent's real hook payload from the hooks package's
// testdata, pointed at the workspace ws.
func fixture(t *testing.T, name, ws string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "hooks", "testdata", "payloads", name))
	if err != nil {
		t.Fatal(err)
	}
	return strings.ReplaceAll(string(b), "/work/app", ws)
}

// appWS makes the workspace the payloads name (an "app" directory holding
// app.py), not mounted, and returns its path.
func appWS(t *testing.T) string {
	t.Helper()
	ws := filepath.Join(t.TempDir(), "app")
	if err := os.Mkdir(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(ws, "app.py"), "print('hi')\n")
	return ws
}

// hookT returns a function that feeds the payload fixture name to `zerofs
// step --hook` (with extra flags) for ws, as an installed hook does, and
// fails the test unless it succeeds.
func hookT(t *testing.T, ws string) func(name string, extra ...string) {
	return func(name string, extra ...string) {
		t.Helper()
		r := bin(t, "/", fixture(t, name, ws), append([]string{"step", "--hook"}, extra...)...)
		if r.code != 0 {
			t.Fatalf("%s: exit %d: %s", name, r.code, r.stderr)
		}
	}
}

// TestHookTurnsMounted drives a mounted workspace with real payloads, as
// the installed hooks do: prompts from Claude Code and Cursor begin turns,
// tool calls begin labelled steps, Cursor's edit (no hook before it)
// belongs to its turn; `log` groups steps under their turn, `rewind
// --before-turn` and `undo --turn` take a whole turn back, bash included.
func TestHookTurnsMounted(t *testing.T) {
	ws := appWS(t)
	mountT(t, ws)
	hook := hookT(t, ws)
	hook("claude-UserPromptSubmit.json")
	hook("claude-PreToolUse-Edit.json")
	writeFile(t, filepath.Join(ws, "app.py"), "print('hello')\n")
	hook("claude-PreToolUse-Bash.json")
	sh(t, ws, "mkdir -p docs && echo x > docs/x.md && echo y > notes.txt")
	hook("claude-PreToolUse-Write.json") // changes nothing: hidden
	hook("cursor-beforeSubmitPrompt.json")
	writeFile(t, filepath.Join(ws, "app.py"), "print('cursor')\n") // Cursor edits without a hook
	hook("cursor-beforeShellExecution.json")
	sh(t, ws, "rm notes.txt")

	log := binOK(t, ws, "log")
	for _, want := range []string{
		`"Rename hello to greet everywhere and fix the tests" (claude)`,
		`"run the grafana app" (cursor)`,
		"  step ", "Edit app.py", "Bash: rm -rf docs …", "Shell: make run", "(no step)",
	} {
		if !strings.Contains(log, want) {
			t.Errorf("log lacks %q:\n%s", want, log)
		}
	}
	if strings.Contains(log, "Write src/util.py") || !strings.Contains(binOK(t, ws, "log", "--all"), "Write src/util.py") {
		t.Errorf("the step that changed nothing: shown without --all, or not with it:\n%s", log)
	}
	var entries []history.Entry
	json.Unmarshal([]byte(binOK(t, ws, "log", "--json")), &entries)
	var turns []history.Entry
	for _, e := range entries {
		if e.Type == "turn" {
			turns = append(turns, e)
		}
	}
	if len(turns) != 2 || turns[0].Agent != "cursor" || turns[1].AgentSession != "9f26d0b2-1db8-4ea5-acdb-3c76457a4735" {
		t.Fatalf("log --json turns: %+v", turns)
	}
	for _, e := range entries {
		if e.Type == "step" && e.Label == "Edit app.py" && e.Turn != turns[1].Sequence {
			t.Errorf("the Edit step belongs to turn %d, want %d", e.Turn, turns[1].Sequence)
		}
	}

	// zerofs_log returns the turns too, and each step's turn.
	c := newMCPClient(t, ws)
	_, lg := c.ok("zerofs_log", map[string]any{})
	var mcpTurns, inTurn int
	for _, e := range lg["entries"].([]any) {
		m := e.(map[string]any)
		if m["type"] == "turn" && m["prompt"] != nil {
			mcpTurns++
		}
		if m["type"] == "step" && m["turn"] != nil {
			inTurn++
		}
	}
	if mcpTurns != 2 || inTurn < 3 {
		t.Errorf("zerofs_log: %d turns with prompts and %d steps in a turn, want 2 and 3 or more: %v", mcpTurns, inTurn, lg)
	}
	c.cs.Close()

	// Take back Cursor's turn: its unhooked edit and its shell command.
	cursorTurn := turns[0].Sequence
	dry := binOK(t, ws, "rewind", "--dry-run", "--before-turn", itoa(cursorTurn))
	if !strings.Contains(dry, "app.py") || !strings.Contains(dry, "notes.txt") {
		t.Errorf("rewind --before-turn --dry-run: %q", dry)
	}
	if got := readTrim(t, filepath.Join(ws, "app.py")); got != "print('cursor')" {
		t.Fatalf("a dry run changed app.py to %q", got)
	}
	out := binOK(t, ws, "undo", "--turn")
	if !strings.Contains(out, "run the grafana app") {
		t.Errorf("undo --turn: %q, want it to name the turn", out)
	}
	if got := readTrim(t, filepath.Join(ws, "app.py")); got != "print('hello')" {
		t.Errorf("after undo --turn app.py is %q, want Claude's version", got)
	}
	if got := readTrim(t, filepath.Join(ws, "notes.txt")); got != "y" {
		t.Errorf("after undo --turn notes.txt is %q, want it back", got)
	}
	// The next undo --turn takes back Claude's turn, bash included.
	binOK(t, ws, "undo", "--turn")
	if got := readTrim(t, filepath.Join(ws, "app.py")); got != "print('hi')" {
		t.Errorf("after the second undo --turn app.py is %q", got)
	}
	for _, p := range []string{"docs", "notes.txt"} {
		if _, err := os.Lstat(filepath.Join(ws, p)); !os.IsNotExist(err) {
			t.Errorf("after the second undo --turn %s exists (%v)", p, err)
		}
	}
	if r := bin(t, ws, "", "rewind", "--before-turn", "2"); r.code != 1 || !strings.Contains(r.stderr, "not a turn") {
		t.Errorf("rewind --before-turn of a step: exit %d, %q", r.code, r.stderr)
	}
	// --no-prompt keeps the text out.
	r := bin(t, "/", fixture(t, "gemini-BeforeAgent.json", ws), "step", "--hook", "--no-prompt")
	if r.code != 0 || r.stdout != "{}\n" {
		t.Fatalf("gemini prompt hook: exit %d, stdout %q (Gemini CLI parses it as JSON)", r.code, r.stdout)
	}
	if log := binOK(t, ws, "log", "-n", "1"); !strings.Contains(log, "(prompt kept out) (gemini)") {
		t.Errorf("a turn recorded with --no-prompt: %q", log)
	}
}

func itoa(s record.Seq) string { return strings.TrimSpace(string(must(json.Marshal(s)))) }

func must(b []byte, err error) []byte {
	if err != nil {
		panic(err)
	}
	return b
}

// TestEveryRealPayloadMounted runs every real payload in the hooks
// package's testdata through `zerofs step --hook --agent AGENT` on a
// mounted workspace, as the installed hooks run it, and reads back from
// `log --json` each step's label and agent session and each turn's prompt,
// agent and session. The after-tool hooks' payloads go each right after its
// own tool call, as the agents sent them: each step's recorded result
// (status and exit code, or none) is the one its agent gave, matched to its
// step by the tool call id or the session, and nothing of the tools' output
// but an error's first line reaches the log. The hooks run from / so that the payload alone says
// where the workspace is (Windsurf's pre_write_code names only the file it
// writes), except Windsurf's prompt: its payload names no directory, and
// Windsurf runs its hooks in the workspace.
func TestEveryRealPayloadMounted(t *testing.T) {
	ws := filepath.Join(t.TempDir(), "app")
	if err := os.Mkdir(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	mountT(t, ws)
	files, err := filepath.Glob(filepath.Join("..", "..", "hooks", "testdata", "payloads", "*.json"))
	if err != nil || len(files) < 22 {
		t.Fatalf("payload fixtures: %v %v", files, err)
	}
	// The runs that captured the after-tool hooks go in the order the agent
	// sent them: each result right after its own tool call.
	runs := [][]string{
		{"claude-PreToolUse-Bash-ls.json", "claude-PostToolUse-Bash.json", "claude-PreToolUse-Bash-fails.json", "claude-PostToolUseFailure-Bash.json"},
		{"codex-PreToolUse-Bash-ls.json", "codex-PostToolUse-Bash.json", "codex-PreToolUse-Bash-fails.json", "codex-PostToolUse-Bash-fails.json"},
		{"gemini-BeforeTool-run_shell_command-ls.json", "gemini-AfterTool-run_shell_command.json",
			"gemini-BeforeTool-run_shell_command-fails.json", "gemini-AfterTool-run_shell_command-fails.json",
			"gemini-BeforeTool-replace-fails.json", "gemini-AfterTool-replace-fails.json"},
		{"opencode-tool.execute.before-bash-ls.json", "opencode-tool.execute.after-bash.json",
			"opencode-tool.execute.before-bash-fails.json", "opencode-tool.execute.after-bash-fails.json"},
		{"cursor-beforeShellExecution.json", "cursor-afterShellExecution.json"},
		{"windsurf-pre_run_command.json", "windsurf-post_run_command.json", "windsurf-pre_write_code.json", "windsurf-post_write_code.json"},
	}
	inRun := map[string]bool{}
	var order []string
	for _, r := range runs {
		for _, f := range r {
			inRun[f] = true
		}
	}
	for _, f := range files {
		if name := filepath.Base(f); !inRun[name] {
			order = append(order, name)
		}
	}
	for _, r := range runs {
		order = append(order, r...)
	}
	if len(order) != len(files) {
		t.Fatalf("%d fixtures sent, %d in testdata", len(order), len(files))
	}
	for _, name := range order {
		agent, _, _ := strings.Cut(name, "-")
		dir := "/"
		if name == "windsurf-pre_user_prompt.json" {
			dir = ws
		}
		r := bin(t, dir, fixture(t, name, ws), "step", "--hook", "--agent", agent)
		if r.code != 0 || strings.Contains(r.stderr, "not recorded") || strings.Contains(r.stderr, "warning") {
			t.Fatalf("%s: exit %d: %s", name, r.code, r.stderr)
		}
	}
	const (
		claude    = "9f26d0b2-1db8-4ea5-acdb-3c76457a4735"
		claudeSub = "7e413420-7ae3-473e-8e51-7f7ac2fbd349"
		codex     = "01a24245-babe-7a71-ba43-8424b07c8482"
		gemini    = "4df9cd7d-1a30-4696-9bed-7a88217fc246"
		opencode  = "ses_dbb1d410fffe9uZ9WoTUC3izEx"
		cursor    = "91bb80bf-54e5-4858-9f98-65e8b42d308b"
		windsurf  = "64944513-a64d-410b-af09-426251271f8b"
		claude2   = "5bdb694b-1855-4b23-8b3e-374527cc3cf1"
		codex2    = "01a244de-2bf7-7223-8d50-e06f3e31129e"
		gemini2   = "bf09e448-b671-4800-98b2-7c4171a26640"
		opencode2 = "ses_dbb20f98cffeF4d5Oy9HGGSuiy"
	)
	type step struct{ label, session string }
	// Each step, and what its result says ("-": none recorded; "?": a
	// result whose status the agent does not give), with its exit code
	// (-1: none).
	type result struct {
		status string
		exit   int
	}
	none, unknown := result{"-", -1}, result{"?", -1}
	wantSteps := map[step]result{
		{"Bash: rm -rf docs …", claude}:                          none,
		{"Edit app.py", claude}:                                  none,
		{"Write src/util.py", claude}:                            none,
		{"Bash: ls docs", claudeSub}:                             none, // a subagent's
		{"Bash: cargo test -p core", codex}:                      none,
		{"apply_patch: src/a.go, src/b.go", codex}:               none,
		{"run_shell_command: npm test -- --watch=false", gemini}: none,
		{"write_file app.py", gemini}:                            none,
		{"replace app.py", gemini}:                               none,
		{"bash: go test ./...", opencode}:                        none,
		{"edit app.py", opencode}:                                none,
		{"Shell: curl -I http://localhost:3000/", cursor}:        none,
		// The after-tool hooks' runs.
		{"Bash: ls src", claude2}:                               {"ok", -1},
		{"Bash: ls missing.txt", claude2}:                       {"error", 2},
		{"Bash: ls src", codex2}:                                unknown,
		{"Bash: ls missing.txt", codex2}:                        unknown,
		{"run_shell_command: ls src", gemini2}:                  {"ok", -1},
		{"run_shell_command: ls missing.txt", gemini2}:          {"error", 2},
		{"replace app.py", gemini2}:                             {"error", -1},
		{"bash: ls src", opencode2}:                             {"ok", 0},
		{"bash: ls missing.txt", opencode2}:                     {"error", 2},
		{"Shell: make run", cursor}:                             unknown,
		{"run_command: echo rosetta-hook-probe", windsurf}:      unknown,
		{"write_code docs/hooks/_ws_write_probe.txt", windsurf}: unknown,
	}
	wantTurns := map[string]string{ // agent: session
		"claude": claude, "codex": codex, "gemini": gemini, "opencode": opencode, "cursor": cursor, "windsurf": windsurf,
	}
	// Codex with the project's .codex/hooks.json (the others came from a
	// user-level install): a session of its own, the same steps.
	const codexProject = "01a244ef-d0c7-7ff0-b783-3f914fecb8f2"
	wantProject := map[string]bool{"Bash: cargo test -p core": true, "apply_patch: src/a.go, src/b.go": true}
	projectSteps, projectTurns := 0, 0
	var entries []history.Entry
	if err := json.Unmarshal([]byte(binOK(t, ws, "log", "--json", "--all")), &entries); err != nil {
		t.Fatal(err)
	}
	steps, turns := map[step]result{}, map[string]string{}
	nturns := 0
	for _, e := range entries {
		switch e.Type {
		case "turn":
			// Claude Code's task-notification (a background agent finished) is no person's prompt.
			if e.Prompt == "" || strings.Contains(e.Prompt, "task-notification") {
				t.Errorf("%s's turn: prompt %q", e.Agent, e.Prompt)
			}
			if e.AgentSession == codexProject {
				projectTurns++
				continue
			}
			nturns++
			turns[e.Agent] = e.AgentSession
		case "step":
			var p map[string]any
			json.Unmarshal(e.Payload, &p)
			s, _ := p["agentSession"].(string)
			if s == codexProject && wantProject[e.Label] {
				projectSteps++
				continue
			}
			got := none
			if r := e.Result; r != nil {
				got = result{r.Status, -1}
				if r.Status == "" {
					got.status = "?"
				}
				if r.ExitCode != nil {
					got.exit = *r.ExitCode
				}
				if r.Step != e.Sequence || r.AgentSession != s {
					t.Errorf("step %d %q: its result names step %d, session %q", e.Sequence, e.Label, r.Step, r.AgentSession)
				}
			}
			steps[step{e.Label, s}] = got
		}
	}
	for st, want := range wantSteps {
		if got, ok := steps[st]; !ok || got != want {
			t.Errorf("step %q of %s: result %v (recorded: %v), want %v", st.label, st.session, got, ok, want)
		}
	}
	for agent, session := range wantTurns {
		if turns[agent] != session {
			t.Errorf("%s's turn: session %q, want %q", agent, turns[agent], session)
		}
	}
	if len(steps) != len(wantSteps) || nturns != len(wantTurns) {
		t.Errorf("got steps %v and turns %v", steps, turns)
	}
	if projectSteps != 2 || projectTurns != 1 {
		t.Errorf("Codex with the project's hooks: %d steps and %d turns, want 2 and 1", projectSteps, projectTurns)
	}
	// Nothing of a tool's output but an error's first line reaches the log.
	raw := binOK(t, ws, "log", "--json", "--all")
	for _, secret := range []string{"Process Group PGID", "Exit code 2", "a.py", "untrusted_context"} {
		if strings.Contains(raw, secret) {
			t.Errorf("the log holds a tool's output: %q", secret)
		}
	}
	log, err := os.ReadFile(filepath.Join(ws, ".zero", "log"))
	if err != nil || strings.Contains(string(log), "PGID") {
		t.Errorf(".zero/log holds a tool's output (%v)", err)
	}
}

// TestTwoSessionsMounted: two agent sessions (Claude Code and Codex) work
// in one mounted workspace, their prompts and tool calls interleaved. Each
// step records its own session and belongs to its own session's turn, and
// taking one session's turn back names the other session's change it
// overwrites before it does.
func TestTwoSessionsMounted(t *testing.T) {
	ws := appWS(t)
	mountT(t, ws)
	hook := hookT(t, ws)
	const claude, codex = "9f26d0b2-1db8-4ea5-acdb-3c76457a4735", "01a24245-babe-7a71-ba43-8424b07c8482"
	hook("claude-UserPromptSubmit.json")
	hook("codex-UserPromptSubmit.json")
	hook("claude-PreToolUse-Edit.json")
	writeFile(t, filepath.Join(ws, "app.py"), "print('hello')\n")
	hook("codex-PreToolUse-Bash.json")
	sh(t, ws, "echo built > out.txt")

	var entries []history.Entry
	json.Unmarshal([]byte(binOK(t, ws, "log", "--json")), &entries)
	turnOf := map[string]record.Seq{}
	stepOf := map[string]history.Entry{}
	for _, e := range entries {
		if e.Type == "turn" {
			turnOf[e.AgentSession] = e.Sequence
			continue
		}
		var p map[string]any
		json.Unmarshal(e.Payload, &p)
		s, _ := p["agentSession"].(string)
		stepOf[s] = e
	}
	if e := stepOf[claude]; e.Label != "Edit app.py" || e.Turn != turnOf[claude] || len(e.Changes) != 1 || e.Changes[0].Path != "app.py" {
		t.Errorf("Claude Code's step: %q turn %d changes %+v; want Edit app.py in turn %d", e.Label, e.Turn, e.Changes, turnOf[claude])
	}
	if e := stepOf[codex]; e.Label != "Bash: cargo test -p core" || e.Turn != turnOf[codex] || len(e.Changes) != 1 || e.Changes[0].Path != "out.txt" {
		t.Errorf("Codex's step: %q turn %d changes %+v; want its Bash in turn %d", e.Label, e.Turn, e.Changes, turnOf[codex])
	}
	dry := binOK(t, ws, "rewind", "--dry-run", "--before-turn", itoa(turnOf[claude]))
	if !strings.Contains(dry, "foreign  out.txt (changed another session") || strings.Contains(dry, "foreign  app.py") {
		t.Errorf("taking back Claude Code's turn does not name Codex's change it overwrites:\n%s", dry)
	}
}

// TestParallelSessionsMounted: two agent sessions (Claude Code's and
// Codex's real payloads) work at once in one mounted workspace, each as an
// agent process that runs its hook and then its tools, their writes
// interleaved. Every change lands in its own session's step in `log
// --json`, and reverting one session's step keeps the other's changes.
func TestParallelSessionsMounted(t *testing.T) {
	ws := filepath.Join(t.TempDir(), "app")
	if err := os.Mkdir(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	mountT(t, ws)
	dir := t.TempDir()
	agent := func(fix, script string) *exec.Cmd {
		p := filepath.Join(dir, fix)
		if err := os.WriteFile(p, []byte(fixture(t, fix, ws)), 0o644); err != nil {
			t.Fatal(err)
		}
		self, err := os.Executable()
		if err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(self)
		cmd.Dir = ws
		cmd.Env = append(os.Environ(), "ZEROFS_TEST_AGENT="+strings.ReplaceAll(strings.ReplaceAll(script, "HOOK", binary+" step --hook < "+p), "\n", "; "))
		return cmd
	}
	// A begins its step, B begins its own, then both write in turns: A's
	// later writes come after B's step began.
	a := agent("claude-PreToolUse-Edit.json", `HOOK
echo a1 > a1.txt
sleep 0.6
echo a2 > a2.txt
sleep 0.6
echo a3 > a3.txt`)
	b := agent("codex-PreToolUse-Bash.json", `sleep 0.3
HOOK
echo b1 > b1.txt
sleep 0.6
echo b2 > b2.txt`)
	outA, outB := &strings.Builder{}, &strings.Builder{}
	a.Stdout, a.Stderr, b.Stdout, b.Stderr = outA, outA, outB, outB
	if err := a.Start(); err != nil {
		t.Fatal(err)
	}
	if err := b.Start(); err != nil {
		t.Fatal(err)
	}
	if err := a.Wait(); err != nil {
		t.Fatalf("session A: %v\n%s", err, outA)
	}
	if err := b.Wait(); err != nil {
		t.Fatalf("session B: %v\n%s", err, outB)
	}
	const claude, codex = "9f26d0b2-1db8-4ea5-acdb-3c76457a4735", "01a24245-babe-7a71-ba43-8424b07c8482"
	var entries []history.Entry
	if err := json.Unmarshal([]byte(binOK(t, ws, "log", "--json", "--all")), &entries); err != nil {
		t.Fatal(err)
	}
	paths := map[string][]string{}
	step := map[string]record.Seq{}
	for _, e := range entries {
		var p map[string]any
		json.Unmarshal(e.Payload, &p)
		s, _ := p["agentSession"].(string)
		step[s] = e.Sequence
		for _, c := range e.Changes {
			paths[s] = append(paths[s], c.Path)
		}
	}
	if got := strings.Join(paths[claude], " "); got != "a1.txt a2.txt a3.txt" {
		t.Errorf("Claude Code's step changed %q, want a1.txt a2.txt a3.txt\n%s", got, binOK(t, ws, "log", "--stat"))
	}
	if got := strings.Join(paths[codex], " "); got != "b1.txt b2.txt" {
		t.Errorf("Codex's step changed %q, want b1.txt b2.txt\n%s", got, binOK(t, ws, "log", "--stat"))
	}
	binOK(t, ws, "revert", itoa(step[claude]))
	for _, p := range []string{"a1.txt", "a2.txt", "a3.txt"} {
		if _, err := os.Lstat(filepath.Join(ws, p)); err == nil {
			t.Errorf("%s still there after reverting Claude Code's step", p)
		}
	}
	for _, p := range []string{"b1.txt", "b2.txt"} {
		if _, err := os.Lstat(filepath.Join(ws, p)); err != nil {
			t.Errorf("Codex's %s gone after reverting Claude Code's step: %v", p, err)
		}
	}
}
