package rewind

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	"github.com/zerofs/zerofs/record"
)

// ErrNoStepForResult: a result whose tool call id and agent session match no
// step (its before-hook recorded nothing, or too long ago).
var ErrNoStepForResult = errors.New("rewind: no step matches the result")

// resultIndex remembers, for the steps begun since the engine opened, which
// step each tool call id and each agent session began last, so an after-tool
// hook finds its step without reading the log.
type resultIndex struct {
	mu        sync.Mutex // guards byCall, calls, bySession
	byCall    map[string]record.Seq
	calls     []string // byCall's keys, oldest first, to bound it
	bySession map[string]record.Seq
}

// maxRemembered bounds the tool call ids and sessions a resultIndex keeps.
const maxRemembered = 4096

// resultScan bounds how far back in the log a result looks for its step
// when the engine did not see the step begin (it opened after).
const resultScan = 1 << 16

// note remembers the step at seq, begun with payload.
func (x *resultIndex) note(payload map[string]any, seq record.Seq) {
	call, _ := payload["toolUseId"].(string)
	session, _ := payload["agentSession"].(string)
	if call == "" && session == "" {
		return
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.byCall == nil {
		x.byCall, x.bySession = map[string]record.Seq{}, map[string]record.Seq{}
	}
	if call != "" {
		if _, ok := x.byCall[call]; !ok {
			x.calls = append(x.calls, call)
		}
		x.byCall[call] = seq
		if len(x.calls) > maxRemembered {
			delete(x.byCall, x.calls[0])
			x.calls = x.calls[1:]
		}
	}
	if session != "" {
		if len(x.bySession) >= maxRemembered {
			clear(x.bySession)
		}
		x.bySession[session] = seq
	}
}

// lookup is the step r belongs to, from what the engine saw: its tool call
// id's step, else its session's newest step.
func (x *resultIndex) lookup(r record.ToolResultPayload) (record.Seq, bool) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if s, ok := x.byCall[r.ToolUseID]; ok && r.ToolUseID != "" {
		return s, true
	}
	if s, ok := x.bySession[r.AgentSession]; ok && r.ToolUseID == "" && r.AgentSession != "" {
		return s, true
	}
	return 0, false
}

// RecordResult appends a tool_result event for r's step: r.Step when given
// (`zerofs run` knows its step), else the step whose tool_call carries r's
// tool call id, else (when r has none) the newest step of r's agent
// session. A result that matches no step is ErrNoStepForResult and appends
// nothing. It returns the result as recorded (its Step set) and its event,
// which is durable when RecordResult returns with Options.Sync, and within
// the flusher's window without it.
func (e *Engine) RecordResult(ctx context.Context, r record.ToolResultPayload) (record.ToolResultPayload, record.Event, error) {
	e.wsMu.RLock()
	defer e.wsMu.RUnlock()
	head := e.log.Head()
	switch {
	case r.Step > head:
		return r, record.Event{}, fmt.Errorf("%w: step %d is above head %d", record.ErrNoSuchSeq, r.Step, head)
	case r.Step == 0 && r.ToolUseID == "" && r.AgentSession == "":
		return r, record.Event{}, fmt.Errorf("%w: it names no step, tool call or session", ErrNoStepForResult)
	case r.Step == 0:
		s, ok := e.results.lookup(r)
		if !ok {
			var err error
			if s, ok, err = e.scanForStep(r, head); err != nil {
				return r, record.Event{}, err
			}
		}
		if !ok {
			return r, record.Event{}, fmt.Errorf("%w (tool call %q, session %q)", ErrNoStepForResult, r.ToolUseID, r.AgentSession)
		}
		r.Step = s
	}
	ev, err := e.log.Append(ctx, record.TypeToolResult, r)
	if err != nil {
		return r, ev, err
	}
	// Folded as a reopen folds it (it changes no file: only the head).
	if err := e.state.Add(ev); err != nil {
		return r, ev, err
	}
	if e.opts.Sync {
		return r, ev, e.Sync()
	}
	e.markDirty()
	return r, ev, nil
}

// scanForStep looks for r's step in the last resultScan events of the log:
// the tool_call that carries r's tool call id, else (when r has none) the
// newest of r's session.
func (e *Engine) scanForStep(r record.ToolResultPayload, head record.Seq) (record.Seq, bool, error) {
	from := record.Seq(1)
	if head > resultScan {
		from = head - resultScan
	}
	var found record.Seq
	for ev, err := range e.log.Events(from) {
		if err != nil {
			return 0, false, err
		}
		if ev.Type != record.TypeToolCall || ev.Seq > head {
			continue
		}
		var p struct {
			ToolUseID    string `json:"toolUseId"`
			AgentSession string `json:"agentSession"`
		}
		if json.Unmarshal(ev.Payload, &p) != nil {
			continue
		}
		switch {
		case r.ToolUseID != "" && p.ToolUseID == r.ToolUseID:
			found = ev.Seq
		case r.ToolUseID == "" && r.AgentSession != "" && p.AgentSession == r.AgentSession:
			found = ev.Seq
		}
	}
	return found, found != 0, nil
}
