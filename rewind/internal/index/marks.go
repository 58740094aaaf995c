package index

import (
	"encoding/json"
	"iter"
	"sort"
	"time"

	"github.com/zerofs/zerofs/eventlog"
)

// MarkKind is what an event does to the grouping of checkpoints into steps.
type MarkKind uint8

const (
	// MarkStep: a tool_call; a step begins.
	MarkStep MarkKind = iota
	// MarkRewindCheckpoint: a rewind's own checkpoint; the rewind's block
	// begins (it is known only from the session_rewind that follows).
	MarkRewindCheckpoint
	// MarkRewind: a session_rewind; the step ends, and checkpoints after it
	// belong to an implicit step until the next tool_call.
	MarkRewind
	// MarkTurn: a turn event (a person's prompt); like a rewind it ends the
	// step, so changes before the turn's first tool_call form an implicit
	// step of their own.
	MarkTurn
)

// Mark is one step boundary. The marks follow the grouping `zerofs log`
// shows: a gc and a reopen of the store are not boundaries.
type Mark struct {
	Seq     Seq
	Kind    MarkKind
	Label   string
	Session string    // the agent's session id ("agentSession" in the tool_call or turn)
	At      time.Time // when the step began (MarkStep only)
	// First is the first checkpoint of the block the mark begins (0 while
	// it has none): for a MarkStep its step's, for a MarkRewind or a
	// MarkTurn the implicit step's after it, for a MarkRewindCheckpoint its
	// own seq.
	First Seq
	// Target, Form and Back describe a MarkRewind: its target, its form,
	// and whether it put the whole workspace back (an undo, a redo, a turn
	// taken back, or a whole rewind written before forms were recorded),
	// which takes the
	// actions after Target out of effect instead of being one itself.
	Target Seq
	Form   string
	Back   bool
}

// markEvent notes the boundary ev makes, if any, and keeps the redo stack
// (undo.go); the caller holds s.mu. rp is the payload of a session_rewind.
func (s *State) markEvent(ev eventlog.Event, rp *RewindPayload) {
	switch ev.Type {
	case eventlog.TypeToolCall:
		var p struct {
			Name         string `json:"name"`
			AgentSession string `json:"agentSession"`
		}
		json.Unmarshal(ev.Payload, &p)
		s.endBlock()
		s.insertMark(Mark{Seq: ev.Seq, Kind: MarkStep, Label: p.Name, Session: p.AgentSession, At: ev.CreatedAt})
	case eventlog.TypeRewind:
		cp := Seq(0)
		if rp.CheckpointSequence > 0 && rp.CheckpointSequence < ev.Seq {
			cp = rp.CheckpointSequence
			// The rewind's own checkpoints were folded into the block open
			// before it: they are the rewind's.
			s.disown(cp)
		}
		s.endBlock()
		if cp != 0 {
			s.insertMark(Mark{Seq: cp, Kind: MarkRewindCheckpoint, First: cp})
		}
		back := rp.Form == FormUndo || rp.Form == FormRedo || rp.Form == FormTurn || (rp.Form == "" && len(rp.Paths) == 0 && rp.RevertOf == 0)
		s.insertMark(Mark{Seq: ev.Seq, Kind: MarkRewind, Target: rp.TargetSequence, Form: rp.Form, Back: back})
		s.rewound(ev.Seq, cp, *rp, back)
	case eventlog.TypeTurn:
		var p struct {
			AgentSession string `json:"agentSession"`
		}
		json.Unmarshal(ev.Payload, &p)
		s.endBlock()
		s.insertMark(Mark{Seq: ev.Seq, Kind: MarkTurn, Session: p.AgentSession, At: ev.CreatedAt})
	}
}

// noteCheckpoint notes a checkpoint at seq in the open block, or in the
// earlier step named by step (a checkpoint of another session's step), or,
// for a person's change, in no block: it is nobody's action to undo. The
// caller holds s.mu.
func (s *State) noteCheckpoint(seq, step Seq, person bool) {
	if person {
		s.person = append(s.person, seq)
		return
	}
	if step != 0 {
		i := sort.Search(len(s.marks), func(i int) bool { return s.marks[i].Seq >= step })
		if i < len(s.marks) && s.marks[i].Seq == step {
			if s.marks[i].First == 0 {
				s.marks[i].First = seq
			}
			return
		}
	}
	if n := len(s.marks); n > 0 {
		if s.marks[n-1].First == 0 {
			s.marks[n-1].First = seq
		}
	} else if s.first0 == 0 {
		s.first0 = seq
	}
}

// disown gives the checkpoints from cp on back to the rewind that wrote
// them: the open block's first checkpoint is not its own if it is one.
func (s *State) disown(cp Seq) {
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
func GroupMarks(events iter.Seq2[eventlog.Event, error]) ([]Mark, error) {
	var s State
	for ev, err := range events {
		if err != nil {
			return nil, err
		}
		v, err := DecodeEvent(LogName, ev)
		if err != nil {
			continue
		}
		switch p := v.(type) {
		case Checkpoint:
			if !p.Rewind {
				s.noteCheckpoint(ev.Seq, p.Step, p.Person)
			}
		case RewindPayload:
			s.markEvent(ev, &p)
		case PrunedPayload, ThinnedPayload:
			// A gc changes no file and ends no step.
		default:
			s.markEvent(ev, nil)
		}
	}
	return s.marks, nil
}

// insertMark keeps marks sorted (they arrive in order, except a rewind's
// checkpoint, which is learnt after it).
func (s *State) insertMark(m Mark) {
	i := sort.Search(len(s.marks), func(i int) bool { return s.marks[i].Seq >= m.Seq })
	if i < len(s.marks) && s.marks[i].Seq == m.Seq {
		s.marks[i] = m
		return
	}
	s.marks = append(s.marks, Mark{})
	copy(s.marks[i+1:], s.marks[i:])
	s.marks[i] = m
}

// Span is one block of the log: a step, or a rewind with its checkpoint.
// The state at Before is the workspace just before it, the state at End
// just after it.
type Span struct {
	Before, End Seq
	// Step is the tool_call that began it; nil for an implicit step
	// (changes made before any step, or after a rewind) and for a rewind.
	Step *Mark
	// Rewind: the block is a rewind (reverting it undoes the rewind).
	Rewind bool
	// Ref names the block as a report does: the step (its tool_call, or
	// an implicit step's first checkpoint) or the rewind.
	Ref StepRef
}

// SpanOf is the block holding sequence seq (1 <= seq <= head, the log's
// head); the caller keeps events from being appended meanwhile.
func (s *State) SpanOf(seq, head Seq) Span {
	s.mu.Lock()
	marks, first0 := s.marks, s.first0
	s.mu.Unlock()
	i := sort.Search(len(marks), func(i int) bool { return marks[i].Seq > seq }) - 1
	var sp Span
	next := i + 1
	switch {
	case i < 0:
		sp.Before = 0
		sp.Ref = StepRef{Kind: "step", Sequence: first0, Implicit: true}
	case marks[i].Kind == MarkStep:
		m := marks[i]
		sp.Before, sp.Step = m.Seq, &m
		sp.Ref = StepRef{Kind: "step", Sequence: m.Seq, Label: m.Label}
	case marks[i].Kind == MarkTurn:
		// An implicit step after a turn (changes made before its first
		// tool_call).
		sp.Before = marks[i].Seq
		sp.Ref = StepRef{Kind: "step", Sequence: marks[i].First, Implicit: true}
	case marks[i].Kind == MarkRewindCheckpoint:
		sp.Before, sp.Rewind = marks[i].Seq-1, true
		next = i + 2 // past the rewind event that owns the checkpoint
		if i+1 < len(marks) {
			sp.Ref = StepRef{Kind: "rewind", Sequence: marks[i+1].Seq, Label: marks[i+1].Form}
		}
	case seq == marks[i].Seq && i > 0 && marks[i-1].Kind == MarkRewindCheckpoint:
		sp.Before, sp.Rewind = marks[i-1].Seq-1, true
		sp.Ref = StepRef{Kind: "rewind", Sequence: marks[i].Seq, Label: marks[i].Form}
	case seq == marks[i].Seq:
		// A rewind that changed nothing: there is nothing to revert.
		return Span{Before: seq, End: seq, Rewind: true, Ref: StepRef{Kind: "rewind", Sequence: seq, Label: marks[i].Form}}
	default: // an implicit step after a rewind
		sp.Before = marks[i].Seq
		sp.Ref = StepRef{Kind: "step", Sequence: marks[i].First, Implicit: true}
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
func (s *State) MarkAt(seq Seq) (Mark, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	i := sort.Search(len(s.marks), func(i int) bool { return s.marks[i].Seq > seq }) - 1
	if i < 0 || s.marks[i].Kind == MarkRewind || s.marks[i].Kind == MarkTurn {
		return Mark{}, false
	}
	return s.marks[i], true
}

// HasSteps reports whether any tool_call was ever written: only then is
// there a difference between the agent's steps and changes between them.
func (s *State) HasSteps() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, m := range s.marks {
		if m.Kind == MarkStep {
			return true
		}
	}
	return false
}

// TurnAt is the turn event at seq; ok is false when seq is not one.
func (s *State) TurnAt(seq Seq) (m Mark, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	i := sort.Search(len(s.marks), func(i int) bool { return s.marks[i].Seq >= seq })
	if i < len(s.marks) && s.marks[i].Seq == seq && s.marks[i].Kind == MarkTurn {
		return s.marks[i], true
	}
	return Mark{}, false
}

// TurnOf is the turn the step what belongs to (a StepRef of kind "step",
// as UndoTarget names it), as `zerofs log` groups steps under turns: for a
// step whose tool_call names an agent session that began a turn before
// it, that session's last such turn; otherwise the last turn before it,
// unless that turn names another agent session (a session that began no
// turn never takes another's). ok is false when it came before any turn
// it can belong to.
func (s *State) TurnOf(what StepRef) (turn Mark, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	i := sort.Search(len(s.marks), func(i int) bool { return s.marks[i].Seq > what.Sequence }) - 1
	session := ""
	if i >= 0 && s.marks[i].Seq == what.Sequence && s.marks[i].Kind == MarkStep {
		session = s.marks[i].Session
		i--
	}
	for ; i >= 0; i-- {
		m := s.marks[i]
		if m.Kind != MarkTurn {
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
		return Mark{}, false
	}
	return turn, ok
}

// LatestSession is the agent session of the newest step after t, "" if no
// step after t names one.
func (s *State) LatestSession(t Seq) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := len(s.marks) - 1; i >= 0 && s.marks[i].Seq > t; i-- {
		if s.marks[i].Kind == MarkStep && s.marks[i].Session != "" {
			return s.marks[i].Session
		}
	}
	return ""
}

// Steps are the tool_calls before seq before, oldest first, with their
// times (what a thin plans its days from).
func (s *State) Steps(before Seq) []StepStart {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []StepStart
	for _, m := range s.marks {
		if m.Seq >= before {
			break
		}
		if m.Kind == MarkStep {
			out = append(out, StepStart{seq: m.Seq, at: m.At})
		}
	}
	return out
}

// Marks is a copy of every mark, in order (for tests comparing two folds).
func (s *State) Marks() []Mark {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Mark(nil), s.marks...)
}

// StepAtOrAfter is when the first step at or after seq began (a tool_call
// at seq itself counts): from then on every change through the mount was
// captured in a step after seq. ok is false when no step began since.
func (s *State) StepAtOrAfter(seq Seq) (at time.Time, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	i := sort.Search(len(s.marks), func(i int) bool { return s.marks[i].Seq >= seq })
	for ; i < len(s.marks); i++ {
		if m := s.marks[i]; m.Kind == MarkStep && !m.At.IsZero() {
			return m.At, true
		}
	}
	return time.Time{}, false
}
