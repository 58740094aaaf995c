package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/zerofs/zerofs/history"
	"github.com/zerofs/zerofs/internal/testsupport"
	"github.com/zerofs/zerofs/record"
)

// The person's change (SPEC, Whose change it is): while an agent's step is
// open, a process outside every agent's process tree (here a shell started
// with setsid by the test, as a person's terminal would be) changes a file.
// The change is the person's: it is not in the agent's step, and taking the
// agent's work back (undo, undo --turn, revert, and their MCP tools) leaves
// it alone, while a whole-workspace rewind names it before overwriting it.

const (
	personAppBefore = "print('hi')"
	personAppAgent  = "print('agent')"
	personBefore    = "notes"
	personAfter     = "notes\nPERSON"
)

// personScenario mounts a workspace in which an agent process (not a
// shell: the test binary, as TestParallelSessionsMounted's) sends Claude
// Code's prompt and Edit hooks through `zerofs step --hook` and then writes
// app.py; after its step began and before its write, a process started
// outside it appends to person.txt. It returns the workspace and the
// sequences of the turn and of the Edit step.
func personScenario(t *testing.T) (ws string, turn, step record.Seq) {
	t.Helper()
	ws = filepath.Join(t.TempDir(), "app")
	if err := os.Mkdir(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(ws, "app.py"), personAppBefore+"\n")
	writeFile(t, filepath.Join(ws, "person.txt"), personBefore+"\n")
	mountT(t, ws)
	dir := t.TempDir()
	var hooks []string
	for _, fix := range []string{"claude-UserPromptSubmit.json", "claude-PreToolUse-Edit.json"} {
		p := filepath.Join(dir, fix)
		if err := os.WriteFile(p, []byte(fixture(t, fix, ws)), 0o644); err != nil {
			t.Fatal(err)
		}
		hooks = append(hooks, binary+" step --hook < "+p)
	}
	ready, goOn := filepath.Join(dir, "ready"), filepath.Join(dir, "go")
	script := strings.Join(append(hooks,
		"touch "+ready,
		"while [ ! -e "+goOn+" ]; do sleep 0.02; done",
		"echo \""+personAppAgent+"\" > app.py"), "; ")
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	agent := exec.Command(self)
	agent.Dir = ws
	agent.Env = append(os.Environ(), "ZEROFS_TEST_AGENT="+script)
	out := &strings.Builder{}
	agent.Stdout, agent.Stderr = out, out
	if err := agent.Start(); err != nil {
		t.Fatal(err)
	}
	if err := testsupport.Poll(30*time.Second, func() bool { _, err := os.Stat(ready); return err == nil }); err != nil {
		agent.Process.Kill()
		agent.Wait()
		t.Fatalf("the agent never began its step:\n%s", out)
	}
	person := exec.Command("setsid", "sh", "-c", "echo PERSON >> person.txt")
	person.Dir = ws
	if b, err := person.CombinedOutput(); err != nil {
		t.Fatalf("the person's edit: %v %s", err, b)
	}
	writeFile(t, goOn, "")
	if err := agent.Wait(); err != nil {
		t.Fatalf("agent: %v\n%s", err, out)
	}
	var entries []history.Entry
	if err := json.Unmarshal([]byte(binOK(t, ws, "log", "--json", "--all")), &entries); err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		switch {
		case e.Type == "turn":
			turn = e.Sequence
		case e.Label == "Edit app.py":
			step = e.Sequence
		}
	}
	if turn == 0 || step == 0 {
		t.Fatalf("no turn or no Edit step in the log:\n%s", binOK(t, ws, "log", "--stat"))
	}
	return ws, turn, step
}

// checkAgentUndone checks that the agent's write is taken back and the
// person's is not.
func checkAgentUndone(t *testing.T, ws, what string) {
	t.Helper()
	if got := readTrim(t, filepath.Join(ws, "app.py")); got != personAppBefore {
		t.Errorf("after %s app.py is %q, want the agent's write taken back (%q)", what, got, personAppBefore)
	}
	if got := readTrim(t, filepath.Join(ws, "person.txt")); got != personAfter {
		t.Errorf("after %s person.txt is %q, want the person's change kept (%q)", what, got, personAfter)
	}
}

func TestPersonChangeLeftAlone(t *testing.T) {
	for _, tc := range []struct {
		name string
		args func(turn, step record.Seq) []string
	}{
		{"undo", func(_, _ record.Seq) []string { return []string{"undo"} }},
		{"undo --turn", func(_, _ record.Seq) []string { return []string{"undo", "--turn"} }},
		{"rewind --before-turn", func(turn, _ record.Seq) []string { return []string{"rewind", "--before-turn", itoa(turn)} }},
		{"revert", func(_, step record.Seq) []string { return []string{"revert", itoa(step)} }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ws, turn, step := personScenario(t)
			args := tc.args(turn, step)
			dry := bin(t, ws, "", append(append([]string{}, args[0], "--dry-run"), args[1:]...)...)
			if dry.code != 0 || strings.Contains(dry.stdout, "person.txt") && !strings.Contains(dry.stdout, "kept     person.txt") {
				t.Errorf("zerofs %s --dry-run: exit %d, would touch person.txt or names it wrong:\n%s%s", strings.Join(args, " "), dry.code, dry.stdout, dry.stderr)
			}
			r := bin(t, ws, "", args...)
			if r.code != 0 {
				t.Fatalf("zerofs %s: exit %d: %s", strings.Join(args, " "), r.code, r.stderr)
			}
			checkAgentUndone(t, ws, "zerofs "+strings.Join(args, " "))
			if strings.Contains(r.stderr, "person.txt") && !strings.Contains(r.stderr, "left person.txt alone") {
				t.Errorf("zerofs %s names person.txt wrong: %s", strings.Join(args, " "), r.stderr)
			}
		})
	}
}

func TestPersonChangeLeftAloneMCP(t *testing.T) {
	for _, tc := range []struct {
		tool string
		args func(step record.Seq) map[string]any
	}{
		{"zerofs_undo", func(record.Seq) map[string]any { return map[string]any{} }},
		{"zerofs_revert", func(step record.Seq) map[string]any { return map[string]any{"seq": step} }},
	} {
		t.Run(tc.tool, func(t *testing.T) {
			ws, _, step := personScenario(t)
			c := newMCPClient(t, ws)
			text, out := c.ok(tc.tool, tc.args(step))
			checkAgentUndone(t, ws, tc.tool)
			ws2, _ := out["warnings"].([]any)
			for _, w := range ws2 {
				if s, _ := w.(string); strings.Contains(s, "person.txt") && !strings.Contains(s, "left person.txt alone") {
					t.Errorf("%s: warning %q", tc.tool, s)
				}
			}
			if strings.Contains(text, "overwrote person.txt") || strings.Contains(text, "overwrites person.txt") {
				t.Errorf("%s says it overwrote the person's change: %s", tc.tool, text)
			}
		})
	}
}

// TestPersonChangeNamedByRewind: a whole-workspace rewind to before the
// turn overwrites the person's change, and says so, dry and for real, in
// the CLI and in MCP's warnings.
func TestPersonChangeNamedByRewind(t *testing.T) {
	ws, turn, _ := personScenario(t)
	target := itoa(turn - 1)
	dry := binOK(t, ws, "rewind", "--dry-run", target)
	if !strings.Contains(dry, "foreign  person.txt (changed outside the agents by sh") || strings.Contains(dry, "foreign  app.py") {
		t.Errorf("rewind --dry-run does not name the person's change:\n%s", dry)
	}
	c := newMCPClient(t, ws)
	_, out := c.ok("zerofs_rewind", map[string]any{"seq": turn - 1, "dry_run": true})
	if w, _ := out["warnings"].([]any); len(w) != 1 || !strings.Contains(w[0].(string), "person.txt, changed outside the agents by sh") {
		t.Errorf("zerofs_rewind dry_run: warnings %v, want the person's change named", out["warnings"])
	}
	r := bin(t, ws, "", "rewind", target)
	if r.code != 0 || !strings.Contains(r.stderr, "this overwrote person.txt, changed outside the agents by sh") {
		t.Errorf("rewind: exit %d, stderr %q; want the person's change named", r.code, r.stderr)
	}
	if got := readTrim(t, filepath.Join(ws, "person.txt")); got != personBefore {
		t.Errorf("after rewind person.txt is %q, want %q (a whole rewind overwrites, and names, it)", got, personBefore)
	}
}

// TestPersonChangeInLog: `log` shows the person's change as an entry of its
// own, never inside the agent's step.
func TestPersonChangeInLog(t *testing.T) {
	ws, _, step := personScenario(t)
	var entries []history.Entry
	if err := json.Unmarshal([]byte(binOK(t, ws, "log", "--json", "--all")), &entries); err != nil {
		t.Fatal(err)
	}
	var person *history.Entry
	for i, e := range entries {
		var paths []string
		for _, c := range e.Changes {
			paths = append(paths, c.Path)
		}
		if e.Sequence == step && strings.Join(paths, " ") != "app.py" {
			t.Errorf("the agent's step changed %v, want app.py only", paths)
		}
		if e.Person {
			person = &entries[i]
			if strings.Join(paths, " ") != "person.txt" {
				t.Errorf("the person's entry changed %v, want person.txt", paths)
			}
		}
	}
	if person == nil {
		t.Errorf("no entry of the person's change in log --json")
	}
	// `show` of either shows its own change only.
	if out := binOK(t, ws, "show", itoa(step)); !strings.Contains(out, "+"+personAppAgent) || strings.Contains(out, "PERSON") {
		t.Errorf("show of the agent's step:\n%s\nwant its app.py change, not the person's", out)
	}
	if person != nil {
		if out := binOK(t, ws, "show", itoa(person.Sequence)); !strings.Contains(out, "(a person)") || !strings.Contains(out, "+PERSON") || strings.Contains(out, personAppAgent) {
			t.Errorf("show of the person's change:\n%s\nwant person.txt's change only", out)
		}
	}
	stat := binOK(t, ws, "log", "--stat")
	agentPart, _, _ := strings.Cut(stat[strings.Index(stat, "Edit app.py"):], "\n\n")
	if strings.Contains(agentPart, "person.txt") || !strings.Contains(stat, "(a person)") {
		t.Errorf("log --stat shows the person's change in the agent's step or not at all:\n%s", stat)
	}
}

// TestSessionWithoutTurn: a session that has begun no turn (Cursor's shell
// step) does not get another session's turn (OpenCode's prompt): the log
// shows it in no turn, and `undo --turn` after it refuses rather than
// taking back OpenCode's turn with it.
func TestSessionWithoutTurn(t *testing.T) {
	ws := appWS(t)
	mountT(t, ws)
	hook := hookT(t, ws)
	hook("opencode-chat.message.json")
	hook("opencode-tool.execute.before-edit.json")
	writeFile(t, filepath.Join(ws, "app.py"), "print('opencode')\n")
	hook("cursor-beforeShellExecution.json")
	writeFile(t, filepath.Join(ws, "out.txt"), "built\n")
	var entries []history.Entry
	if err := json.Unmarshal([]byte(binOK(t, ws, "log", "--json", "--all")), &entries); err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.Label == "Shell: make run" && e.Turn != 0 {
			t.Errorf("Cursor's step belongs to turn %d, want none (its session began no turn)", e.Turn)
		}
	}
	r := bin(t, ws, "", "undo", "--turn")
	if r.code == 0 {
		t.Errorf("undo --turn after Cursor's step: exit 0 (%s), want a refusal: its session began no turn", r.stdout)
	}
	if got := readTrim(t, filepath.Join(ws, "app.py")); got != "print('opencode')" {
		t.Errorf("undo --turn after Cursor's step took back OpenCode's turn: app.py is %q", got)
	}
}
