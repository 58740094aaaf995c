package record

// What a session_rewind records: its report, its form, and what it acted on.

// Report is what a rewind did.
type Report struct {
	Restored int      `json:"restored"`
	Deleted  int      `json:"deleted"`
	Skipped  []string `json:"skipped"`
}

// RewindPayload is the payload of a session_rewind event. CheckpointSequence
// is the checkpoint that holds the before-state of everything the rewind
// changed (0 when it changed nothing): rewinding to CheckpointSequence-1
// undoes the rewind.
//
// A path rewind records its Paths (the state at TargetSequence was restored
// for them only); a revert records RevertOf, the step it reverted (its
// TargetSequence is the state just before that step, restored for the
// paths the step changed), and Force when it overwrote later changes.
// Foreign lists the paths whose changes from outside the agent's steps it
// overwrote.
type RewindPayload struct {
	TargetSequence     Seq       `json:"targetSequence"`
	CheckpointSequence Seq       `json:"checkpointSequence,omitempty"`
	Report             Report    `json:"report"`
	Paths              []string  `json:"paths,omitempty"`
	RevertOf           Seq       `json:"revertOf,omitempty"`
	Force              bool      `json:"force,omitempty"`
	Foreign            []Foreign `json:"foreign,omitempty"`
	// Form is what the rewind was (one of the Form constants). A log whose
	// session_rewind has none is from before the store-format baseline:
	// DecodeEvent refuses it (*BaselineError).
	Form string `json:"form,omitempty"`
	// Step is what an undo took back or a redo brought back.
	Step *StepRef `json:"step,omitempty"`
	// Merge says what a merge brought in (form "merge").
	Merge *MergeRecord `json:"merge,omitempty"`
}

// The forms of a rewind (RewindPayload.Form, SPEC's "form").
const (
	FormRewind = "rewind" // the whole workspace to a target
	FormPaths  = "paths"  // some paths to a target
	FormRevert = "revert" // one step's changes
	FormUndo   = "undo"   // the last action still in effect
	FormRedo   = "redo"   // the last undo
	FormTurn   = "turn"   // the steps of a turn, taken back
	FormMerge  = "merge"  // a fork's changes brought in (merge.go)
)

// StepRef names what an undo, redo, revert or turn taken back acted on: a
// step (Kind "step", its tool_call's sequence and label, or for changes
// made outside any step its first checkpoint, Implicit), a turn (Kind
// "turn", its turn event's sequence) or a rewind (Kind "rewind", its
// session_rewind's sequence, Label its form).
type StepRef struct {
	Kind     string `json:"kind,omitempty"`
	Sequence Seq    `json:"sequence"`
	Label    string `json:"label"`
	// Implicit: a step of changes made outside any step ("(no step)").
	Implicit bool `json:"implicit,omitempty"`
	// Prompt is a turn's prompt ("" when it was kept out). A report
	// carries it, so no client reads the log to name the turn; the log's
	// session_rewind does not (the turn event holds it).
	Prompt string `json:"prompt,omitempty"`
}

// Foreign is a path whose present state was made outside the agent's
// steps, which a rewind overwrites.
type Foreign struct {
	Path string `json:"path"`
	// Seq is the checkpoint that recorded the state before that change.
	Seq     Seq    `json:"sequence"`
	Why     string `json:"why"`
	Session string `json:"session,omitempty"`
	PID     int    `json:"pid,omitempty"`
	Comm    string `json:"comm,omitempty"`
	// Kept: the rewind left the path alone instead (a person's change that
	// an undo, undo of a turn, redo or revert does not take back).
	Kept bool `json:"kept,omitempty"`
}
