package index

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/zerofs/zerofs/eventlog"
	"github.com/zerofs/zerofs/record"
)

// The event builders for the undo tests: a tool_call, a checkpoint, and a
// session_rewind with its target, its own checkpoint (0: none) and form.
type evs []record.Event

func (l evs) step(seq record.Seq) evs {
	return append(l, record.Event{Seq: seq, Type: record.TypeToolCall, Payload: json.RawMessage(`{"name":"s"}`)})
}

func (l evs) cp(seqs ...record.Seq) evs {
	for _, s := range seqs {
		b, _ := json.Marshal(record.Checkpoint{Files: []record.FileState{{Path: "a", Absent: true}}})
		l = append(l, record.Event{Seq: s, Type: record.TypeCheckpoint, Payload: b})
	}
	return l
}

// rcp is a rewind's own checkpoint (Checkpoint.Rewind).
func (l evs) rcp(seq record.Seq) evs {
	b := `{"tool":"rewind","files":[{"path":"a","absent":true,"skipped":false,"bytes":0,"mode":0}],"rewind":true}`
	return append(l, record.Event{Seq: seq, Type: record.TypeCheckpoint, Payload: json.RawMessage(b)})
}

func (l evs) turn(seq record.Seq) evs {
	return append(l, record.Event{Seq: seq, Type: record.TypeTurn, Payload: json.RawMessage(`{"prompt":"p"}`)})
}

func (l evs) rw(seq, target, cp record.Seq, form string, revertOf record.Seq) evs {
	b, _ := json.Marshal(record.RewindPayload{TargetSequence: target, CheckpointSequence: cp, Form: form, RevertOf: revertOf})
	return append(l, record.Event{Seq: seq, Type: record.TypeRewind, Payload: b})
}

// TestUndoRedoTargets: what undo and redo choose, from the marks the fold
// keeps, for each way actions, undos and redos follow each other; and the
// same after the state went through a snapshot.
func TestUndoRedoTargets(t *testing.T) {
	const none = ^record.Seq(0)
	two := func() evs { return evs{}.step(1).cp(2, 3).step(4).cp(5, 6) }
	for _, tc := range []struct {
		name       string
		log        evs
		undo, redo record.Seq // none: nothing to do
		undid      record.Seq // the step or rewind undo names
	}{
		{"empty", nil, none, none, 0},
		{"one step", evs{}.step(1).cp(2, 3), 1, none, 1},
		{"changes before any step", evs{}.cp(1, 2), 0, none, 1},
		{"empty last step", evs{}.step(1).cp(2, 3).step(4), 1, none, 1},
		{"after an undo", two().cp(7).rw(8, 4, 7, record.FormUndo, 0), 1, 6, 1},
		{"changes outside steps after a rewind", evs{}.step(1).cp(2).rw(3, 0, 0, record.FormUndo, 0).cp(4), 3, none, 4},
		// Two undos, then one redo: the next undo undoes the step the redo
		// brought back, and the next redo brings back the first undo, not
		// the redo just made.
		{"undo undo redo", two().cp(7).rw(8, 4, 7, record.FormUndo, 0).cp(9).rw(10, 1, 9, record.FormUndo, 0).cp(11).rw(12, 8, 11, record.FormRedo, 0), 1, 6, 1},
		// A new step ends the redo chain.
		{"step after undo", two().cp(7).rw(8, 4, 7, record.FormUndo, 0).step(9).cp(10), 9, none, 9},
		// A revert is an action like a step: undo takes it back, and it
		// ends the redo chain.
		{"revert after undo", two().cp(7).rw(8, 4, 7, record.FormUndo, 0).cp(9).rw(10, 0, 9, record.FormRevert, 1), 8, none, 10},
		// A step that changed nothing does not.
		{"empty step after undo", two().cp(7).rw(8, 4, 7, record.FormUndo, 0).step(9), 1, 6, 1},
		// Undo after a rewind takes the rewind back (it was the last thing
		// done), a path rewind too; a rewind that changed nothing is none.
		{"undo after a rewind", two().cp(7).rw(8, 1, 7, record.FormRewind, 0), 6, none, 8},
		{"undo after a path rewind", two().cp(7).rw(8, 1, 7, record.FormPaths, 0), 6, none, 8},
		{"undo after a rewind that changed nothing", two().rw(7, 6, 0, record.FormRewind, 0), 4, none, 4},
		// ... and the next undo goes on from before the rewind.
		// A turn taken back stacks like an undo: the next undo goes on
		// from before the turn, and redo brings the turn back.
		{"undo after a turn taken back", evs{}.step(1).cp(2).turn(3).step(4).cp(5).cp(6).rw(7, 2, 6, record.FormTurn, 0), 1, 5, 1},
		{"changes after a turn, outside any step", evs{}.step(1).cp(2).turn(3).cp(4), 3, none, 4},
		{"undo after undoing a rewind", two().cp(7).rw(8, 1, 7, record.FormRewind, 0).cp(9).rw(10, 6, 9, record.FormUndo, 0), 4, 8, 4},
		// A rewind's own checkpoint, marked as one, groups as before.
		{"marked: undo after a rewind", two().rcp(7).rw(8, 1, 7, record.FormRewind, 0), 6, none, 8},
		{"marked: after an undo", two().rcp(7).rw(8, 4, 7, record.FormUndo, 0), 1, 6, 1},
		// One that a failed rewind left (rolled back, no session_rewind)
		// makes no step one with changes: undo passes over the empty step
		// open then (issue 27), and after changes in it undoes it.
		{"rolled-back rewind in an empty step", evs{}.step(1).cp(2).step(3).rcp(4), 1, none, 1},
		{"rolled-back rewind, then changes", evs{}.step(1).cp(2).step(3).rcp(4).cp(5), 4, none, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := NewState()
			for _, ev := range tc.log {
				if err := s.Add(ev); err != nil {
					t.Fatal(err)
				}
			}
			check := func(s *State, what string) {
				u, w, ok := s.UndoTarget()
				switch {
				case tc.undo == none && ok:
					t.Errorf("%s: undo: got %d (%+v), want nothing to undo", what, u, w)
				case tc.undo != none && (!ok || u != tc.undo || w.Sequence != tc.undid):
					t.Errorf("%s: undo: got %d of %+v (%v), want %d of %d", what, u, w, ok, tc.undo, tc.undid)
				}
				r, _, ok := s.RedoTarget()
				switch {
				case tc.redo == none && ok:
					t.Errorf("%s: redo: got %d, want nothing to redo", what, r)
				case tc.redo != none && (!ok || r != tc.redo):
					t.Errorf("%s: redo: got %d (%v), want %d", what, r, ok, tc.redo)
				}
			}
			check(s, "folded")
			dir := t.TempDir()
			head := record.Seq(0)
			if n := len(tc.log); n > 0 {
				head = tc.log[n-1].Seq
			}
			if err := WriteSnapshot(dir, eventlog.Resume{Head: head}, s); err != nil {
				t.Fatal(err)
			}
			s2, _, err := ReadSnapshot(dir)
			if err != nil {
				t.Fatal(err)
			}
			check(s2, "from a snapshot")
		})
	}
}

// TestFormlessRewindRefused: a session_rewind with no form is from before
// the store-format baseline (every rewind since records its form); the
// fold refuses it, naming the line, rather than guess what it was.
func TestFormlessRewindRefused(t *testing.T) {
	s := NewState()
	for _, ev := range (evs{}).step(1).cp(2, 3).rw(4, 0, 3, record.FormUndo, 0) {
		if err := s.Add(ev); err != nil {
			t.Fatalf("the baseline: %v", err)
		}
	}
	err := s.Add(evs{}.cp(5).rw(6, 4, 5, "", 0)[1])
	var be *record.BaselineError
	if !errors.As(err, &be) || !errors.Is(err, record.ErrBeforeBaseline) || be.Line != 6 || !strings.Contains(err.Error(), "line 6") || !strings.Contains(err.Error(), `no "form"`) {
		t.Fatalf("a form-less session_rewind: got %v, want a *record.BaselineError naming line 6", err)
	}
}
