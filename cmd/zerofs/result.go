package main

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"time"

	"github.com/zerofs/zerofs/history"
	"github.com/zerofs/zerofs/hooks"
	"github.com/zerofs/zerofs/internal/quote"
	"github.com/zerofs/zerofs/record"
)

// recordHookResult records an after-tool hook's result (hooks.KindResult)
// in the step its tool call began: the one whose tool_call carries the
// same tool call id, else the agent session's newest step. noPrompt keeps
// the error's first line out, as it keeps a prompt's text out of a turn.
func recordHookResult(e *env, ws *history.Workspace, c hooks.Call, noPrompt bool) error {
	r := record.ToolResultPayload{Agent: c.Agent, AgentSession: c.Session, ToolUseID: c.ToolUseID}
	if c.Result != nil {
		r.Status, r.ExitCode, r.DurationMs, r.Summary = c.Result.Status, c.Result.ExitCode, c.Result.DurationMs, c.Result.Summary
	}
	if noPrompt {
		r.Summary = ""
	}
	return recordResult(e, ws, r)
}

// recordResult sends r to ws's history.
func recordResult(e *env, ws *history.Workspace, r record.ToolResultPayload) error {
	h, err := history.Open(e.ctx, ws, history.Options{Logger: e.logger()})
	if err != nil {
		return err
	}
	_, err = h.RecordResult(e.ctx, r)
	if cerr := h.Close(); err == nil {
		err = cerr
	}
	return err
}

// runID names a `zerofs run` step's command as an agent names a tool call,
// so its result finds its step.
func runID() string {
	var b [8]byte
	rand.Read(b[:])
	return "run-" + hex.EncodeToString(b[:])
}

// recordRunResult records what came of `zerofs run`'s command: its exit
// status (128+N for a signal N) and how long it ran. A failure to record
// is a warning: the command's own status is what run exits with.
func recordRunResult(e *env, ws *history.Workspace, id string, code int, took time.Duration, summary string) {
	ms := took.Milliseconds()
	r := record.ToolResultPayload{Status: "ok", ExitCode: &code, DurationMs: &ms, ToolUseID: id, Summary: summary}
	if code != 0 {
		r.Status = "error"
	}
	if err := recordResult(e, ws, r); err != nil {
		fmt.Fprintf(e.stderr, "zerofs: warning: run: the command's result was not recorded: %s\n", quote.Line(err.Error()))
	}
}

// resultLine is `hooks check`'s words for a tool_result event: the agent
// that sent it and "last result 42 (step 41): error, exit 2".
func resultLine(ev record.Event) (agent, line string) {
	var r record.ToolResultPayload
	if json.Unmarshal(ev.Payload, &r) != nil || r.Agent == "" {
		return "", ""
	}
	what := r.Status
	if what == "" {
		what = "status unknown"
	}
	if r.ExitCode != nil {
		what += fmt.Sprintf(", exit %d", *r.ExitCode)
	}
	return r.Agent, fmt.Sprintf("last result %d (step %d): %s", ev.Seq, r.Step, what)
}

// resultMark is what the log adds to a step's line for its result: "
// failed (exit 2, 19 ms)" in red for a failed tool call, nothing else (a
// step that went well is the usual case).
func resultMark(r *record.ToolResultPayload, paint func(string, string) string) string {
	status, detail := history.ResultWords(r)
	if status != "failed" {
		return ""
	}
	s := "  " + paint(colorRed, "failed")
	if detail != "" {
		s += " (" + detail + ")"
	}
	return s
}

// writeResult is show STEP's line for the step's result: "result: failed
// (exit 2, 19 ms): ls: cannot access ...", "result: ok (33 ms)", "result:
// not said (412 ms)"; nothing when none was recorded.
func writeResult(w io.Writer, r *record.ToolResultPayload) error {
	if r == nil {
		return nil
	}
	status, detail := history.ResultWords(r)
	if status == "" {
		status = "not said"
	}
	s := "result: " + status
	if detail != "" {
		s += " (" + detail + ")"
	}
	if r.Summary != "" {
		s += ": " + quote.Line(r.Summary)
	}
	_, err := fmt.Fprintln(w, s)
	return err
}
