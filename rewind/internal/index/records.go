package index

import (
	"time"

	"github.com/zerofs/zerofs/eventlog"
)

// The records of the log: each event's payload as zerofs writes it, with
// SPEC.md's JSON keys. damage.go checks them as they are read.

// Seq is an event sequence.
type Seq = eventlog.Seq

// Kind is what a path was: a regular file, a directory or a symlink.
type Kind string

// The kinds SPEC.md names.
const (
	KindFile    Kind = "file"
	KindDir     Kind = "dir"
	KindSymlink Kind = "symlink"
)

// FileState is one path's before-state: an entry of a checkpoint's "files".
// The JSON keys are SPEC.md's.
//
// UID, GID and MTime are nil in records written before zerofs kept them
// (and for absent paths): the owner is then unknown, which views and
// rewinds treat as root's, with no setuid or setgid bit (see Owned).
type FileState struct {
	Path    string     `json:"path"`
	Kind    Kind       `json:"kind,omitempty"`
	Blob    string     `json:"blob,omitempty"`
	Absent  bool       `json:"absent"`
	Skipped bool       `json:"skipped"`
	Reason  string     `json:"reason,omitempty"`
	Bytes   int64      `json:"bytes"`
	Mode    uint32     `json:"mode"` // permission bits (07777)
	UID     *uint32    `json:"uid,omitempty"`
	GID     *uint32    `json:"gid,omitempty"`
	MTime   *time.Time `json:"mtime,omitempty"` // UTC, nanoseconds
	Target  string     `json:"target,omitempty"`
	PID     int        `json:"pid,omitempty"`
	Comm    string     `json:"comm,omitempty"`
	// Xattrs are the extended attributes a rewind may restore (xattr.go):
	// nil when the record says nothing of them, empty when it records none.
	Xattrs map[string][]byte `json:"xattrs,omitzero"`
	// RenamedTo and RenamedFrom make the record one side of a directory's
	// rename record (renames.go): the directory at Path is about to be
	// renamed to RenamedTo, so what was beneath Path before this checkpoint
	// is what is beneath RenamedTo just after it; or Path is about to be
	// replaced by the directory at RenamedFrom, so nothing that is beneath
	// Path just after this checkpoint was beneath it before. The record's
	// other fields are Path's own before-state, as in any record.
	RenamedTo   string `json:"renamedTo,omitempty"`
	RenamedFrom string `json:"renamedFrom,omitempty"`
	// Kept is a removed file's stash in the store (blobstore/stash.go):
	// linked there unread, so the checkpoint has no Blob; a later
	// stash_named event names its blob (named.go), and the index then
	// gives the record that Blob.
	Kept string `json:"kept,omitempty"`
}

// Owned reports whether the record names its owner (uid and gid).
func (s FileState) Owned() bool { return s.UID != nil && s.GID != nil }

// Checkpoint is the payload of a session_checkpoint event.
type Checkpoint struct {
	Tool  string      `json:"tool"`
	Files []FileState `json:"files"`
	// Step, when not 0, is the step the captures belong to, when that is
	// not the newest step before them: several agent sessions each had a
	// step open at once, and this change was made by a process of the
	// session whose step began earlier (rewind/session.go).
	Step Seq `json:"step,omitempty"`
	// Rewind marks a rewind's own checkpoint (the before-state of what it
	// is about to change): it belongs to the session_rewind that follows
	// it, and begins no step's changes. One that no session_rewind follows
	// (a rewind that failed and was rolled back) belongs to nothing.
	Rewind bool `json:"rewind,omitempty"`
	// Person marks a person's change (SPEC, Whose change it is): made by
	// a process outside every agent's process tree while agent sessions
	// were known. It belongs to no agent's step (Step is then 0): undo,
	// undo of a turn and revert leave it alone, and a whole rewind names
	// it before overwriting it.
	Person bool `json:"person,omitempty"`
}

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
	// Form is what the rewind was (one of the Form constants); "" in logs
	// written before zerofs recorded it.
	Form string `json:"form,omitempty"`
	// Step is what an undo took back or a redo brought back.
	Step *StepRef `json:"step,omitempty"`
}

// The forms of a rewind (RewindPayload.Form, SPEC's "form").
const (
	FormRewind = "rewind" // the whole workspace to a target
	FormPaths  = "paths"  // some paths to a target
	FormRevert = "revert" // one step's changes
	FormUndo   = "undo"   // the last action still in effect
	FormRedo   = "redo"   // the last undo
	FormTurn   = "turn"   // the steps of a turn, taken back
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

// PrunedPayload is the payload of a history_pruned event: states before
// Before no longer exist.
type PrunedPayload struct {
	Before Seq `json:"before"`
	// Reason is why: "gc" (asked for) or "max-store-size" (the store
	// reached its bound; then StoreBytes and MaxStoreSize say how far).
	Reason       string `json:"reason,omitempty"`
	StoreBytes   int64  `json:"storeBytes,omitempty"`
	MaxStoreSize int64  `json:"maxStoreSize,omitempty"`
	// Steps is how many steps (tool_call events) began between the
	// previous cut and Before: the states this prune dropped.
	Steps int `json:"steps"`
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
