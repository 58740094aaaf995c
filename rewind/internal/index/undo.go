package index

import "github.com/zerofs/zerofs/record"

// Undo and redo stack like an editor's, and the engine answers both from
// the marks it keeps as events are folded, never by reading the log: what
// an undo takes back is found by walking the marks back from the newest,
// which stops at the first action in effect (a few marks, however long the
// history), and the undos a redo can take back are a stack kept by the
// fold (and saved in the snapshot).
//
// An action is what undo takes back: a step that changed something (or
// changes made outside any step), or a rewind, a path rewind or a revert
// that changed something: it was the last thing done, so undo after it
// takes it back (as `jj undo` does). Undo rewinds the whole workspace to
// just before the newest action still in effect. An undo (or a redo) puts
// the whole workspace back at its target, so the actions after its target
// are not in effect any more and the search goes on from the target:
// repeated undos walk back one action at a time, and steps that changed
// nothing (read-only tool calls) are passed over. Taking a turn back (form
// "turn": the whole workspace to just before the turn) is such an undo
// too.
//
// Redo undoes the newest undo not yet redone: each undo pushes the state
// before it onto the stack, a redo (a rewind to the state on top) pops it,
// and an action empties it (a new step ends the redo chain). Three undos
// and three redos therefore return exactly where they started.

// RedoEntry is one undo not yet redone: the state before it, and what it
// took back.
type RedoEntry struct {
	State record.Seq      `json:"s"`
	Step  *record.StepRef `json:"step,omitempty"`
}

// endBlock is called at every boundary (a tool_call or a session_rewind,
// after disown): an open block that changed something was an action, which
// ends the redo chain. The caller holds s.mu.
func (s *State) endBlock() {
	if s.openChanged() {
		s.redo = nil
	}
}

// openChanged reports whether the block open now (since the last mark, or
// since the start) changed something.
func (s *State) openChanged() bool {
	if n := len(s.marks); n > 0 {
		return s.marks[n-1].First != 0
	}
	return s.first0 != 0
}

// rewound keeps the redo stack at a session_rewind at seq with its own
// checkpoint at cp (0: it changed nothing).
func (s *State) rewound(seq, cp record.Seq, p record.RewindPayload, back bool) {
	if !back {
		if cp != 0 {
			s.redo = nil // an action
		}
		return
	}
	start := seq
	if cp != 0 {
		start = cp
	}
	n := len(s.redo)
	if p.Form == record.FormRedo {
		if n > 0 {
			s.redo = s.redo[:n-1]
		}
		return
	}
	s.redo = append(s.redo, RedoEntry{State: start - 1, Step: p.Step})
}

// UndoTarget is where an undo rewinds to now (the state just before the
// newest action in effect) and that action; ok is false when no action is
// in effect. The caller keeps events from being folded meanwhile.
func (s *State) UndoTarget() (target record.Seq, what record.StepRef, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	limit := ^record.Seq(0) // the actions at or before limit are in effect
	for i := len(s.marks) - 1; i >= 0; i-- {
		m := s.marks[i]
		switch m.Kind {
		case record.MarkStep:
			if m.First != 0 && m.First <= limit {
				return m.First - 1, record.StepRef{Kind: "step", Sequence: m.Seq, Label: m.Label}, true
			}
		case record.MarkTurn:
			if m.First != 0 && m.First <= limit {
				// Changes made after the turn began, before its first step.
				return m.First - 1, record.StepRef{Kind: "step", Sequence: m.First, Implicit: true}, true
			}
		case record.MarkRewind:
			if m.First != 0 && m.First <= limit {
				// Changes made after the rewind, outside any step.
				return m.First - 1, record.StepRef{Kind: "step", Sequence: m.First, Implicit: true}, true
			}
			start, cp := m.Seq, record.Seq(0)
			if i > 0 && s.marks[i-1].Kind == record.MarkRewindCheckpoint {
				cp = s.marks[i-1].Seq
				start = cp
			}
			switch {
			case m.Back && start <= limit:
				limit = m.Target
			case !m.Back && cp != 0 && cp <= limit:
				return cp - 1, record.StepRef{Kind: "rewind", Sequence: m.Seq, Label: m.Form}, true
			}
		}
	}
	if s.first0 != 0 && s.first0 <= limit {
		return s.first0 - 1, record.StepRef{Kind: "step", Sequence: s.first0, Implicit: true}, true
	}
	return 0, record.StepRef{}, false
}

// RedoTarget is where a redo rewinds to now and what it brings back (nil
// when the undo did not record it); ok is false when no undo waits to be
// redone.
func (s *State) RedoTarget() (target record.Seq, what *record.StepRef, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := len(s.redo)
	if n == 0 || s.openChanged() {
		return 0, nil, false
	}
	return s.redo[n-1].State, s.redo[n-1].Step, true
}
