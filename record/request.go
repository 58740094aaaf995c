package record

import (
	"errors"
)

// A rewind's request and what came of it: the one Request type every
// client, the control protocol, the daemon and the engine share, and the
// engine's answers to it and to a gc.

// Request is one rewind request, the one type every client, the daemon
// and the engine share: the whole workspace to Target, some Paths only,
// the Revert of one step, an Undo or a Redo, each maybe a DryRun. Exactly
// one of Target, Revert, Undo and Redo is meant; Paths go with a Target,
// Force with a Revert. Its JSON form is what .zero/rewind accepts
// (control.ParseRewind and control.FormatRewind read and write it).
type Request struct {
	// Target is the state to go back to (unused by the other forms).
	Target Seq `json:"target"`
	// Paths, when given, limits a rewind to these workspace paths, each
	// with everything under it. "" (the root) means every path.
	Paths []string `json:"paths,omitempty"`
	// Revert, when not 0, reverts the step holding this sequence: each path
	// the step changed goes back to its state just before the step, and
	// every later change to other paths is kept.
	Revert Seq `json:"revert,omitempty"`
	// Force: a revert also puts back paths changed after its step, instead
	// of failing with a *ConflictError.
	Force bool `json:"force,omitempty"`
	// Undo takes back the last action still in effect; Redo the last undo
	// (rewind/internal/index/undo.go). The engine chooses the target under the
	// workspace lock, after every capture so far is durable, so no change
	// or step lands between the choice and the rewind, and two undos never
	// choose the same step.
	Undo bool `json:"undo,omitempty"`
	Redo bool `json:"redo,omitempty"`
	// Turn, when not 0, takes back the turn whose event has this sequence
	// and everything after it: the whole workspace to just before the
	// prompt. It stacks like an undo (redo brings it back).
	Turn Seq `json:"turn,omitempty"`
	// WholeTurn, with Undo, takes back the whole turn of the step an undo
	// would take back now, chosen under the same lock (what `zerofs undo
	// --turn` asks): the workspace to just before that turn's prompt. On
	// the wire it is "turn": true beside "undo": true (control.ParseRewind).
	WholeTurn bool `json:"-"`
	// DryRun: plan, report and preview, but change nothing.
	DryRun bool `json:"dryRun,omitempty"`
	// Session is the agent session on whose behalf the rewind runs, for
	// telling whose changes it overwrites; "" means the session of the
	// reverted step, or of the newest agent step the rewind undoes.
	Session string `json:"session,omitempty"`
	// Merge, when set, brings a fork's changes in (merge.go); it goes
	// with DryRun only.
	Merge *MergeRequest `json:"merge,omitempty"`
	// Branch, when set, makes (or removes) a branch's record in the store
	// (branch.go); it goes with no other field.
	Branch *BranchRequest `json:"branch,omitempty"`
}

// Form is the form req asks for (one of the Form constants).
func (req Request) Form() string {
	switch {
	case req.Merge != nil:
		return FormMerge
	case req.Undo && req.WholeTurn:
		return FormTurn
	case req.Undo:
		return FormUndo
	case req.Redo:
		return FormRedo
	case req.Turn != 0:
		return FormTurn
	case req.Revert != 0:
		return FormRevert
	case len(req.Paths) > 0:
		return FormPaths
	}
	return FormRewind
}

// Check refuses a request that mixes forms.
func (req Request) Check() error {
	forms := 0
	for _, on := range []bool{req.Undo, req.Redo, req.Revert != 0, req.Turn != 0, req.Merge != nil, req.Branch != nil} {
		if on {
			forms++
		}
	}
	switch {
	case req.WholeTurn && !req.Undo:
		return &RefusedError{Refusal: RefusedBadRequest, Msg: "rewind: bad request: a whole turn goes with an undo only"}
	case forms > 1:
		return &RefusedError{Refusal: RefusedBadRequest, Msg: "rewind: bad request: more than one of revert, undo, redo, turn, merge and branch"}
	case forms == 1 && req.Target != 0:
		return &RefusedError{Refusal: RefusedBadRequest, Msg: "rewind: bad request: a target goes with no other form"}
	case len(req.Paths) > 0 && forms > 0:
		return &RefusedError{Refusal: RefusedBadRequest, Msg: "rewind: bad request: paths go with a target only"}
	case req.Force && req.Revert == 0:
		return &RefusedError{Refusal: RefusedBadRequest, Msg: "rewind: bad request: force goes with a revert only"}
	}
	return nil
}

var (
	// ErrConflict: a revert found the paths of its step changed since.
	ErrConflict = errors.New("rewind: later changes conflict with the revert")
	// ErrBadRequest: a Request that makes no sense (a revert with paths).
	ErrBadRequest = errors.New("rewind: bad request")
)

// Actions in a preview.
const (
	ActionRestore = "restore" // the path exists and gets its earlier state
	ActionDelete  = "delete"  // the path exists and did not then
	ActionCreate  = "create"  // the path does not exist and did then
)

// PathChange is one path a rewind changes, as a dry run shows it.
type PathChange struct {
	Path   string `json:"path"`
	Action string `json:"action"`
	// Kind is what the path becomes (for a deletion, what it is now).
	Kind Kind `json:"kind"`
	// Lines counts the lines a text file gains and loses (nil when either
	// side is not a text file, or too large to compare).
	Lines *LineCount `json:"lines,omitempty"`
}

// LineCount is a diff's size: +Added -Removed.
type LineCount struct {
	Added   int `json:"added"`
	Removed int `json:"removed"`
}

// RewindResult is what a rewind did (the engine's answer to a Request).
type RewindResult struct {
	Report Report
	// Seq is the session_rewind event's sequence.
	Seq Seq
	// Changed lists every workspace path the rewind created, replaced,
	// changed the mode of, or removed (parents before children), so the
	// FUSE layer can invalidate kernel caches for them.
	Changed []string
	// Foreign lists the paths whose present state was made outside the
	// agent's steps and that the rewind overwrote (or, dry, would).
	Foreign []Foreign
	// Preview is what a dry run would do, path by path; nil otherwise.
	Preview []PathChange
	// Conflicts are the paths a revert found changed after its step (see
	// ConflictError); with Force they were put back too.
	Conflicts []string
	// DryRun: nothing was changed or recorded (Seq is 0).
	DryRun bool
	// Unchanged: the rewind, path rewind or revert found the workspace
	// already as it would make it, so it changed and recorded nothing, or
	// (DryRun) would (Seq is 0; Report may still list skipped paths).
	Unchanged bool
	// Record is the session_rewind payload written (for a dry run, the one
	// that would be).
	Record RewindPayload
	// Step is what the rewind acted on: the step, turn or rewind an undo
	// took back, a redo brought back, or a revert reverted (a turn with its
	// prompt); nil for a rewind to a target, and for a redo of an undo
	// that did not record it.
	Step *StepRef
	// Undid is Step for an undo (or a turn taken back); Redid for a redo.
	Undid, Redid *StepRef
	// Merge is what a merge brought in, or the conflicts that refused it.
	Merge *MergeReport
	// Branch is the branch a branch request made (or removed).
	Branch *BranchRecord
}

// GCResult is what GC did.
type GCResult struct {
	// Before is the new start of history: @T with T < Before is gone.
	Before Seq `json:"before"`
	// Seq is the history_pruned event's sequence (0 when the cut did not
	// move, which appends no event).
	Seq Seq `json:"sequence"`
	// Steps is how many steps this gc dropped the states of: those that
	// began at or after the previous cut and before Before.
	Steps        int   `json:"steps"`
	BlobsRemoved int   `json:"blobsRemoved"`
	BytesFreed   int64 `json:"bytesFreed"`
	// ThinSeq is the history_thinned event's sequence, and Thinned its
	// payload: exactly what the thin gave up (0 and nil when gc was not
	// asked to thin, or the thin would have given up nothing).
	ThinSeq Seq             `json:"thinSequence,omitempty"`
	Thinned *ThinnedPayload `json:"thinned,omitempty"`
}

// GCRequest is what one gc forgets.
type GCRequest struct {
	// Before: the states before it go (a history_pruned event). At or
	// below the start of history nothing is cut; inside a thinned interval
	// the cut moves to the interval's end (the states between are gone
	// already).
	Before Seq `json:"before"`
	// ThinBefore, when above the start of history: the history before it
	// keeps one state a day (a history_thinned event; see rewind/internal/index/thin.go).
	ThinBefore Seq `json:"thinBefore,omitempty"`
}

// ProgressReport is how far a long operation has come, as the daemon shows
// it in .zero/status while one runs: what it is, the totals (0 when not
// known) and what is done. Noun is what the items are when they are not
// files.
type ProgressReport struct {
	What      string `json:"what"`
	Noun      string `json:"noun,omitempty"`
	Items     int64  `json:"items"`
	Bytes     int64  `json:"bytes"`
	DoneItems int64  `json:"doneItems"`
	DoneBytes int64  `json:"doneBytes"`
}

type pathChangeJSON struct {
	pathChangeFields
	PathBytes string `json:"pathBytes,omitempty"`
}

type pathChangeFields PathChange

// MarshalJSON writes the path with pathBytes when it is not valid UTF-8.
func (c PathChange) MarshalJSON() ([]byte, error) {
	j := pathChangeJSON{pathChangeFields: pathChangeFields(c)}
	return MarshalNames(&j, Name("path", &j.Path, &j.PathBytes))
}

// UnmarshalJSON reads a PathChange, the exact bytes winning.
func (c *PathChange) UnmarshalJSON(data []byte) error {
	var j pathChangeJSON
	if err := UnmarshalNames(data, &j, Name("path", &j.Path, &j.PathBytes)); err != nil {
		return err
	}
	*c = PathChange(j.pathChangeFields)
	return nil
}
