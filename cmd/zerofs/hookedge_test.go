package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// hookPayloadJSON is a Claude Code PreToolUse payload for tool with input,
// in cwd.
func hookPayloadJSON(t *testing.T, cwd, tool string, input any) string {
	t.Helper()
	b, err := json.Marshal(map[string]any{
		"session_id": "5d1e0c57-3f7c-4b43-9d0e-1f2a3b4c5d6e", "hook_event_name": "PreToolUse",
		"tool_name": tool, "tool_input": input, "cwd": cwd, "tool_use_id": "toolu_edge",
	})
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// logEvents reads the mounted workspace's event log.
func logEvents(t *testing.T, ws string) []map[string]json.RawMessage {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(ws, ".zero", "log"))
	if err != nil {
		t.Fatal(err)
	}
	var evs []map[string]json.RawMessage
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(nil, 4<<20)
	for sc.Scan() {
		var ev map[string]json.RawMessage
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			t.Fatalf("log line %q: %v", sc.Text(), err)
		}
		evs = append(evs, ev)
	}
	return evs
}

// TestHookNeverLosesStepMounted: a hook on a mounted workspace records the
// step the payload names, in the workspace it names and nowhere else, and
// never fails the agent: a tool input over 1 MiB is cut (and says so) and
// the step recorded; a cwd that is not an absolute path of the agent's
// records nothing, with a warning, even when the hook runs inside another
// workspace; a stdin that never ends is given up after a deadline; garbage
// exits 0 with a warning; an agent's name never reaches the terminal raw.
func TestHookNeverLosesStepMounted(t *testing.T) {
	ws := filepath.Join(t.TempDir(), "app")
	if err := os.Mkdir(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(ws, "keep.txt"), "keep\n")
	mountT(t, ws)

	t.Run("big input", func(t *testing.T) {
		content := strings.Repeat("0123456789abcdef", 2<<20/16) // a 2 MiB Write
		r := bin(t, "/", hookPayloadJSON(t, ws, "Write", map[string]string{"file_path": filepath.Join(ws, "big.txt"), "content": content}), "step", "--hook")
		if r.code != 0 {
			t.Fatalf("step --hook with a 2 MiB input: exit %d: %s", r.code, r.stderr)
		}
		evs := logEvents(t, ws)
		last := evs[len(evs)-1]
		var typ string
		json.Unmarshal(last["type"], &typ)
		var p struct {
			Name       string          `json:"name"`
			Input      json.RawMessage `json:"input"`
			InputCut   bool            `json:"inputCut"`
			InputBytes int             `json:"inputBytes"`
		}
		json.Unmarshal(last["payload"], &p)
		if typ != "tool_call" || p.Name != "Write big.txt" || !p.InputCut || p.InputBytes < 2<<20 || len(p.Input) > 300<<10 {
			t.Fatalf("last event: %s %+v (input %d bytes), want the step Write big.txt with its input cut", typ, p, len(p.Input))
		}
		var in map[string]string
		if err := json.Unmarshal(p.Input, &in); err != nil || in["file_path"] != filepath.Join(ws, "big.txt") || !strings.HasPrefix(content, strings.TrimSuffix(in["content"], "…")) {
			t.Errorf("cut input: %v, %.80q", err, in)
		}
	})

	t.Run("cwd", func(t *testing.T) {
		gone := filepath.Join(t.TempDir(), "gone")
		for _, cwd := range []string{"/nonexistent", gone, ws + "\n", ws + "\x00", "app", ws + "/sub\n"} {
			head := readTrim(t, filepath.Join(ws, ".zero", "head"))
			// The hook runs inside the workspace: only the payload's cwd counts.
			r := bin(t, ws, hookPayloadJSON(t, cwd, "Bash", map[string]string{"command": "make"}), "step", "--hook")
			if r.code != 0 || !strings.Contains(r.stderr, "warning") || !strings.Contains(r.stderr, "not recorded") {
				t.Errorf("cwd %q: exit %d, stderr %q, want exit 0 and a warning", cwd, r.code, r.stderr)
			}
			if got := readTrim(t, filepath.Join(ws, ".zero", "head")); got != head {
				t.Errorf("cwd %q: head %s -> %s: a step was recorded in the hook's own workspace", cwd, head, got)
			}
		}
		// A directory of the workspace the agent removed is still the workspace.
		head := readTrim(t, filepath.Join(ws, ".zero", "head"))
		r := bin(t, "/", hookPayloadJSON(t, filepath.Join(ws, "removed", "dir"), "Bash", map[string]string{"command": "make"}), "step", "--hook")
		if r.code != 0 || r.stderr != "" || readTrim(t, filepath.Join(ws, ".zero", "head")) == head {
			t.Errorf("cwd under the workspace that does not exist: exit %d, stderr %q, head %s", r.code, r.stderr, head)
		}
	})

	t.Run("stdin never ends", func(t *testing.T) {
		cmd := exec.Command(binary, "step", "--hook")
		cmd.Dir = ws
		pr, pw, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		defer pw.Close()
		cmd.Stdin = pr
		var errb bytes.Buffer
		cmd.Stderr = &errb
		start := time.Now()
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		pr.Close()
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case err := <-done:
			if err != nil || !strings.Contains(errb.String(), "no JSON on stdin within") {
				t.Errorf("after %v: %v, stderr %q", time.Since(start), err, errb.String())
			}
		case <-time.After(30 * time.Second):
			cmd.Process.Kill()
			<-done
			t.Fatal("step --hook waited 30 s for a stdin that never ends")
		}
	})

	t.Run("garbage", func(t *testing.T) {
		head := readTrim(t, filepath.Join(ws, ".zero", "head"))
		for _, c := range []struct{ stdin, want string }{
			{"not json", "not a hook's JSON"},
			{"", "stdin is empty"},
			{`[1,2]`, "not a hook's JSON"},
		} {
			r := bin(t, ws, c.stdin, "step", "--hook")
			if r.code != 0 || !strings.HasPrefix(r.stderr, "zerofs: warning: ") || !strings.Contains(r.stderr, c.want) {
				t.Errorf("stdin %q: exit %d, stderr %q, want exit 0 and a warning saying %q", c.stdin, r.code, r.stderr, c.want)
			}
		}
		// Cursor and Gemini CLI read an answer from every hook, even then.
		for _, agent := range []string{"cursor", "gemini"} {
			if r := bin(t, ws, "not json", "step", "--hook", "--agent", agent); r.code != 0 || r.stdout != "{}\n" {
				t.Errorf("%s garbage: exit %d, stdout %q, want 0 and {}", agent, r.code, r.stdout)
			}
		}
		// A flag this zerofs does not know (an older binary) blocks nothing.
		if r := bin(t, ws, "{}", "step", "--hook", "--frobnicate"); r.code != 0 || !strings.Contains(r.stderr, "warning") {
			t.Errorf("unknown flag: exit %d, stderr %q, want exit 0 and a warning", r.code, r.stderr)
		}
		if got := readTrim(t, filepath.Join(ws, ".zero", "head")); got != head {
			t.Errorf("garbage recorded something: head %s -> %s", head, got)
		}
	})

	t.Run("agent name", func(t *testing.T) {
		prompt := `{"session_id":"s1","hook_event_name":"UserPromptSubmit","prompt":"hi","cwd":"` + ws + `"}`
		if r := bin(t, "/", prompt, "step", "--hook", "--agent", "claude\x1b]0;pwned\a"); r.code != 0 {
			t.Fatalf("exit %d: %s", r.code, r.stderr)
		}
		opencode := `{"agent":"open\u001b[2Jcode","session_id":"s2","hook_event_name":"chat.message","prompt":"there","cwd":"` + ws + `"}`
		if r := bin(t, "/", opencode, "step", "--hook"); r.code != 0 || r.stderr != "" {
			t.Fatalf("exit %d: %s", r.code, r.stderr)
		}
		writeFile(t, filepath.Join(ws, "keep.txt"), "changed\n")
		out := binOK(t, ws, "log")
		if strings.ContainsAny(out, "\x1b\a") {
			t.Errorf("log prints an agent's name raw: %q", out)
		}
		if !strings.Contains(out, `claude\033]0;pwned`) || !strings.Contains(out, `open\033[2Jcode`) {
			t.Errorf("log does not name the agents quoted:\n%s", out)
		}
	})
}
