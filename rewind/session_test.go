package rewind

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/zerofs/zerofs/record"
)

// TestSessionsKeepTheirOwnSteps: two agent sessions (agent processes 100
// and 200, each hook run by sh under its agent) have a step open at once;
// changes by each agent's tools land in that agent's step though the other
// began its step later, a change from outside both agents' trees is a
// person's (in no step); a revert of either step puts back its own changes
// only, and neither takes the person's back.
func TestSessionsKeepTheirOwnSteps(t *testing.T) {
	ctx := context.Background()
	e, ws := openT(t, Options{})
	init1 := Proc{PID: 1, Start: 1, Comm: "systemd"}
	tmux := Proc{PID: 50, Start: 5, Comm: "tmux: server"}
	agentA := Proc{PID: 100, Start: 10, Comm: "claude"}
	agentB := Proc{PID: 200, Start: 20, Comm: "codex"}
	caller := func(lin ...Proc) Caller {
		return Caller{PID: lin[0].PID, Comm: lin[0].Comm, Lineage: func() []Proc { return lin }}
	}
	hook := func(agent Proc, n int) Caller {
		return caller(Proc{PID: agent.PID + n, Start: agent.Start + 1, Comm: "zerofs"},
			Proc{PID: agent.PID + n + 1, Start: agent.Start + 1, Comm: "sh"}, agent, tmux, init1)
	}
	tool := func(agent Proc, n int) Caller {
		return caller(Proc{PID: agent.PID + n, Start: agent.Start + 2, Comm: "bash"}, agent, tmux, init1)
	}
	editor := caller(Proc{PID: 300, Start: 30, Comm: "vim"}, tmux, init1)
	write := func(who Caller, p, content string) {
		t.Helper()
		release, _, err := e.Begin(ctx, who, Change{Path: p})
		if err != nil {
			t.Fatal(err)
		}
		defer release()
		if err := os.WriteFile(filepath.Join(ws, p), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(editor, "shared.txt", "v0\n")
	evA, err := e.BeginStepAs(ctx, hook(agentA, 1), "Edit a.txt", json.RawMessage(`{"agentSession":"A"}`))
	if err != nil {
		t.Fatal(err)
	}
	write(tool(agentA, 3), "a.txt", "a1\n")
	evB, err := e.BeginStepAs(ctx, hook(agentB, 1), "Bash: make", json.RawMessage(`{"agentSession":"B"}`))
	if err != nil {
		t.Fatal(err)
	}
	write(tool(agentB, 3), "b.txt", "b1\n")
	write(tool(agentA, 5), "a2.txt", "a2\n") // A's, after B's step began
	write(tool(agentA, 5), "a.txt", "a1 again\n")
	write(tool(agentB, 3), "b2.txt", "b2\n")
	write(editor, "editor.txt", "e\n") // neither agent's: a person's

	owner := map[string]record.Seq{} // path -> step of its capture
	const personStep = ^record.Seq(0)
	pos := record.Seq(0)
	for ev, err := range e.Log().Events(1) {
		if err != nil {
			t.Fatal(err)
		}
		switch ev.Type {
		case record.TypeToolCall:
			pos = ev.Seq
		case record.TypeCheckpoint:
			var cp record.Checkpoint
			json.Unmarshal(ev.Payload, &cp)
			s := pos
			switch {
			case cp.Person:
				s = personStep
			case cp.Step != 0:
				s = cp.Step
			}
			for _, f := range cp.Files {
				if _, seen := owner[f.Path]; !seen || f.Path == "a.txt" {
					owner[f.Path] = s
				}
			}
		}
	}
	want := map[string]record.Seq{"shared.txt": 0, "a.txt": evA.Seq, "a2.txt": evA.Seq, "b.txt": evB.Seq, "b2.txt": evB.Seq, "editor.txt": personStep}
	for p, w := range want {
		if owner[p] != w {
			t.Errorf("%s captured in step %d, want %d (A is %d, B is %d)", p, owner[p], w, evA.Seq, evB.Seq)
		}
	}

	// Revert A's step: A's files go, B's and the editor's stay.
	if _, err := e.Apply(ctx, record.Request{Revert: evA.Seq}); err != nil {
		t.Fatal(err)
	}
	got := diskTree(t, ws)
	for _, p := range []string{"a.txt", "a2.txt"} {
		if _, ok := got[p]; ok {
			t.Errorf("%s still there after reverting A's step", p)
		}
	}
	for _, p := range []string{"b.txt", "b2.txt", "editor.txt", "shared.txt"} {
		if _, ok := got[p]; !ok {
			t.Errorf("%s gone after reverting A's step: %v", p, got)
		}
	}
	// Revert B's step: B's files go; the editor's change in the same span
	// is the person's, and stays.
	if _, err := e.Apply(ctx, record.Request{Revert: evB.Seq}); err != nil {
		t.Fatal(err)
	}
	got = diskTree(t, ws)
	for _, p := range []string{"b.txt", "b2.txt"} {
		if _, ok := got[p]; ok {
			t.Errorf("%s still there after reverting B's step", p)
		}
	}
	for _, p := range []string{"shared.txt", "editor.txt"} {
		if _, ok := got[p]; !ok {
			t.Errorf("%s gone after reverting B's step: %v", p, got)
		}
	}
}

// TestSessionRevertConflict: a path both sessions' steps changed, in turn,
// is a conflict for either revert (putting it back would take the other's
// change too), unless forced.
func TestSessionRevertConflict(t *testing.T) {
	ctx := context.Background()
	e, ws := openT(t, Options{})
	lin := func(agent int) func() []Proc {
		return func() []Proc {
			return []Proc{{PID: agent + 1, Start: 9, Comm: "bash"}, {PID: agent, Start: 8, Comm: "agent"}, {PID: 1, Start: 1, Comm: "init"}}
		}
	}
	a, b := Caller{Lineage: lin(100)}, Caller{Lineage: lin(200)}
	write := func(who Caller, content string) {
		t.Helper()
		release, _, err := e.Begin(ctx, who, Change{Path: "f"})
		if err != nil {
			t.Fatal(err)
		}
		defer release()
		if err := os.WriteFile(filepath.Join(ws, "f"), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	evA, _ := e.BeginStepAs(ctx, a, "A", json.RawMessage(`{"agentSession":"A"}`))
	write(a, "a\n")
	e.BeginStepAs(ctx, b, "B", json.RawMessage(`{"agentSession":"B"}`))
	write(b, "b\n")
	write(a, "a again\n")
	if _, err := e.Apply(ctx, record.Request{Revert: evA.Seq}); err == nil {
		t.Fatal("revert of A's step, whose file B changed in between: no conflict")
	}
	if got, _ := os.ReadFile(filepath.Join(ws, "f")); string(got) != "a again\n" {
		t.Fatalf("a refused revert changed f to %q", got)
	}
}
