package record

import "time"

// Which events form a step (SPEC, Words): a tool_call begins a step; a
// rewind or a turn ends it, and checkpoints after either, before the next
// tool_call, form an implicit step; the checkpoints a rewind writes for
// itself (from its checkpointSequence up to its event) are the rewind's; a
// gc ends nothing. The engine folds a log into its marks (rewind.StepMarks);
// readers that show steps group with them rather than a grouping of their
// own.

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
	// taken back), which takes the actions after Target out of effect
	// instead of being one itself.
	Target Seq
	Form   string
	Back   bool
}
