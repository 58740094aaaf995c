package record

import (
	"errors"
	"fmt"
	"strings"
)

// A request the engine refuses (a rewind, an undo, a gc, ...) fails with a
// *RefusedError: a typed reason from the list below and its details, so
// that the daemon can hand the reason to its client whole (a control
// file's report carries it as "error") and no client has to guess it from
// an errno. Each matches errors.Is with its sentinel (ErrNoSuchSeq for
// no-such-seq, pruned and thinned). A revert refused for its conflicts is
// a *ConflictError (reason RefusedConflict).

// Refusal names why a request was refused.
type Refusal string

// The refusals.
const (
	RefusedNothingToUndo Refusal = "nothing-to-undo" // no action is in effect
	RefusedNothingToRedo Refusal = "nothing-to-redo" // no undo waits to be redone
	RefusedNoTurn        Refusal = "no-turn"         // undo of a whole turn, and the action in effect is in none
	RefusedNoSuchSeq     Refusal = "no-such-seq"     // above head, or names no step
	RefusedPruned        Refusal = "pruned"          // the state was pruned by gc
	RefusedThinned       Refusal = "thinned"         // the state was thinned away by gc
	RefusedConflict      Refusal = "conflict"        // a revert over later changes
	RefusedNoSuchPath    Refusal = "no-such-path"    // a path rewind's path is neither at the target nor now
	RefusedBadRequest    Refusal = "bad-request"     // a request that makes no sense
	RefusedWorkspace     Refusal = "workspace"       // the workspace could not be changed (see the message); nothing was
	RefusedFailed        Refusal = "failed"          // the store failed (see the message)
)

var (
	// ErrNoSuchSeq: a sequence above head, or below the pruned history.
	ErrNoSuchSeq = errors.New("rewind: no such sequence")
	// ErrNothingToUndo: an undo found no action in effect.
	ErrNothingToUndo = errors.New("nothing to undo")
	// ErrNothingToRedo: a redo found no undo to take back.
	ErrNothingToRedo = errors.New("nothing to redo")
	// ErrNoTurn: an undo of a whole turn found the action in effect in no
	// turn (no prompt hook recorded one before it, or it is not a step).
	ErrNoTurn = errors.New("no turn to undo")
	// ErrNoSuchPath: a path rewind named a path that exists neither in the
	// state it goes back to nor now, so it could match nothing.
	ErrNoSuchPath = errors.New("rewind: no such path")
	// ErrWorkspace: a rewind could not change the workspace (a directory
	// busy as a mount point, a full disk) and was rolled back.
	ErrWorkspace = errors.New("rewind: the workspace could not be changed")
)

// RefusedError is a request the engine refused: why, and the details.
type RefusedError struct {
	Refusal Refusal
	// Seq is the sequence asked for, or the state an undo or redo needs.
	Seq Seq
	// Head and PrunedBefore bound the history when it was refused.
	Head, PrunedBefore Seq
	// Thinned is the thinned interval that holds Seq (RefusedThinned).
	Thinned *ThinInterval
	// Op is "undo" or "redo" for a refused undo or redo ("" otherwise), and
	// Step what it would have acted on.
	Op   string
	Step *StepRef
	// Missing lists a path rewind's paths that match nothing
	// (RefusedNoSuchPath).
	Missing []string
	// Msg says it in words ("" for the default wording).
	Msg string
}

func (e *RefusedError) Error() string {
	if e.Msg != "" {
		return e.Msg
	}
	what := ""
	if e.Op != "" && (e.Refusal == RefusedPruned || e.Refusal == RefusedThinned) {
		op := "cannot " + e.Op
		if e.Op == FormTurn {
			op = "cannot take back"
		}
		if e.Step != nil {
			op += fmt.Sprintf(" %s %d %q", stepKind(e.Step), e.Step.Sequence, e.Step.Label)
		}
		if e.Refusal == RefusedPruned {
			return fmt.Sprintf("%s: the state at %d was pruned (history starts at %d)", op, e.Seq, e.PrunedBefore)
		}
		if e.Thinned != nil {
			return fmt.Sprintf("%s: the state at %d was thinned away (history between %d and %d was thinned to one state a day)", op, e.Seq, e.Thinned.After, e.Thinned.Before)
		}
	}
	switch e.Refusal {
	case RefusedNothingToUndo:
		return ErrNothingToUndo.Error()
	case RefusedNothingToRedo:
		return ErrNothingToRedo.Error()
	case RefusedNoTurn:
		return ErrNoTurn.Error()
	case RefusedPruned:
		return fmt.Sprintf("%v: %d%s (history is %d..%d: the states before %d were pruned)", ErrNoSuchSeq, e.Seq, what, e.PrunedBefore, e.Head, e.PrunedBefore)
	case RefusedThinned:
		if e.Thinned != nil {
			return fmt.Sprintf("%v: %d%s (history between %d and %d was thinned to one state a day)", ErrNoSuchSeq, e.Seq, what, e.Thinned.After, e.Thinned.Before)
		}
	case RefusedNoSuchSeq:
		return fmt.Sprintf("%v: %d%s (history is %d..%d)", ErrNoSuchSeq, e.Seq, what, e.PrunedBefore, e.Head)
	case RefusedNoSuchPath:
		// The engine words this one itself (Msg), quoting each name as
		// zerofs prints names for a person (internal/quote).
		return fmt.Sprintf("%v: %q (neither at %d nor now)", ErrNoSuchPath, e.Missing, e.Seq)
	}
	return fmt.Sprintf("rewind: refused (%s)", e.Refusal)
}

// Unwrap is the sentinel the refusal matches.
func (e *RefusedError) Unwrap() error {
	switch e.Refusal {
	case RefusedNothingToUndo:
		return ErrNothingToUndo
	case RefusedNothingToRedo:
		return ErrNothingToRedo
	case RefusedNoTurn:
		return ErrNoTurn
	case RefusedNoSuchSeq, RefusedPruned, RefusedThinned:
		return ErrNoSuchSeq
	case RefusedBadRequest:
		return ErrBadRequest
	case RefusedConflict:
		return ErrConflict
	case RefusedNoSuchPath:
		return ErrNoSuchPath
	case RefusedWorkspace:
		return ErrWorkspace
	}
	return nil
}

func stepKind(s *StepRef) string {
	if s.Kind == "" {
		return "step"
	}
	return s.Kind
}

// RefusalOf is the refusal err carries: its own for a *RefusedError, and
// for other errors the reason their sentinel names (a failure of the store
// is RefusedFailed).
func RefusalOf(err error) Refusal {
	var re *RefusedError
	switch {
	case err == nil:
		return ""
	case errors.As(err, &re):
		return re.Refusal
	case errors.Is(err, ErrConflict):
		return RefusedConflict
	case errors.Is(err, ErrNothingToUndo):
		return RefusedNothingToUndo
	case errors.Is(err, ErrNothingToRedo):
		return RefusedNothingToRedo
	case errors.Is(err, ErrNoTurn):
		return RefusedNoTurn
	case errors.Is(err, ErrNoSuchSeq):
		return RefusedNoSuchSeq
	case errors.Is(err, ErrNoSuchPath):
		return RefusedNoSuchPath
	case errors.Is(err, ErrWorkspace):
		return RefusedWorkspace
	case errors.Is(err, ErrBadRequest), errors.Is(err, ErrUnsafePath), errors.Is(err, ErrReserved), errors.Is(err, ErrNotFork):
		return RefusedBadRequest
	}
	return RefusedFailed
}

// ConflictError is a revert refused because the paths it names were changed
// after the step (by a later step, or by changes in the current one): the
// revert would overwrite those changes. Nothing was changed.
type ConflictError struct {
	Step  Seq
	Paths []string
}

func (c *ConflictError) Error() string {
	return fmt.Sprintf("rewind: revert of step %d conflicts with later changes to %s", c.Step, strings.Join(c.Paths, ", "))
}

func (c *ConflictError) Unwrap() error { return ErrConflict }
