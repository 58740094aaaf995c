package rewind

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/zerofs/zerofs/record"
)

// personT is an engine with one agent session known (agent process 100,
// its hook run by sh) and a person's editor (process 300, outside it).
type personT struct {
	t      *testing.T
	e      *Engine
	ws     string
	agent  Caller // a tool of the agent
	hook   Caller
	editor Caller
}

func newPersonT(t *testing.T) *personT {
	init1 := Proc{PID: 1, Start: 1, Comm: "systemd"}
	agent := Proc{PID: 100, Start: 10, Comm: "claude"}
	caller := func(lin ...Proc) Caller {
		return Caller{PID: lin[0].PID, Comm: lin[0].Comm, Lineage: func() []Proc { return lin }}
	}
	e, ws := openT(t, Options{})
	return &personT{t: t, e: e, ws: ws,
		agent:  caller(Proc{PID: 103, Start: 12, Comm: "bash"}, agent, init1),
		hook:   caller(Proc{PID: 101, Start: 11, Comm: "zerofs"}, Proc{PID: 102, Start: 11, Comm: "sh"}, agent, init1),
		editor: caller(Proc{PID: 300, Start: 30, Comm: "vim"}, init1)}
}

func (p *personT) write(who Caller, path, content string) {
	p.t.Helper()
	release, _, err := p.e.Begin(context.Background(), who, Change{Path: path})
	if err != nil {
		p.t.Fatal(err)
	}
	defer release()
	if err := os.MkdirAll(filepath.Dir(filepath.Join(p.ws, path)), 0o755); err != nil {
		p.t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(p.ws, path), []byte(content), 0o644); err != nil {
		p.t.Fatal(err)
	}
}

func (p *personT) mkdir(who Caller, path string) {
	p.t.Helper()
	release, _, err := p.e.Begin(context.Background(), who, Change{Path: path})
	if err != nil {
		p.t.Fatal(err)
	}
	defer release()
	if err := os.Mkdir(filepath.Join(p.ws, path), 0o755); err != nil {
		p.t.Fatal(err)
	}
}

func (p *personT) turn() record.Seq {
	p.t.Helper()
	ev, err := p.e.BeginTurnAs(context.Background(), p.hook, json.RawMessage(`{"agentSession":"S"}`))
	if err != nil {
		p.t.Fatal(err)
	}
	return ev.Seq
}

func (p *personT) step(label string) record.Seq {
	p.t.Helper()
	ev, err := p.e.BeginStepAs(context.Background(), p.hook, label, json.RawMessage(`{"agentSession":"S"}`))
	if err != nil {
		p.t.Fatal(err)
	}
	return ev.Seq
}

func (p *personT) want(want map[string]string) {
	p.t.Helper()
	got := diskTree(p.t, p.ws)
	for path, w := range want {
		n, ok := got[path]
		g := n.Content
		switch {
		case w == "" && ok:
			p.t.Errorf("%s is there (%q), want it gone", path, g)
		case w != "" && g != w:
			p.t.Errorf("%s is %q, want %q", path, g, w)
		}
	}
}

// kept lists the paths a result names as left alone.
func kept(res record.RewindResult) []string {
	var out []string
	for _, f := range res.Foreign {
		if f.Kept {
			if f.Why != WhyPerson {
				panic("kept for " + f.Why)
			}
			out = append(out, f.Path)
		}
	}
	return out
}

// TestPersonChangeRecorded: the editor's change while the agent's step is
// open is a checkpoint marked person, in no step; before any agent was
// known, a change is nobody's in particular (no person mark).
func TestPersonChangeRecorded(t *testing.T) {
	p := newPersonT(t)
	p.write(p.editor, "early.txt", "e\n") // no agent known yet
	p.step("Edit")
	p.write(p.agent, "app.py", "agent\n")
	p.write(p.editor, "notes.txt", "person\n")
	p.write(p.agent, "notes.txt", "agent on top\n") // captured again: the agent's now
	marks := map[string][]bool{}
	for ev, err := range p.e.Log().Events(1) {
		if err != nil {
			t.Fatal(err)
		}
		var cp record.Checkpoint
		if json.Unmarshal(ev.Payload, &cp) != nil || ev.Type != "session_checkpoint" {
			continue
		}
		for _, f := range cp.Files {
			marks[f.Path] = append(marks[f.Path], cp.Person)
			if cp.Person && (cp.Step != 0 || cp.Tool != "") {
				t.Errorf("a person's checkpoint names step %d, tool %q", cp.Step, cp.Tool)
			}
		}
	}
	want := map[string][]bool{"early.txt": {false}, "app.py": {false}, "notes.txt": {true, false}}
	for path, w := range want {
		if got := marks[path]; len(got) != len(w) || (len(w) > 0 && (got[0] != w[0] || got[len(got)-1] != w[len(w)-1])) {
			t.Errorf("%s: person marks %v, want %v", path, got, w)
		}
	}
}

// TestUndoLeavesPersonAlone: undo, undo of a turn, and redo keep the
// person's changes (a file, a new directory with a file, a file beneath a
// directory the agent created) and name them; the agent's changes go.
func TestUndoLeavesPersonAlone(t *testing.T) {
	ctx := context.Background()
	for _, form := range []string{"undo", "turn", "turn-seq"} {
		t.Run(form, func(t *testing.T) {
			p := newPersonT(t)
			p.write(p.agent, "app.py", "v0\n")
			p.write(p.agent, "notes.txt", "n0\n")
			turn := p.turn()
			p.step("Edit")
			p.write(p.agent, "app.py", "agent\n")
			p.mkdir(p.agent, "gen")
			p.write(p.agent, "gen/out", "agent\n")
			p.write(p.editor, "notes.txt", "person\n")
			p.write(p.editor, "gen/mine", "person\n") // beneath the agent's new directory
			p.mkdir(p.editor, "pdir")
			p.write(p.editor, "pdir/f", "person\n")
			req := record.Request{Undo: true}
			switch form {
			case "turn":
				req.WholeTurn = true
			case "turn-seq":
				req = record.Request{Turn: turn}
			}
			dry := req
			dry.DryRun = true
			d, err := p.e.Apply(ctx, dry)
			if err != nil {
				t.Fatal(err)
			}
			res, err := p.e.Apply(ctx, req)
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range []record.RewindResult{d, res} {
				// gen, the agent's, stays too: it holds the person's file.
				if got := kept(r); len(got) != 4 || got[0] != "gen/mine" || got[1] != "notes.txt" || got[2] != "pdir" || got[3] != "pdir/f" {
					t.Errorf("kept %v, want gen/mine notes.txt pdir pdir/f", got)
				}
			}
			p.want(map[string]string{"app.py": "v0\n", "gen/out": "", "gen/mine": "person\n", "notes.txt": "person\n", "pdir/f": "person\n"})
			// Redo brings the agent's changes back, and the person's stay.
			p.write(p.editor, "notes.txt", "person again\n")
			if _, err := p.e.Apply(ctx, record.Request{Redo: true}); err != nil {
				t.Fatal(err)
			}
			p.want(map[string]string{"app.py": "agent\n", "gen/out": "agent\n", "notes.txt": "person again\n", "pdir/f": "person\n"})
		})
	}
}

// TestRewindNamesPerson: a whole rewind overwrites a person's change, as
// asked, and names it (why "outside the agents"), dry and for real.
func TestRewindNamesPerson(t *testing.T) {
	ctx := context.Background()
	p := newPersonT(t)
	p.write(p.agent, "notes.txt", "n0\n")
	s := p.step("Edit")
	p.write(p.agent, "app.py", "agent\n")
	p.write(p.editor, "notes.txt", "person\n")
	for _, dry := range []bool{true, false} {
		res, err := p.e.Apply(ctx, record.Request{Target: s, DryRun: dry})
		if err != nil {
			t.Fatal(err)
		}
		var named []string
		for _, f := range res.Foreign {
			if f.Kept || f.Why != WhyPerson || f.Comm != "vim" || f.PID != 300 {
				t.Errorf("dry %v: foreign %+v, want the person's change named as overwritten", dry, f)
			}
			named = append(named, f.Path)
		}
		if len(named) != 1 || named[0] != "notes.txt" {
			t.Errorf("dry %v: named %v, want notes.txt", dry, named)
		}
	}
	p.want(map[string]string{"notes.txt": "n0\n", "app.py": ""})
}

// TestRevertLeavesPersonAlone: a revert of the agent's step keeps a
// person's change made in its span, both in a step and in the implicit
// step after a turn; a person's change on top of the step's own is a
// conflict.
func TestRevertLeavesPersonAlone(t *testing.T) {
	ctx := context.Background()
	for _, implicit := range []bool{false, true} {
		p := newPersonT(t)
		p.write(p.agent, "app.py", "v0\n")
		var at record.Seq
		if implicit {
			p.turn()
		} else {
			p.step("Edit")
		}
		p.write(p.agent, "app.py", "agent\n")
		for ev, err := range p.e.Log().Events(1) {
			if err != nil {
				t.Fatal(err)
			}
			at = ev.Seq // the agent's capture: in the step's span
		}
		p.write(p.editor, "notes.txt", "person\n")
		res, err := p.e.Apply(ctx, record.Request{Revert: at})
		if err != nil {
			t.Fatalf("implicit %v: %v", implicit, err)
		}
		if res.Unchanged {
			t.Fatalf("implicit %v: revert changed nothing", implicit)
		}
		p.want(map[string]string{"app.py": "v0\n", "notes.txt": "person\n"})

		// The person edits the agent's file after its step: a conflict.
		p.step("Edit again")
		p.write(p.agent, "app.py", "agent 2\n")
		s2 := record.Seq(0)
		for ev, err := range p.e.Log().Events(1) {
			if err != nil {
				t.Fatal(err)
			}
			s2 = ev.Seq
		}
		p.write(p.editor, "app.py", "person on top\n")
		if _, err := p.e.Apply(ctx, record.Request{Revert: s2}); err == nil {
			t.Errorf("implicit %v: revert over the person's change to its file: no conflict", implicit)
		}
		p.want(map[string]string{"app.py": "person on top\n"})
	}
}

// TestPersonMarksSurviveReopen: the person's marks are in the snapshot and
// in a fold of the log: after a reopen, undo still leaves the change alone.
func TestPersonMarksSurviveReopen(t *testing.T) {
	ctx := context.Background()
	p := newPersonT(t)
	p.write(p.agent, "notes.txt", "n0\n")
	p.step("Edit")
	p.write(p.agent, "app.py", "agent\n")
	p.write(p.editor, "notes.txt", "person\n")
	store := p.e.opts.StoreDir
	if err := p.e.Close(); err != nil {
		t.Fatal(err)
	}
	for _, snapshot := range []bool{true, false} {
		if !snapshot {
			os.Remove(filepath.Join(store, "index.snapshot"))
		}
		root, err := os.Open(p.ws)
		if err != nil {
			t.Fatal(err)
		}
		e, err := Open(ctx, root, Options{StoreDir: store})
		if err != nil {
			t.Fatal(err)
		}
		res, err := e.Apply(ctx, record.Request{Undo: true, DryRun: true})
		e.Close()
		root.Close()
		if err != nil {
			t.Fatal(err)
		}
		if got := kept(res); len(got) != 1 || got[0] != "notes.txt" {
			t.Errorf("snapshot %v: kept %v after a reopen, want notes.txt", snapshot, got)
		}
	}
}

// TestUndoKeepingPersonCrash kills an undo that leaves a person's change
// alone at each crash point: after reopening, the undo is either not done
// at all or done whole, and the person's file is as the person left it
// either way (the intent names exactly the paths the undo restores).
func TestUndoKeepingPersonCrash(t *testing.T) {
	for _, tc := range []struct {
		point   string
		rewound bool
	}{
		{"rewind:captured", false},
		{"rewind:intent", true},
		{"rewind:half", true},
		{"rewind:write", true},
		{"rewind:applied", true},
	} {
		t.Run(tc.point, func(t *testing.T) {
			p := newPersonT(t)
			for i := range 6 {
				p.write(p.agent, "f"+strconv.Itoa(i), "old\n")
			}
			p.write(p.agent, "notes.txt", "n0\n")
			p.step("Edit")
			for i := range 6 {
				p.write(p.agent, "f"+strconv.Itoa(i), "agent\n")
			}
			p.write(p.editor, "notes.txt", "person\n")
			store := p.e.opts.StoreDir
			if err := p.e.Close(); err != nil {
				t.Fatal(err)
			}
			killedAt(t, "crash", tc.point, "ZEROFS_TEST_WS="+p.ws, "ZEROFS_TEST_FORM=undo", "ZEROFS_TEST_STORE="+store)
			root, err := os.Open(p.ws)
			if err != nil {
				t.Fatal(err)
			}
			defer root.Close()
			e, err := Open(context.Background(), root, Options{StoreDir: store, Sync: true})
			if err != nil {
				t.Fatalf("reopen after a crash at %s: %v", tc.point, err)
			}
			defer e.Close()
			want := map[string]string{"notes.txt": "person\n"}
			for i := range 6 {
				want["f"+strconv.Itoa(i)] = map[bool]string{true: "old\n", false: "agent\n"}[tc.rewound]
			}
			p.want(want)
			last, _, ok := e.LastRewind()
			if ok != tc.rewound {
				t.Fatalf("session_rewind recorded: %v, want %v", ok, tc.rewound)
			}
			if ok && (len(last.Foreign) != 1 || !last.Foreign[0].Kept || last.Foreign[0].Path != "notes.txt") {
				t.Errorf("recovered undo records foreign %+v, want notes.txt kept", last.Foreign)
			}
		})
	}
}

// TestStepByHandIsThePersons: a step a person begins by hand (`zerofs
// step`, `zerofs run`: no agent session, from outside the agents' trees)
// holds the person's changes after it, and undo takes them back; a step an
// agent's tool begins without a session does not make the person's changes
// its own.
func TestStepByHandIsThePersons(t *testing.T) {
	ctx := context.Background()
	p := newPersonT(t)
	p.write(p.agent, "notes.txt", "n0\n")
	p.step("Edit")
	p.write(p.agent, "app.py", "agent\n")
	if _, err := p.e.BeginStepAs(ctx, p.editor, "my fix", nil); err != nil {
		t.Fatal(err)
	}
	p.write(p.editor, "notes.txt", "mine\n")
	if p.e.state.HasPerson(0) {
		t.Errorf("a change in a step the person began is marked a person's change")
	}
	res, err := p.e.Apply(ctx, record.Request{Undo: true})
	if err != nil {
		t.Fatal(err)
	}
	if res.Undid == nil || res.Undid.Label != "my fix" || len(kept(res)) != 0 {
		t.Errorf("undo took back %+v, kept %v; want the person's own step", res.Undid, kept(res))
	}
	p.want(map[string]string{"notes.txt": "n0\n", "app.py": "agent\n"})

	// A step begun by the agent's tool (no session): the editor's change
	// beside it is still the person's.
	if _, err := p.e.BeginStepAs(ctx, p.agent, "zerofs step by the agent", nil); err != nil {
		t.Fatal(err)
	}
	p.write(p.agent, "app.py", "agent 2\n")
	p.write(p.editor, "notes.txt", "person\n")
	res, err = p.e.Apply(ctx, record.Request{Undo: true})
	if err != nil {
		t.Fatal(err)
	}
	if got := kept(res); len(got) != 1 || got[0] != "notes.txt" {
		t.Errorf("kept %v, want notes.txt", got)
	}
	p.want(map[string]string{"notes.txt": "person\n", "app.py": "agent\n"})
}
