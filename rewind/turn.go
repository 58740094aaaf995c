package rewind

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/zerofs/zerofs/record"
)

// BeginTurn appends a turn event (SPEC: a person's prompt to an agent;
// payload {"prompt", "agentSession"}, both optional) and ends the current
// step, as a rewind does: changes after it belong to the next tool_call's
// step, or to an implicit step when an agent edits files without a hook
// before them (Cursor). Each path is captured again in the new step, so the
// state just before the turn stays reachable by sequence: rewinding to the
// turn's sequence minus one takes back everything done since the prompt.
// The event is durable when BeginTurn returns with Options.Sync, and
// within the flusher's window (BatchDelay) without it, as a capture is.
func (e *Engine) BeginTurn(ctx context.Context, payload json.RawMessage) (record.Event, error) {
	return e.BeginTurnAs(ctx, Caller{}, payload)
}

// BeginTurnAs is BeginTurn for a turn whose prompt hook ran as who's
// process. It ends that agent session's step only (session.go): the steps
// other sessions have open stay open, and the session's changes before its
// next tool call belong to the turn while it is the newest step.
func (e *Engine) BeginTurnAs(ctx context.Context, who Caller, payload json.RawMessage) (record.Event, error) {
	obj := map[string]any{}
	if len(payload) > 0 {
		if err := json.Unmarshal(payload, &obj); err != nil {
			return record.Event{}, fmt.Errorf("rewind: turn payload is not a JSON object: %w", err)
		}
	}
	session, _ := obj["agentSession"].(string)
	agent, ok := agentOf(who, session)
	if err := e.preSync(); err != nil {
		return record.Event{}, err
	}
	e.wsMu.Lock()
	defer e.wsMu.Unlock()
	e.capMu.Lock()
	ev, err := e.beginTurnLocked(ctx, obj)
	if err == nil {
		e.registerLocked(session, sessionStep{step: e.step, session: session, agent: agent, turn: true}, ok)
	}
	e.capMu.Unlock()
	if err != nil {
		return ev, err
	}
	return ev, e.captureOpenWriters(ctx)
}

// beginTurnLocked appends the turn and starts an unnamed step at it; the
// caller holds wsMu and capMu.
func (e *Engine) beginTurnLocked(ctx context.Context, payload map[string]any) (record.Event, error) {
	if err := e.Sync(); err != nil {
		return record.Event{}, err
	}
	ev, err := e.log.Append(ctx, record.TypeTurn, payload)
	if err != nil {
		return record.Event{}, err
	}
	e.markAppended()
	e.setStep(Step{Seq: ev.Seq})
	e.state.AddStep(ev)
	return ev, nil
}

// turnPrompt is the prompt of the turn event at seq ("" when it was kept
// out, or seq is not a turn): one event read, from the log's index of
// line offsets, so a report names the turn it acted on.
func (e *Engine) turnPrompt(seq record.Seq) string {
	for ev, err := range e.log.Events(seq) {
		if err != nil || ev.Seq != seq || ev.Type != record.TypeTurn {
			return ""
		}
		var p struct {
			Prompt string `json:"prompt"`
		}
		json.Unmarshal(ev.Payload, &p)
		return p.Prompt
	}
	return ""
}
