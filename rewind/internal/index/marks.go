package index

import (
	"encoding/json"
	"iter"
	"slices"
	"sort"
	"time"

	"github.com/zerofs/zerofs/record"
)

// markEvent notes the boundary ev makes, if any, and keeps the redo stack
// (undo.go); the caller holds s.mu. rp is the payload of a session_rewind.
func (s *State) markEvent(ev record.Event, rp *record.RewindPayload) {
	switch ev.Type {
	case record.TypeToolCall:
		var p record.ToolCallPayload
		json.Unmarshal(ev.Payload, &p)
		s.endBlock()
		s.insertMark(record.Mark{Seq: ev.Seq, Kind: record.MarkStep, Label: p.Name, Session: p.AgentSession, At: ev.CreatedAt})
	case record.TypeRewind:
		cp := record.Seq(0)
		if rp.CheckpointSequence > 0 && rp.CheckpointSequence < ev.Seq {
			cp = rp.CheckpointSequence
			// The rewind's own checkpoints were folded into the block open
			// before it: they are the rewind's.
			s.disown(cp)
		}
		s.endBlock()
		if cp != 0 {
			s.insertMark(record.Mark{Seq: cp, Kind: record.MarkRewindCheckpoint, First: cp})
		}
		back := rp.Form == record.FormUndo || rp.Form == record.FormRedo || rp.Form == record.FormTurn
		s.insertMark(record.Mark{Seq: ev.Seq, Kind: record.MarkRewind, Target: rp.TargetSequence, Form: rp.Form, Back: back})
		s.rewound(ev.Seq, cp, *rp, back)
	case record.TypeTurn:
		var p record.TurnPayload
		json.Unmarshal(ev.Payload, &p)
		s.endBlock()
		s.insertMark(record.Mark{Seq: ev.Seq, Kind: record.MarkTurn, Session: p.AgentSession, At: ev.CreatedAt})
	}
}

// noteCheckpoint notes a checkpoint at seq in the open block, or in the
// earlier step named by step (a checkpoint of another session's step), or,
// for a person's change, in no block: it is nobody's action to undo. The
// caller holds s.mu.
//
// Two captures running at once append their checkpoints in one order and
// may fold them in the other (the engine folds after Append returns), so
// the fold must not depend on it: a block's first checkpoint is the lowest
// folded into it, and the person list stays sorted, as a fold of the log
// in order makes them. Otherwise the live state says a step began at its
// second checkpoint (an undo of it would leave the first change in place)
// until the next mount rebuilds it, and a snapshot keeps the live value.
func (s *State) noteCheckpoint(seq, step record.Seq, person bool) {
	if person {
		i, found := slices.BinarySearch(s.person, seq)
		if !found {
			s.person = slices.Insert(s.person, i, seq)
		}
		return
	}
	if step != 0 {
		i := sort.Search(len(s.marks), func(i int) bool { return s.marks[i].Seq >= step })
		if i < len(s.marks) && s.marks[i].Seq == step {
			lowerFirst(&s.marks[i].First, seq)
			return
		}
	}
	if n := len(s.marks); n > 0 {
		lowerFirst(&s.marks[n-1].First, seq)
	} else {
		lowerFirst(&s.first0, seq)
	}
}

// lowerFirst makes *first seq when it has none yet or a later one.
func lowerFirst(first *record.Seq, seq record.Seq) {
	if *first == 0 || seq < *first {
		*first = seq
	}
}

// disown gives the checkpoints from cp on back to the rewind that wrote
// them: the open block's first checkpoint is not its own if it is one.
func (s *State) disown(cp record.Seq) {
	if n := len(s.marks); n > 0 {
		if s.marks[n-1].First >= cp {
			s.marks[n-1].First = 0
		}
	} else if s.first0 >= cp {
		s.first0 = 0
	}
}

// GroupMarks folds a log's events, in order, into its marks alone, with
// the engine's own fold (markEvent, noteCheckpoint and disown, as State.Add
// calls them) but no index of before-states: the one grouping of events
// into steps, for a reader that shows the steps (history's log). A
// damaged event folds in nothing, as in State.Add.
func GroupMarks(events iter.Seq2[record.Event, error]) ([]record.Mark, error) {
	var s State
	for ev, err := range events {
		if err != nil {
			return nil, err
		}
		v, err := record.DecodeEvent(record.LogName, ev)
		if err != nil {
			continue
		}
		switch p := v.(type) {
		case record.Checkpoint:
			if !p.Rewind {
				s.noteCheckpoint(ev.Seq, p.Step, p.Person)
			}
		case record.RewindPayload:
			s.markEvent(ev, &p)
		case record.PrunedPayload, record.ThinnedPayload:
			// A gc changes no file and ends no step.
		default:
			s.markEvent(ev, nil)
		}
	}
	return s.marks, nil
}

// insertMark keeps marks sorted (they arrive in order, except a rewind's
// checkpoint, which is learnt after it).
func (s *State) insertMark(m record.Mark) {
	i := sort.Search(len(s.marks), func(i int) bool { return s.marks[i].Seq >= m.Seq })
	if i < len(s.marks) && s.marks[i].Seq == m.Seq {
		s.marks[i] = m
		return
	}
	s.marks = append(s.marks, record.Mark{})
	copy(s.marks[i+1:], s.marks[i:])
	s.marks[i] = m
}

// Span is one block of the log: a step, or a rewind with its checkpoint.
// The state at Before is the workspace just before it, the state at End
// just after it.
type Span struct {
	Before, End record.Seq
	// Step is the tool_call that began it; nil for an implicit step
	// (changes made before any step, or after a rewind) and for a rewind.
	Step *record.Mark
	// Rewind: the block is a rewind (reverting it undoes the rewind).
	Rewind bool
	// Ref names the block as a report does: the step (its tool_call, or
	// an implicit step's first checkpoint) or the rewind.
	Ref record.StepRef
}

// SpanOf is the block holding sequence seq (1 <= seq <= head, the log's
// head); the caller keeps events from being appended meanwhile.
func (s *State) SpanOf(seq, head record.Seq) Span {
	s.mu.Lock()
	marks, first0 := s.marks, s.first0
	s.mu.Unlock()
	i := sort.Search(len(marks), func(i int) bool { return marks[i].Seq > seq }) - 1
	var sp Span
	next := i + 1
	switch {
	case i < 0:
		sp.Before = 0
		sp.Ref = record.StepRef{Kind: "step", Sequence: first0, Implicit: true}
	case marks[i].Kind == record.MarkStep:
		m := marks[i]
		sp.Before, sp.Step = m.Seq, &m
		sp.Ref = record.StepRef{Kind: "step", Sequence: m.Seq, Label: m.Label}
	case marks[i].Kind == record.MarkTurn:
		// An implicit step after a turn (changes made before its first
		// tool_call).
		sp.Before = marks[i].Seq
		sp.Ref = record.StepRef{Kind: "step", Sequence: marks[i].First, Implicit: true}
	case marks[i].Kind == record.MarkRewindCheckpoint:
		sp.Before, sp.Rewind = marks[i].Seq-1, true
		next = i + 2 // past the rewind event that owns the checkpoint
		if i+1 < len(marks) {
			sp.Ref = record.StepRef{Kind: "rewind", Sequence: marks[i+1].Seq, Label: marks[i+1].Form}
		}
	case seq == marks[i].Seq && i > 0 && marks[i-1].Kind == record.MarkRewindCheckpoint:
		sp.Before, sp.Rewind = marks[i-1].Seq-1, true
		sp.Ref = record.StepRef{Kind: "rewind", Sequence: marks[i].Seq, Label: marks[i].Form}
	case seq == marks[i].Seq:
		// A rewind that changed nothing: there is nothing to revert.
		return Span{Before: seq, End: seq, Rewind: true, Ref: record.StepRef{Kind: "rewind", Sequence: seq, Label: marks[i].Form}}
	default: // an implicit step after a rewind
		sp.Before = marks[i].Seq
		sp.Ref = record.StepRef{Kind: "step", Sequence: marks[i].First, Implicit: true}
	}
	if sp.Ref.Implicit && sp.Ref.Sequence == 0 {
		sp.Ref.Sequence = seq // no checkpoint yet: the sequence asked for
	}
	sp.End = head
	if next < len(marks) {
		sp.End = marks[next].Seq - 1
	}
	return sp
}

// MarkAt is the boundary that began the block holding checkpoint seq, for
// telling whose change seq recorded: ok is false for an implicit step.
func (s *State) MarkAt(seq record.Seq) (record.Mark, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	i := sort.Search(len(s.marks), func(i int) bool { return s.marks[i].Seq > seq }) - 1
	if i < 0 || s.marks[i].Kind == record.MarkRewind || s.marks[i].Kind == record.MarkTurn {
		return record.Mark{}, false
	}
	return s.marks[i], true
}

// HasSteps reports whether any tool_call was ever written: only then is
// there a difference between the agent's steps and changes between them.
func (s *State) HasSteps() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, m := range s.marks {
		if m.Kind == record.MarkStep {
			return true
		}
	}
	return false
}

// TurnAt is the turn event at seq; ok is false when seq is not one.
func (s *State) TurnAt(seq record.Seq) (m record.Mark, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	i := sort.Search(len(s.marks), func(i int) bool { return s.marks[i].Seq >= seq })
	if i < len(s.marks) && s.marks[i].Seq == seq && s.marks[i].Kind == record.MarkTurn {
		return s.marks[i], true
	}
	return record.Mark{}, false
}

// TurnOf is the turn the step what belongs to (a StepRef of kind "step",
// as UndoTarget names it), as `zerofs log` groups steps under turns: for a
// step whose tool_call names an agent session that began a turn before
// it, that session's last such turn; otherwise the last turn before it,
// unless that turn names another agent session (a session that began no
// turn never takes another's). ok is false when it came before any turn
// it can belong to.
func (s *State) TurnOf(what record.StepRef) (turn record.Mark, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	i := sort.Search(len(s.marks), func(i int) bool { return s.marks[i].Seq > what.Sequence }) - 1
	session := ""
	if i >= 0 && s.marks[i].Seq == what.Sequence && s.marks[i].Kind == record.MarkStep {
		session = s.marks[i].Session
		i--
	}
	for ; i >= 0; i-- {
		m := s.marks[i]
		if m.Kind != record.MarkTurn {
			continue
		}
		if !ok {
			turn, ok = m, true
			if session == "" {
				return turn, true
			}
		}
		if m.Session == session {
			return m, true
		}
	}
	if ok && turn.Session != "" && turn.Session != session {
		return record.Mark{}, false
	}
	return turn, ok
}

// LatestSession is the agent session of the newest step after t, "" if no
// step after t names one.
func (s *State) LatestSession(t record.Seq) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := len(s.marks) - 1; i >= 0 && s.marks[i].Seq > t; i-- {
		if s.marks[i].Kind == record.MarkStep && s.marks[i].Session != "" {
			return s.marks[i].Session
		}
	}
	return ""
}

// Steps are the tool_calls before seq before, oldest first, with their
// times (what a thin plans its days from).
func (s *State) Steps(before record.Seq) []StepStart {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []StepStart
	for _, m := range s.marks {
		if m.Seq >= before {
			break
		}
		if m.Kind == record.MarkStep {
			out = append(out, StepStart{seq: m.Seq, at: m.At})
		}
	}
	return out
}

// Marks is a copy of every mark, in order (for tests comparing two folds).
func (s *State) Marks() []record.Mark {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]record.Mark(nil), s.marks...)
}

// StepAtOrAfter is when the first step at or after seq began (a tool_call
// at seq itself counts): from then on every change through the mount was
// captured in a step after seq. ok is false when no step began since.
func (s *State) StepAtOrAfter(seq record.Seq) (at time.Time, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	i := sort.Search(len(s.marks), func(i int) bool { return s.marks[i].Seq >= seq })
	for ; i < len(s.marks); i++ {
		if m := s.marks[i]; m.Kind == record.MarkStep && !m.At.IsZero() {
			return m.At, true
		}
	}
	return time.Time{}, false
}
