package history

import (
	"context"
	"errors"
	"fmt"

	"github.com/zerofs/zerofs/control"
	"github.com/zerofs/zerofs/rewind"
)

// Undo and redo stack like an editor's. Every state keeps its sequence, so
// the stack is not stored anywhere: it is read back from the log.
//
// Undo rewinds to just before the newest step that changed something and
// is still in effect. A rewind to T puts the workspace back at T, so the
// steps after T are not in effect any more and the search goes on from T:
// repeated undos walk back one step at a time, and steps that changed
// nothing (read-only tool calls) are passed over.
//
// Redo undoes the newest undo not yet redone: the log's rewinds, oldest
// first, push the state before each one onto a stack; a rewind to the state
// on top of the stack (what a redo does) pops it instead; a step that
// changed something empties the stack (a new step ends the redo chain).
// Three undos and three redos therefore return exactly where they started.
//
// A narrow rewind (of some paths, or the revert of one step) does not put
// the whole workspace at its target: it counts as a change, like a step
// (undo undoes it, and it ends the redo chain).

// UndoTarget is where an undo rewinds to and the step it undoes, from a
// log's blocks (oldest first). ErrNothingToUndo when no step is in effect;
// an error naming the step when the state before it was pruned.
func UndoTarget(blocks []*Block, prunedBefore Seq) (Seq, *Block, error) {
	b := inEffect(blocks, Now)
	if b == nil {
		return 0, nil, ErrNothingToUndo
	}
	t := b.Before()
	if t < prunedBefore {
		return 0, b, &PrunedError{What: fmt.Sprintf("cannot undo step %d %q", b.Seq, b.Label), Seq: t, PrunedBefore: prunedBefore}
	}
	return t, b, nil
}

// PrunedError: an undo or redo needs a state that gc forgot. It matches
// rewind.ErrNoSuchSeq.
type PrunedError struct {
	What         string // "cannot undo step 42 \"Edit\""
	Seq          Seq    // the state needed
	PrunedBefore Seq
}

func (e *PrunedError) Error() string {
	return fmt.Sprintf("%s: the state at %d was pruned (history starts at %d)", e.What, e.Seq, e.PrunedBefore)
}

func (e *PrunedError) Unwrap() error { return rewind.ErrNoSuchSeq }

// inEffect is the newest step that changed something and is in effect in
// the state at limit (Now: the workspace), or nil.
func inEffect(blocks []*Block, limit Seq) *Block {
	for i := len(blocks) - 1; i >= 0; i-- {
		b := blocks[i]
		switch {
		case b.Type == BlockRewind && !narrow(b):
			// A rewind's changes are in effect from its checkpoint on.
			if b.Start <= limit && b.Rewind != nil {
				limit = b.Rewind.TargetSequence
			}
		case b.Type == BlockStep, narrow(b):
			if b.Changed() && b.First <= limit {
				return b
			}
		}
	}
	return nil
}

// narrow reports whether b is a rewind of some paths or a revert: one that
// does not put the whole workspace at its target.
func narrow(b *Block) bool {
	return b.Type == BlockRewind && b.Rewind != nil && (len(b.Rewind.Paths) > 0 || b.Rewind.RevertOf != 0)
}

// RedoTarget is where a redo rewinds to and the step it brings back (nil
// when the undone state held none), from a log's blocks (oldest first).
// ErrNothingToRedo when no undo waits to be redone.
func RedoTarget(blocks []*Block, prunedBefore Seq) (Seq, *Block, error) {
	var stack []Seq // the states before the undos not yet redone
	for _, b := range blocks {
		switch {
		case b.Type == BlockStep, narrow(b):
			if b.Changed() {
				stack = stack[:0]
			}
		case b.Type == BlockRewind:
			if b.Rewind == nil {
				continue
			}
			if n := len(stack); n > 0 && b.Rewind.TargetSequence == stack[n-1] {
				stack = stack[:n-1]
				continue
			}
			stack = append(stack, b.Start-1)
		}
	}
	if len(stack) == 0 {
		return 0, nil, ErrNothingToRedo
	}
	t := stack[len(stack)-1]
	step := inEffect(blocks, t)
	if t < prunedBefore {
		return 0, step, &PrunedError{What: "cannot redo", Seq: t, PrunedBefore: prunedBefore}
	}
	return t, step, nil
}

// RunRewind runs a rewind request on an engine: a target (the whole
// workspace or some paths), a revert, an undo or a redo, or a dry run of
// any. Undo and redo choose their target under the engine's workspace lock
// (rewind.Request.Pick), from the log as it is then, so no change or step
// lands between the choice and the rewind, and two concurrent undos undo
// two different steps. The daemon (package fs) and the unmounted Source
// both run requests with it. The report is filled on success and for a
// revert refused for its conflicts (with a *rewind.ConflictError).
func RunRewind(ctx context.Context, eng *rewind.Engine, req control.RewindRequest) (rewind.Result, control.RewindReport, error) {
	var undid, redid *control.StepReport
	rr := rewind.Request{Target: req.Target, Paths: req.Paths, Revert: req.Revert, Force: req.Force,
		DryRun: req.DryRun, Session: req.Session}
	if req.Undo || req.Redo {
		rr.Pick = func() (Seq, error) {
			blocks, _, err := ReadBlocks(eng.Log().Events(1), eng.Head())
			if err != nil {
				return 0, err
			}
			if req.Undo {
				t, b, err := UndoTarget(blocks, eng.PrunedBefore())
				if err == nil {
					undid = &control.StepReport{Sequence: b.Seq, Label: b.Label}
				}
				return t, err
			}
			t, b, err := RedoTarget(blocks, eng.PrunedBefore())
			if err == nil && b != nil {
				redid = &control.StepReport{Sequence: b.Seq, Label: b.Label}
			}
			return t, err
		}
	}
	res, err := eng.Apply(ctx, rr)
	if err != nil && !errors.Is(err, rewind.ErrConflict) {
		return res, control.RewindReport{}, err
	}
	rep := control.RewindReport{Sequence: res.Seq, TargetSequence: res.Record.TargetSequence,
		CheckpointSequence: res.Record.CheckpointSequence, Report: res.Report,
		Paths: res.Record.Paths, RevertOf: res.Record.RevertOf, Force: res.Record.Force,
		DryRun: res.DryRun, Preview: res.Preview, Foreign: res.Foreign, Conflicts: res.Conflicts,
		Undid: undid, Redid: redid}
	if err != nil {
		rep.Error, rep.RevertOf = control.ErrorConflict, req.Revert
	}
	if rep.Report.Skipped == nil {
		rep.Report.Skipped = []string{}
	}
	return res, rep, err
}
