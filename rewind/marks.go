package rewind

import (
	"encoding/json"
	"sort"

	"github.com/zerofs/zerofs/eventlog"
)

// markKind is what an event does to the grouping of checkpoints into steps.
type markKind uint8

const (
	// markStep: a tool_call; a step begins.
	markStep markKind = iota
	// markRewindCheckpoint: a rewind's own checkpoint; the rewind's block
	// begins (it is known only from the session_rewind that follows).
	markRewindCheckpoint
	// markRewind: a session_rewind; the step ends, and checkpoints after it
	// belong to an implicit step until the next tool_call.
	markRewind
)

// mark is one step boundary. The marks follow the grouping `zerofs log`
// shows: a gc and a reopen of the store are not boundaries.
type mark struct {
	seq     Seq
	kind    markKind
	label   string
	session string // the agent's session id ("agentSession" in the tool_call)
}

// markLocked notes the boundary ev makes, if any; the caller holds capMu or
// is single-threaded.
func (e *Engine) markLocked(ev eventlog.Event) {
	switch ev.Type {
	case eventlog.TypeToolCall:
		var p struct {
			Name         string `json:"name"`
			AgentSession string `json:"agentSession"`
		}
		json.Unmarshal(ev.Payload, &p)
		e.insertMark(mark{seq: ev.Seq, kind: markStep, label: p.Name, session: p.AgentSession})
	case eventlog.TypeRewind:
		var p RewindPayload
		json.Unmarshal(ev.Payload, &p)
		if p.CheckpointSequence > 0 && p.CheckpointSequence < ev.Seq {
			e.insertMark(mark{seq: p.CheckpointSequence, kind: markRewindCheckpoint})
		}
		e.insertMark(mark{seq: ev.Seq, kind: markRewind})
	}
}

// insertMark keeps marks sorted (they arrive in order, except a rewind's
// checkpoint, which is learnt after it).
func (e *Engine) insertMark(m mark) {
	i := sort.Search(len(e.marks), func(i int) bool { return e.marks[i].seq >= m.seq })
	if i < len(e.marks) && e.marks[i].seq == m.seq {
		e.marks[i] = m
		return
	}
	e.marks = append(e.marks, mark{})
	copy(e.marks[i+1:], e.marks[i:])
	e.marks[i] = m
}

// span is one block of the log: a step, or a rewind with its checkpoint.
// The state at before is the workspace just before it, the state at end
// just after it.
type span struct {
	before, end Seq
	// step is the tool_call that began it; nil for an implicit step (changes
	// made before any step, or after a rewind) and for a rewind.
	step *mark
	// rewind: the block is a rewind (reverting it undoes the rewind).
	rewind bool
}

// spanOf is the block holding sequence s (1 <= s <= head); the caller
// holds wsMu, so no event is appended meanwhile.
func (e *Engine) spanOf(s Seq) span {
	e.capMu.Lock()
	marks := e.marks
	e.capMu.Unlock()
	i := sort.Search(len(marks), func(i int) bool { return marks[i].seq > s }) - 1
	var sp span
	next := i + 1
	switch {
	case i < 0:
		sp.before = 0
	case marks[i].kind == markStep:
		m := marks[i]
		sp.before, sp.step = m.seq, &m
	case marks[i].kind == markRewindCheckpoint:
		sp.before, sp.rewind = marks[i].seq-1, true
		next = i + 2 // past the rewind event that owns the checkpoint
	case s == marks[i].seq && i > 0 && marks[i-1].kind == markRewindCheckpoint:
		sp.before, sp.rewind = marks[i-1].seq-1, true
	case s == marks[i].seq:
		// A rewind that changed nothing: there is nothing to revert.
		return span{before: s, end: s, rewind: true}
	default: // an implicit step after a rewind
		sp.before = marks[i].seq
	}
	sp.end = e.Head()
	if next < len(marks) {
		sp.end = marks[next].seq - 1
	}
	return sp
}

// markAt is the boundary that began the block holding checkpoint s, for
// telling whose change s recorded: ok is false for an implicit step.
func (e *Engine) markAt(s Seq) (mark, bool) {
	e.capMu.Lock()
	defer e.capMu.Unlock()
	i := sort.Search(len(e.marks), func(i int) bool { return e.marks[i].seq > s }) - 1
	if i < 0 || e.marks[i].kind == markRewind {
		return mark{}, false
	}
	return e.marks[i], true
}

// hasSteps reports whether any tool_call was ever written: only then is
// there a difference between the agent's steps and changes between them.
func (e *Engine) hasSteps() bool {
	e.capMu.Lock()
	defer e.capMu.Unlock()
	for _, m := range e.marks {
		if m.kind == markStep {
			return true
		}
	}
	return false
}

// latestSession is the agent session of the newest step after t, "" if no
// step after t names one.
func (e *Engine) latestSession(t Seq) string {
	e.capMu.Lock()
	defer e.capMu.Unlock()
	for i := len(e.marks) - 1; i >= 0 && e.marks[i].seq > t; i-- {
		if e.marks[i].kind == markStep && e.marks[i].session != "" {
			return e.marks[i].session
		}
	}
	return ""
}
