package rewind

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/zerofs/zerofs/record"
)

// TestRecordResultFindsItsStep: a result names its step by its tool call
// id, else (no id) by its agent session's newest step, else by the step
// given; the engine finds it from what it saw, and after a reopen (it did
// not see the step begin) from the log. A result that matches nothing, or
// names a step above head, appends nothing.
func TestRecordResultFindsItsStep(t *testing.T) {
	ctx := context.Background()
	e, ws := openT(t, Options{})
	begin := func(label, id, session string) record.Seq {
		t.Helper()
		extra, _ := json.Marshal(map[string]string{"toolUseId": id, "agentSession": session})
		ev, err := e.BeginStep(ctx, label, extra)
		if err != nil {
			t.Fatal(err)
		}
		return ev.Seq
	}
	a := begin("Bash: make", "call_a", "s1")
	b := begin("Edit x", "call_b", "s1")
	c := begin("Shell: ls", "", "s2")
	check := func(e *Engine, r record.ToolResultPayload, want record.Seq) {
		t.Helper()
		head := e.Head()
		got, ev, err := e.RecordResult(ctx, r)
		if want == 0 {
			if !errors.Is(err, ErrNoStepForResult) && !errors.Is(err, record.ErrNoSuchSeq) {
				t.Errorf("%+v: got step %d, err %v; want no step", r, got.Step, err)
			}
			if e.Head() != head {
				t.Errorf("%+v: a result that matched no step appended an event", r)
			}
			return
		}
		if err != nil || got.Step != want || ev.Type != record.TypeToolResult {
			t.Fatalf("%+v: got step %d (%s), err %v; want step %d", r, got.Step, ev.Type, err, want)
		}
		var p record.ToolResultPayload
		if json.Unmarshal(ev.Payload, &p) != nil || p.Step != want {
			t.Errorf("the event's payload %s names another step than %d", ev.Payload, want)
		}
		// Folded as a reopen folds it.
		if e.state.Head() != ev.Seq {
			t.Errorf("the derived state's head is %d after the result at %d", e.state.Head(), ev.Seq)
		}
	}
	for i := range 2 {
		if i == 1 {
			e = reopen(t, e, ws) // it did not see the steps begin
		}
		check(e, record.ToolResultPayload{ToolUseID: "call_a", AgentSession: "s1", Status: "error"}, a)
		check(e, record.ToolResultPayload{ToolUseID: "call_b", AgentSession: "s1", Status: "ok"}, b)
		check(e, record.ToolResultPayload{AgentSession: "s2"}, c)    // Cursor, Windsurf: no tool call id
		check(e, record.ToolResultPayload{AgentSession: "s1"}, b)    // the session's newest step
		check(e, record.ToolResultPayload{Step: a, Status: "ok"}, a) // zerofs run knows its step
		check(e, record.ToolResultPayload{ToolUseID: "call_zz", AgentSession: "s1"}, 0)
		check(e, record.ToolResultPayload{AgentSession: "s9"}, 0)
		check(e, record.ToolResultPayload{}, 0)
		check(e, record.ToolResultPayload{Step: 1000}, 0)
	}
}
