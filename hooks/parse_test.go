package hooks

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

// TestParseRealPayloads maps each agent's real hook payload (testdata, in
// the shapes each agent's documentation gives) to the call zerofs records:
// its kind, agent, session, and the label a person reads.
func TestParseRealPayloads(t *testing.T) {
	for _, tc := range []struct {
		file                 string
		kind                 Kind
		agent, session, want string // want: the label, or the prompt for KindPrompt
	}{
		{"claude-PreToolUse-Edit.json", KindTool, "claude", "9f0c3c2e-5b1a-4c7e-8a55-0d4b3f1e2a10", "Edit app.py"},
		{"claude-PreToolUse-Bash.json", KindTool, "claude", "9f0c3c2e-5b1a-4c7e-8a55-0d4b3f1e2a10", "Bash: rm -rf docs …"},
		{"claude-PreToolUse-Write.json", KindTool, "claude", "9f0c3c2e-5b1a-4c7e-8a55-0d4b3f1e2a10", "Write src/util.py"},
		{"claude-UserPromptSubmit.json", KindPrompt, "claude", "9f0c3c2e-5b1a-4c7e-8a55-0d4b3f1e2a10", "Rename hello to greet everywhere and fix the tests"},
		{"codex-PreToolUse-Bash.json", KindTool, "codex", "019a6f2e-7c1d-7b52-9a3e-5d1c0b8e4f21", "Bash: cargo test -p core"},
		{"codex-PreToolUse-apply_patch.json", KindTool, "codex", "019a6f2e-7c1d-7b52-9a3e-5d1c0b8e4f21", "apply_patch: src/a.go, src/b.go"},
		{"codex-UserPromptSubmit.json", KindPrompt, "codex", "019a6f2e-7c1d-7b52-9a3e-5d1c0b8e4f21", "Make B return 2"},
		{"gemini-BeforeTool-write_file.json", KindTool, "gemini", "c2a7b9d4-1e3f-4a5b-8c6d-7e8f9a0b1c2d", "write_file app.py"},
		{"gemini-BeforeTool-run_shell_command.json", KindTool, "gemini", "c2a7b9d4-1e3f-4a5b-8c6d-7e8f9a0b1c2d", "run_shell_command: npm test -- --watch=false"},
		{"gemini-BeforeAgent.json", KindPrompt, "gemini", "c2a7b9d4-1e3f-4a5b-8c6d-7e8f9a0b1c2d", "Add a greeting to app.py"},
		{"cursor-beforeShellExecution.json", KindTool, "cursor", "5b9e3c1a-8d2f-4e6b-a7c0-1f2e3d4c5b6a", "Shell: npm install left-pad"},
		{"cursor-beforeSubmitPrompt.json", KindPrompt, "cursor", "5b9e3c1a-8d2f-4e6b-a7c0-1f2e3d4c5b6a", "Pad the output with left-pad"},
		{"windsurf-pre_run_command.json", KindTool, "windsurf", "b7c8d9e0-f1a2-4b3c-8d4e-5f6a7b8c9d0e", "run_command: make clean && make"},
		{"windsurf-pre_write_code.json", KindTool, "windsurf", "b7c8d9e0-f1a2-4b3c-8d4e-5f6a7b8c9d0e", "write_code /work/app/src/main.c"},
		{"windsurf-pre_user_prompt.json", KindPrompt, "windsurf", "b7c8d9e0-f1a2-4b3c-8d4e-5f6a7b8c9d0e", "Make main take no arguments"},
		{"opencode-tool.execute.before-edit.json", KindTool, "opencode", "ses_5c1f2e3d4a5bXyZ", "edit app.py"},
		{"opencode-tool.execute.before-bash.json", KindTool, "opencode", "ses_5c1f2e3d4a5bXyZ", "bash: go test ./..."},
		{"opencode-chat.message.json", KindPrompt, "opencode", "ses_5c1f2e3d4a5bXyZ", "Say hello instead of hi"},
	} {
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
			got := c.Prompt
			if c.Kind == KindTool {
				got = Label(c)
				if len(c.Input) == 0 || !json.Valid(c.Input) {
					t.Errorf("tool input %q is not kept as JSON", c.Input)
				}
			}
			if got != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
			// The hint the installed command passes agrees with the shape.
			if c2, _ := Parse(raw, tc.agent); c2.Kind != c.Kind || Label(c2) != Label(c) {
				t.Errorf("with the agent named, got %+v, want %+v", c2, c)
			}
		})
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
