package hooks

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestParseRealPayloads maps every real hook payload in testdata (what
// each agent sent, captured from the agents themselves: see
// testdata/payloads/SOURCES.md) to the call zerofs records: its kind,
// agent, session, directory and tool call id, and the label a person reads
// (or the prompt, for a turn). Every file there is in the table.
func TestParseRealPayloads(t *testing.T) {
	const (
		claude       = "9f26d0b2-1db8-4ea5-acdb-3c76457a4735"
		claudeSub    = "7e413420-7ae3-473e-8e51-7f7ac2fbd349"
		codex        = "01a24245-babe-7a71-ba43-8424b07c8482"
		codexProject = "01a244ef-d0c7-7ff0-b783-3f914fecb8f2"
		gemini       = "4df9cd7d-1a30-4696-9bed-7a88217fc246"
		opencode     = "ses_dbb1d410fffe9uZ9WoTUC3izEx"
		cursor       = "91bb80bf-54e5-4858-9f98-65e8b42d308b"
		windsurf     = "64944513-a64d-410b-af09-426251271f8b"
		ws           = "/work/app"
		// The runs that captured the after-tool hooks.
		claude2   = "5bdb694b-1855-4b23-8b3e-374527cc3cf1"
		codex2    = "01a244de-2bf7-7223-8d50-e06f3e31129e"
		gemini2   = "bf09e448-b671-4800-98b2-7c4171a26640"
		opencode2 = "ses_dbb20f98cffeF4d5Oy9HGGSuiy"
		// The runs that captured the worktree hooks.
		claudeEnter    = "f215d595-0938-41e6-91cd-00eed0bafe31"
		claudeIsolated = "680b6a24-9219-424c-839c-f73220e0f01d"
	)
	cases := []struct {
		file                 string
		kind                 Kind
		agent, session, want string // want: the label, or the prompt (its start, ending in "…") for KindPrompt
		cwd, id              string
	}{
		{"claude-UserPromptSubmit.json", KindPrompt, "claude", claude, "Rename hello to greet everywhere and fix the tests", ws, ""},
		{"claude-PreToolUse-Bash.json", KindTool, "claude", claude, "Bash: rm -rf docs …", ws, "toolu_01a44e0975e6cb41cc922189"},
		{"claude-PreToolUse-Edit.json", KindTool, "claude", claude, "Edit app.py", ws, "toolu_01bfd173abf4484483ac8090"},
		{"claude-PreToolUse-Write.json", KindTool, "claude", claude, "Write src/util.py", ws, "toolu_01a6a0eef882bf48aabaa8b3"},
		// A subagent's tool call: its agent's session (agent_id and agent_type say which subagent).
		{"claude-PreToolUse-Bash-subagent.json", KindTool, "claude", claudeSub, "Bash: ls docs", ws, "toolu_0109800c9765634aa5a0b005"},
		// Claude Code's own message that a background agent finished: no turn.
		{"claude-UserPromptSubmit-task-notification.json", KindOther, "claude", claudeSub, "", ws, ""},
		{"codex-UserPromptSubmit.json", KindPrompt, "codex", codex, "Make B return 2", ws, ""},
		{"codex-PreToolUse-Bash.json", KindTool, "codex", codex, "Bash: cargo test -p core", ws, "call_4a6d1ce02a714d33"},
		{"codex-PreToolUse-apply_patch.json", KindTool, "codex", codex, "apply_patch: src/a.go, src/b.go", ws, "call_ccc7fb82b2614677"},
		// The same from the project's .codex/hooks.json, in a trusted project.
		{"codex-project-UserPromptSubmit.json", KindPrompt, "codex", codexProject, "Make A return 2", ws, ""},
		{"codex-project-PreToolUse-Bash.json", KindTool, "codex", codexProject, "Bash: cargo test -p core", ws, "call_a2dc8bdd6259461f"},
		{"codex-project-PreToolUse-apply_patch.json", KindTool, "codex", codexProject, "apply_patch: src/a.go, src/b.go", ws, "call_d2004c4a62f64154"},
		{"gemini-BeforeAgent.json", KindPrompt, "gemini", gemini, "Add a greeting to app.py", ws, ""},
		{"gemini-BeforeTool-run_shell_command.json", KindTool, "gemini", gemini, "run_shell_command: npm test -- --watch=false", ws, ""},
		{"gemini-BeforeTool-write_file.json", KindTool, "gemini", gemini, "write_file app.py", ws, ""},
		{"gemini-BeforeTool-replace.json", KindTool, "gemini", gemini, "replace app.py", ws, ""},
		// OpenCode's `run` quotes a message that has spaces; the plugin sends the text it gets.
		{"opencode-chat.message.json", KindPrompt, "opencode", opencode, "Say hello instead of hi", ws, ""},
		{"opencode-tool.execute.before-bash.json", KindTool, "opencode", opencode, "bash: go test ./...", ws, "call_38cf3fb1cb24"},
		{"opencode-tool.execute.before-edit.json", KindTool, "opencode", opencode, "edit app.py", ws, "call_9d0cf4c0e8a7"},
		{"cursor-beforeSubmitPrompt.json", KindPrompt, "cursor", cursor, "run the grafana app", ws, ""},
		{"cursor-beforeShellExecution.json", KindTool, "cursor", cursor, "Shell: make run", ws, ""},
		// Cursor sends "cwd":"" for many commands: the workspace root stands in.
		{"cursor-beforeShellExecution-nocwd.json", KindTool, "cursor", cursor, "Shell: curl -I http://localhost:3000/", ws, ""},
		{"windsurf-pre_user_prompt.json", KindPrompt, "windsurf", windsurf, "This is a sanctioned diagnostic test of MY OWN editor hooks…", "", ""},
		{"windsurf-pre_run_command.json", KindTool, "windsurf", windsurf, "run_command: echo rosetta-hook-probe", ws, ""},
		// pre_write_code says no cwd: the label names the file as given (the
		// hook makes it relative to the workspace it finds).
		{"windsurf-pre_write_code.json", KindTool, "windsurf", windsurf, "write_code /work/app/docs/hooks/_ws_write_probe.txt", "", ""},
		// The after-tool hooks' runs: each tool call before and after
		// (the label of a result is its tool's name; TestParseResults
		// checks what each result says).
		{"claude-PreToolUse-Bash-ls.json", KindTool, "claude", claude2, "Bash: ls src", ws, "toolu_01eb73ba962b2943de9cf993"},
		{"claude-PostToolUse-Bash.json", KindResult, "claude", claude2, "Bash: ls src", ws, "toolu_01eb73ba962b2943de9cf993"},
		{"claude-PreToolUse-Bash-fails.json", KindTool, "claude", claude2, "Bash: ls missing.txt", ws, "toolu_01053d80059a8142f3b91ea0"},
		{"claude-PostToolUseFailure-Bash.json", KindResult, "claude", claude2, "Bash: ls missing.txt", ws, "toolu_01053d80059a8142f3b91ea0"},
		{"codex-PreToolUse-Bash-ls.json", KindTool, "codex", codex2, "Bash: ls src", ws, "call_8f9833ef645f4240"},
		{"codex-PostToolUse-Bash.json", KindResult, "codex", codex2, "Bash: ls src", ws, "call_8f9833ef645f4240"},
		{"codex-PreToolUse-Bash-fails.json", KindTool, "codex", codex2, "Bash: ls missing.txt", ws, "call_7cc509b089a64e96"},
		{"codex-PostToolUse-Bash-fails.json", KindResult, "codex", codex2, "Bash: ls missing.txt", ws, "call_7cc509b089a64e96"},
		{"gemini-BeforeTool-run_shell_command-ls.json", KindTool, "gemini", gemini2, "run_shell_command: ls src", ws, ""},
		{"gemini-AfterTool-run_shell_command.json", KindResult, "gemini", gemini2, "run_shell_command: ls src", ws, ""},
		{"gemini-BeforeTool-run_shell_command-fails.json", KindTool, "gemini", gemini2, "run_shell_command: ls missing.txt", ws, ""},
		{"gemini-AfterTool-run_shell_command-fails.json", KindResult, "gemini", gemini2, "run_shell_command: ls missing.txt", ws, ""},
		{"gemini-BeforeTool-replace-fails.json", KindTool, "gemini", gemini2, "replace app.py", ws, ""},
		{"gemini-AfterTool-replace-fails.json", KindResult, "gemini", gemini2, "replace app.py", ws, ""},
		{"opencode-tool.execute.before-bash-ls.json", KindTool, "opencode", opencode2, "bash: ls src", ws, "call_08cec7c2024e"},
		{"opencode-tool.execute.after-bash.json", KindResult, "opencode", opencode2, "bash", ws, "call_08cec7c2024e"},
		{"opencode-tool.execute.before-bash-fails.json", KindTool, "opencode", opencode2, "bash: ls missing.txt", ws, "call_547fe8fbe303"},
		{"opencode-tool.execute.after-bash-fails.json", KindResult, "opencode", opencode2, "bash", ws, "call_547fe8fbe303"},
		{"cursor-afterShellExecution.json", KindResult, "cursor", cursor, "Shell", ws, ""},
		{"windsurf-post_run_command.json", KindResult, "windsurf", windsurf, "run_command: echo rosetta-hook-probe", ws, ""},
		{"windsurf-post_write_code.json", KindResult, "windsurf", windsurf, "write_code /work/app/docs/hooks/_ws_write_probe.txt", "", ""},
		// The worktree hooks: no step, and no shape that names the agent
		// (`zerofs branch --hook` answers them;
		// TestParseWorktreeRealPayloads).
		{"claude-WorktreeCreate.json", KindOther, "", claudeEnter, "", ws, ""},
		{"claude-WorktreeCreate-subagent.json", KindOther, "", claudeIsolated, "", ws, ""},
		{"claude-WorktreeRemove.json", KindOther, "", claudeEnter, "", "/work/app-worktrees/greet", ""},
	}
	files, _ := filepath.Glob(filepath.Join("testdata", "payloads", "*.json"))
	listed := map[string]bool{}
	for _, tc := range cases {
		listed[tc.file] = true
	}
	for _, f := range files {
		if !listed[filepath.Base(f)] {
			t.Errorf("%s is not in the table", f)
		}
	}
	if len(files) != len(cases) {
		t.Errorf("%d payload files, %d cases", len(files), len(cases))
	}
	for _, tc := range cases {
		t.Run(tc.file, func(t *testing.T) {
			raw, err := os.ReadFile(filepath.Join("testdata", "payloads", tc.file))
			if err != nil {
				t.Fatal(err)
			}
			c, err := Parse(raw, "")
			if err != nil {
				t.Fatal(err)
			}
			if c.Kind != tc.kind || c.Agent != tc.agent || c.Session != tc.session {
				t.Fatalf("got kind %v agent %q session %q, want %v %q %q", c.Kind, c.Agent, c.Session, tc.kind, tc.agent, tc.session)
			}
			if c.Cwd != tc.cwd || c.ToolUseID != tc.id {
				t.Errorf("got cwd %q tool use id %q, want %q %q", c.Cwd, c.ToolUseID, tc.cwd, tc.id)
			}
			got := c.Prompt
			if c.Kind == KindResult {
				got = Label(c)
				if c.Result == nil {
					t.Fatal("a result without its Result")
				}
			}
			if c.Kind == KindTool {
				got = Label(c)
				if len(c.Input) == 0 || !json.Valid(c.Input) {
					t.Errorf("tool input %q is not kept as JSON", c.Input)
				}
				// A command's directory, where zerofs spells it out, is the one the call runs in.
				if d := inputFields(c.Input).str("cwd"); tc.agent == "cursor" && d != c.Cwd {
					t.Errorf("the recorded input says cwd %q, the call %q", d, c.Cwd)
				}
			}
			if prefix, ok := strings.CutSuffix(tc.want, "…"); ok && c.Kind == KindPrompt {
				if !strings.HasPrefix(got, prefix) {
					t.Errorf("got %q, want it to start with %q", got, prefix)
				}
			} else if got != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
			// The hint the installed command passes agrees with the shape.
			if c2, _ := Parse(raw, tc.agent); c2.Kind != c.Kind || c2.Session != c.Session || Label(c2) != Label(c) || c2.Prompt != c.Prompt {
				t.Errorf("with the agent named, got %+v, want %+v", c2, c)
			}
		})
	}
}

// TestParseTolerates: a field of another type than zerofs reads is left
// out and the rest is read (agents change their fields between versions);
// JSON that is not an object is an error.
func TestParseTolerates(t *testing.T) {
	c, err := Parse([]byte(`{"session_id":"s","cwd":42,"hook_event_name":"PreToolUse","tool_name":"Bash","tool_input":{"command":"ls"},"tool_use_id":7}`), "claude")
	if err != nil || c.Kind != KindTool || Label(c) != "Bash: ls" || c.Session != "s" || c.Cwd != "" {
		t.Errorf("got %+v, %v; want the Bash step of session s", c, err)
	}
	for _, raw := range []string{`[]`, `"PreToolUse"`, `42`, `null x`} {
		if _, err := Parse([]byte(raw), ""); err == nil {
			t.Errorf("Parse took %s", raw)
		}
	}
	if p := Path(Call{Input: json.RawMessage(`{"filePath":"/w/a.go"}`)}); p != "/w/a.go" {
		t.Errorf("Path: %q", p)
	}
	if p := Path(Call{Input: json.RawMessage(`"a string"`)}); p != "" {
		t.Errorf("Path of an input that is no object: %q", p)
	}
}

// TestLabelBounds: a label is one line, bounded, whatever the input holds.
func TestLabelBounds(t *testing.T) {
	long := make([]byte, 5000)
	for i := range long {
		long[i] = 'x'
	}
	for _, tc := range []struct {
		name string
		c    Call
		want string
	}{
		{"newline in path", Call{Tool: "Edit", Input: json.RawMessage(`{"file_path":"a\nb.go"}`)}, "Edit a b.go"},
		{"escape in command", Call{Tool: "Bash", Input: json.RawMessage(`{"command":"echo \u001b[2J"}`)}, "Bash: echo  [2J"},
		{"no input", Call{Tool: "TodoWrite"}, "TodoWrite"},
		{"nothing", Call{}, "hook"},
		{"path outside cwd", Call{Tool: "Edit", Cwd: "/w", Input: json.RawMessage(`{"file_path":"/etc/passwd"}`)}, "Edit /etc/passwd"},
		{"many patched files", Call{Tool: "apply_patch", Input: json.RawMessage(`{"command":"*** Begin Patch\n*** Add File: a\n*** Add File: b\n*** Add File: c\n*** Add File: d\n*** Delete File: e\n*** Update File: f\n*** End Patch"}`)}, "apply_patch: a, b, c, d, and 2 more"},
	} {
		if got := Label(tc.c); got != tc.want {
			t.Errorf("%s: got %q, want %q", tc.name, got, tc.want)
		}
	}
	in, _ := json.Marshal(map[string]string{"command": string(long)})
	if got := []rune(Label(Call{Tool: "Bash", Input: in})); len(got) > MaxLabel || got[len(got)-1] != '…' {
		t.Errorf("a 5000-byte command gives a %d-rune label %q", len(got), string(got))
	}
	if _, err := Parse([]byte("not json"), ""); err == nil {
		t.Error("Parse took text that is not JSON")
	}
	if c, err := Parse([]byte(`{"hook_event_name":"Stop","session_id":"s"}`), "claude"); err != nil || c.Kind != KindOther {
		t.Errorf("a Stop event: got %+v, %v; want KindOther", c, err)
	}
}

// TestUnquoteRunPrompt: the prompt `opencode run` makes of its arguments
// (words with spaces quoted, stdin after a newline) is recorded as the
// arguments typed; any other text, and the terminal UI's (no "run"), is
// kept as it is.
func TestUnquoteRunPrompt(t *testing.T) {
	for _, tc := range []struct {
		text string
		argv []string
		want string
	}{
		{`"Say hello instead of hi"`, []string{"run", "Say hello instead of hi"}, "Say hello instead of hi"},
		{`Say hello`, []string{"run", "Say", "hello"}, "Say hello"},
		{`"Say hello" "with \"quotes\""`, []string{"run", "--title", "my title", "Say hello", `with "quotes"`}, `Say hello with "quotes"`},
		{`"a b" "c d"`, []string{"run", "a b", "--model", "mock/m", "c d"}, "a b c d"},
		{"\"fix it\"\npiped text", []string{"run", "fix it"}, "fix it\npiped text"},
		{`"fix it"`, []string{"--print-logs", "run", "fix it"}, "fix it"},
		// The terminal UI: what the person typed, quotes and all.
		{`"fix it"`, []string{}, `"fix it"`},
		{`"fix it"`, nil, `"fix it"`},
		// Not what run made of these arguments.
		{`"fix it" now`, []string{"run", "fix it"}, `"fix it" now`},
		{`"other words"`, []string{"run", "fix it"}, `"other words"`},
	} {
		if got := unquoteRunPrompt(tc.text, tc.argv); got != tc.want {
			t.Errorf("unquoteRunPrompt(%q, %q) = %q, want %q", tc.text, tc.argv, got, tc.want)
		}
	}
}
