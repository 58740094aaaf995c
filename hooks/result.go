package hooks

import (
	"bytes"
	"encoding/json"
	"math"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// A Result is what came of one tool call, as an agent's after-tool hook
// tells it: Claude Code's PostToolUse and PostToolUseFailure, Codex's
// PostToolUse, Gemini CLI's AfterTool, the OpenCode plugin's
// tool.execute.after, Cursor's afterShellExecution, Windsurf's
// post_run_command and post_write_code. What an agent does not say is left
// unknown: Codex, Cursor and Windsurf say nothing of success or failure,
// Gemini CLI and Windsurf nothing of the time it took.
//
// A Result never holds the tool's output: only the first line of an
// error, at most MaxSummary bytes (the output can hold secrets).
type Result struct {
	// Status is "ok", "error", or "" when the agent does not say.
	Status string
	// ExitCode is a command's exit status, when known.
	ExitCode *int
	// DurationMs is how long the tool ran, in milliseconds, when known.
	DurationMs *int64
	// Summary is the first line of the error (Status "error"), one line
	// of at most MaxSummary bytes.
	Summary string
}

// MaxSummary bounds a result's summary, in bytes.
const MaxSummary = 512

// exitCodeLine is Claude Code's first line of a failed command's error
// ("Exit code 2"), and Gemini CLI's line in a command's llmContent
// ("Exit Code: 2").
var exitCodeLine = regexp.MustCompile(`^(?i)exit code:? (-?[0-9]+)$`)

// claudeLikeResult reads the result of Claude Code's PostToolUse and
// PostToolUseFailure, Codex's PostToolUse, Gemini CLI's AfterTool and the
// OpenCode plugin's tool.execute.after.
func claudeLikeResult(agent string, p *rawPayload) *Result {
	r := &Result{DurationMs: millis(p.DurationMs)}
	switch p.HookEventName {
	case "PostToolUseFailure":
		// Claude Code: {"error": "Exit code 2\nls: cannot access ...",
		// "is_interrupt": false}.
		r.Status = "error"
		var msg string
		json.Unmarshal(p.Error, &msg)
		r.ExitCode, r.Summary = splitExitCode(msg)
	case "PostToolUse":
		if agent != "codex" {
			// Claude Code: a tool that failed goes to PostToolUseFailure.
			// Codex sends the output alone (a string): no status.
			r.Status = "ok"
		}
	case "AfterTool":
		geminiResult(r, p.ToolResponse)
	case "tool.execute.after":
		// The OpenCode plugin: {"exit": N, "error": "<first line>"} for a
		// shell command, {} for other tools (which reach this hook only
		// when they succeed).
		var resp struct {
			Exit  *float64 `json:"exit"`
			Error string   `json:"error"`
		}
		json.Unmarshal(p.ToolResponse, &resp)
		r.Status = "ok"
		if resp.Exit != nil && *resp.Exit == math.Trunc(*resp.Exit) && math.Abs(*resp.Exit) < 1<<31 {
			code := int(*resp.Exit)
			r.ExitCode = &code
			if code != 0 {
				r.Status = "error"
				r.Summary = summary(resp.Error)
			}
		}
	}
	return r
}

// geminiResult reads Gemini CLI's tool_response: {"llmContent",
// "returnDisplay", "error": {"message"}}. A shell command's llmContent
// holds its exit code ("Exit Code: 2") when it is not 0.
func geminiResult(r *Result, raw json.RawMessage) {
	var resp struct {
		LLMContent    json.RawMessage `json:"llmContent"`
		ReturnDisplay json.RawMessage `json:"returnDisplay"`
		Error         *struct {
			Message string `json:"message"`
		} `json:"error"`
	}
	json.Unmarshal(raw, &resp)
	r.Status = "ok"
	var content, display string
	json.Unmarshal(resp.LLMContent, &content)
	json.Unmarshal(resp.ReturnDisplay, &display)
	for line := range strings.Lines(content) {
		if m := exitCodeLine.FindStringSubmatch(strings.TrimSpace(line)); m != nil {
			if code, err := strconv.Atoi(m[1]); err == nil {
				r.ExitCode = &code
				if code != 0 {
					r.Status = "error"
					r.Summary = summary(display)
				}
			}
			break
		}
	}
	if resp.Error != nil {
		r.Status = "error"
		r.Summary = summary(resp.Error.Message)
	}
}

// cursorResult reads Cursor's afterShellExecution: {"command", "output",
// "duration"}. Cursor says nothing of the exit status.
func cursorResult(p *rawPayload) *Result {
	return &Result{DurationMs: millis(p.Duration)}
}

// splitExitCode reads an error whose first line is "Exit code N": the code,
// and the first line after it as the summary; any other error is its first
// line.
func splitExitCode(msg string) (*int, string) {
	first, rest, _ := strings.Cut(strings.TrimLeft(msg, "\r\n"), "\n")
	if m := exitCodeLine.FindStringSubmatch(strings.TrimSpace(first)); m != nil {
		if code, err := strconv.Atoi(m[1]); err == nil {
			return &code, summary(rest)
		}
	}
	return nil, summary(msg)
}

// summary is the first line of s that is not blank, as one line of at most
// MaxSummary bytes of valid UTF-8.
func summary(s string) string {
	for line := range strings.Lines(s) {
		line = oneLine(line)
		if line == "" {
			continue
		}
		if len(line) > MaxSummary {
			line = strings.ToValidUTF8(line[:MaxSummary-len("…")], "") + "…"
		}
		return line
	}
	return ""
}

// millis is a duration an agent gave in milliseconds, when it is one.
func millis(f *float64) *int64 {
	if f == nil || *f < 0 || *f > 1<<53 || math.IsNaN(*f) {
		return nil
	}
	ms := int64(*f)
	return &ms
}

// ResultsInstalled reports whether the configuration at path holds
// zerofs's hook for each of a's ResultEvents (an install from before
// zerofs recorded results has only the tool and prompt hooks).
func ResultsInstalled(a Agent, path string) bool {
	b, err := os.ReadFile(path)
	if err != nil {
		return false
	}
	if a.kind == kindPlugin {
		return bytes.Contains(b, []byte(`"tool.execute.after"`))
	}
	cfg, err := parseObject(b)
	if err != nil {
		return false
	}
	hooks, err := parseObject(cfg.get("hooks"))
	if err != nil {
		return false
	}
	for _, ev := range a.ResultEvents {
		var entries []json.RawMessage
		json.Unmarshal(hooks.get(ev), &entries)
		if !slices.ContainsFunc(entries, func(e json.RawMessage) bool { return isOurs(a, e) }) {
			return false
		}
	}
	return true
}
