package rewind

import (
	"context"
	"fmt"
	"sort"

	"github.com/zerofs/zerofs/internal/quote"
	"github.com/zerofs/zerofs/record"
	"github.com/zerofs/zerofs/rewind/internal/index"
)

// Apply carries out req: a full rewind, a path rewind, or a revert, or a
// dry run of one. A revert whose paths were changed since its step fails
// with a *ConflictError naming each (unless req.Force), changing nothing;
// the Result then lists the conflicts (and, dry, the preview of a forced
// revert). Other writers wait while it runs.
func (e *Engine) Apply(ctx context.Context, req record.Request) (record.RewindResult, error) {
	if req.Merge != nil {
		if err := req.Check(); err != nil {
			return record.RewindResult{}, err
		}
		return e.merge(ctx, req)
	}
	if req.Branch != nil {
		if err := req.Check(); err != nil {
			return record.RewindResult{}, err
		}
		return e.branch(ctx, req)
	}
	e.wsMu.Lock()
	defer e.wsMu.Unlock()
	if err := e.NameStashes(ctx); err != nil {
		return record.RewindResult{}, err
	}
	if err := e.Sync(); err != nil {
		return record.RewindResult{}, err
	}
	in, plan, conflicts, session, err := e.resolve(req)
	if err != nil {
		return record.RewindResult{}, err
	}
	foreign, err := e.foreign(plan, session)
	if err != nil {
		return record.RewindResult{}, err
	}
	if len(in.Foreign) > 0 { // the person's changes it leaves alone
		foreign = append(in.Foreign, foreign...)
		sort.Slice(foreign, func(i, j int) bool { return foreign[i].Path < foreign[j].Path })
	}
	var cerr error
	if len(conflicts) > 0 && !req.Force {
		cerr = &record.ConflictError{Step: req.Revert, Paths: conflicts}
	}
	if req.DryRun {
		report, err := e.report(plan)
		if err != nil {
			return record.RewindResult{}, err
		}
		res := record.RewindResult{DryRun: true, Report: report, Foreign: foreign, Conflicts: conflicts}
		// A rewind, path rewind or revert that would change nothing says
		// so, as the real run does (it records nothing).
		res.Unchanged = plan.empty() && cerr == nil && (in.Form == record.FormRewind || in.Form == record.FormPaths || in.Form == record.FormRevert)
		res.Record = record.RewindPayload{TargetSequence: in.Target, Report: res.Report, Paths: in.Roots,
			RevertOf: in.RevertOf, Force: in.Force, Foreign: foreign, Form: in.Form, Step: in.Step}
		res.Preview, err = e.preview(plan)
		if err != nil {
			return record.RewindResult{}, err
		}
		e.acted(&res, in)
		return res, cerr
	}
	if cerr != nil {
		res := record.RewindResult{Conflicts: conflicts}
		e.acted(&res, in)
		return res, cerr
	}
	var over []string
	for _, f := range foreign {
		if !f.Kept {
			over = append(over, f.Path+" ("+f.Why+")")
		}
	}
	if len(over) > 0 {
		e.opts.Logger.Warn("rewind: overwriting changes made outside the agent's steps", "paths", over)
	}
	if plan.empty() && (in.Form == record.FormRewind || in.Form == record.FormPaths || in.Form == record.FormRevert) {
		// A rewind, path rewind or revert that changes nothing records
		// nothing: no event, nothing to undo. (An undo or redo always
		// records: its stack is read back from the log.) It still ends
		// the step's captures, as a rewind ends a step (SPEC, Rewind):
		// every path changed after it is captured again, so the state
		// just before it stays what @head showed then (a write after it
		// to a path the step had captured would otherwise change that
		// state unrecorded).
		e.capMu.Lock()
		e.captured = map[string]record.Seq{}
		e.capMu.Unlock()
		res := record.RewindResult{Unchanged: true, Report: record.Report{Skipped: append([]string{}, plan.skipped...)}}
		res.Record = record.RewindPayload{TargetSequence: in.Target, Report: res.Report, Paths: in.Roots,
			RevertOf: in.RevertOf, Force: in.Force, Form: in.Form, Step: in.Step}
		e.acted(&res, in)
		return res, nil
	}
	in.Foreign = foreign
	res, err := e.carryOut(ctx, in, plan)
	res.Conflicts = conflicts
	if err == nil {
		e.acted(&res, in)
	}
	return res, err
}

// acted names in res what the rewind acted on (Step): the step, turn or
// rewind an undo took back (Undid too), a redo brought back (Redid too)
// or a revert reverted; a turn with its prompt.
func (e *Engine) acted(res *record.RewindResult, in intent) {
	if in.Step == nil {
		return
	}
	ref := *in.Step
	if ref.Kind == "turn" {
		ref.Prompt = e.turnPrompt(ref.Sequence)
	}
	res.Step = &ref
	switch in.Form {
	case record.FormUndo, record.FormTurn:
		res.Undid = &ref
	case record.FormRedo:
		res.Redid = &ref
	}
}

// resolve turns req into the intent and plan to carry out, the conflicts
// of a revert, and the agent session it acts for. The caller holds wsMu.
func (e *Engine) resolve(req record.Request) (in intent, plan *rewindPlan, conflicts []string, session string, err error) {
	if err := req.Check(); err != nil {
		return in, nil, nil, "", err
	}
	if req.Revert != 0 {
		return e.resolveRevert(req)
	}
	var what *record.StepRef
	var turn record.Mark // the turn a turn form takes back
	switch {
	case req.Undo && req.WholeTurn:
		_, w, ok := e.state.UndoTarget()
		if !ok {
			return in, nil, nil, "", &record.RefusedError{Refusal: record.RefusedNothingToUndo, Head: e.Head(), PrunedBefore: e.PrunedBefore()}
		}
		if w.Kind != "step" {
			return in, nil, nil, "", &record.RefusedError{Refusal: record.RefusedNoTurn, Op: record.FormTurn, Step: &w, Head: e.Head(), PrunedBefore: e.PrunedBefore(),
				Msg: fmt.Sprintf("%v: the last action in effect (rewind %d) is not a step", record.ErrNoTurn, w.Sequence)}
		}
		if turn, ok = e.state.TurnOf(w); !ok {
			return in, nil, nil, "", &record.RefusedError{Refusal: record.RefusedNoTurn, Op: record.FormTurn, Step: &w, Head: e.Head(), PrunedBefore: e.PrunedBefore(),
				Msg: fmt.Sprintf("%v: the last step in effect (%d %q) came before any prompt hook recorded a turn", record.ErrNoTurn, w.Sequence, w.Label)}
		}
		req.Target, what = turn.Seq-1, &record.StepRef{Kind: "turn", Sequence: turn.Seq}
	case req.Undo:
		t, w, ok := e.state.UndoTarget()
		if !ok {
			return in, nil, nil, "", &record.RefusedError{Refusal: record.RefusedNothingToUndo, Head: e.Head(), PrunedBefore: e.PrunedBefore()}
		}
		req.Target, what = t, &w
	case req.Redo:
		t, w, ok := e.state.RedoTarget()
		if !ok {
			return in, nil, nil, "", &record.RefusedError{Refusal: record.RefusedNothingToRedo, Head: e.Head(), PrunedBefore: e.PrunedBefore()}
		}
		req.Target, what = t, w
	case req.Turn != 0:
		var ok bool
		if turn, ok = e.state.TurnAt(req.Turn); !ok {
			return in, nil, nil, "", &record.RefusedError{Refusal: record.RefusedNoSuchSeq, Seq: req.Turn, Head: e.Head(), PrunedBefore: e.PrunedBefore(),
				Msg: fmt.Sprintf("rewind: no such turn: %d is not a turn event", req.Turn)}
		}
		req.Target, what = req.Turn-1, &record.StepRef{Kind: "turn", Sequence: req.Turn}
	}
	if r := e.refuseSeq(req.Target); r != nil {
		if req.Undo || req.Redo || req.Turn != 0 {
			r.Op, r.Step = req.Form(), what
		}
		return in, nil, nil, "", r
	}
	// On behalf of the turn's own agent session, for a turn taken back:
	// changes another session made since are named as it overwrites them.
	session = req.Session
	if session == "" {
		session = turn.Session
	}
	if session == "" {
		session = e.state.LatestSession(req.Target)
	}
	roots, err := cleanRoots(req.Paths)
	if err != nil {
		return in, nil, nil, "", err
	}
	if err := e.refuseMissing(req.Target, roots); err != nil {
		return in, nil, nil, "", err
	}
	if err := e.refuseIgnored(roots); err != nil {
		return in, nil, nil, "", err
	}
	in = intent{Target: req.Target, Form: req.Form(), Step: what}
	if roots == nil {
		plan, err = e.plan(req.Target, ^record.Seq(0))
		if err != nil || in.Form == record.FormRewind {
			return in, plan, nil, session, err
		}
		// An undo, redo or turn taken back leaves a person's changes
		// alone (person.go): it then restores exactly the other paths.
		plan, in.Foreign, in.Paths, err = e.keepPersons(req.Target, plan)
		in.Narrow = in.Paths != nil
		return in, plan, nil, session, err
	}
	changed, err := e.changedSince(req.Target, ^record.Seq(0))
	if err != nil {
		return in, nil, nil, "", err
	}
	var cands []string
	for _, p := range changed {
		if under(p, roots) {
			cands = append(cands, p)
		}
	}
	cands, _, err = e.withAncestors(req.Target, cands, roots)
	if err != nil {
		return in, nil, nil, "", err
	}
	in.Narrow, in.Paths, in.Roots = true, cands, roots
	plan, err = e.planPaths(req.Target, ^record.Seq(0), cands)
	return in, plan, nil, session, err
}

// refuseMissing refuses a path rewind whose paths include one that exists
// neither at t nor now: it can match nothing, so it is a mistake (a typo,
// a path relative to the wrong directory), not a rewind that happens to
// change nothing.
func (e *Engine) refuseMissing(t record.Seq, roots []string) error {
	var missing []string
	for _, p := range roots {
		at, err := e.stateAt(p, t, ^record.Seq(0))
		if err != nil {
			return err
		}
		if at.Exists {
			continue
		}
		cur, err := e.live(p)
		if err != nil {
			return err
		}
		if !cur.Exists {
			missing = append(missing, p)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	return &record.RefusedError{Refusal: record.RefusedNoSuchPath, Seq: t, Head: e.Head(), PrunedBefore: e.PrunedBefore(), Missing: missing,
		Msg: fmt.Sprintf("%v: %s (neither at %d nor now)", record.ErrNoSuchPath, quote.Names(missing, ", "), t)}
}

// cleanRoots checks a path rewind's paths and drops those beneath another;
// nil means every path (none given, or the root among them).
func cleanRoots(paths []string) ([]string, error) {
	var roots []string
	for _, p := range paths {
		if err := record.CleanPath(p); err != nil {
			return nil, fmt.Errorf("%w: %q", err, p)
		}
		if p == "" {
			return nil, nil
		}
		roots = append(roots, p)
	}
	if len(roots) == 0 {
		return nil, nil
	}
	roots = outermost(roots)
	sort.Strings(roots)
	return roots, nil
}

// withAncestors adds to cands the ancestors (outside skip) that a path
// restored to its state at t needs and that are not directories now; it
// returns them separately too.
func (e *Engine) withAncestors(t record.Seq, cands, skip []string) (all, added []string, err error) {
	have := map[string]bool{}
	for _, p := range cands {
		have[p] = true
	}
	all = append([]string(nil), cands...)
	for _, p := range cands {
		tgt, err := e.stateAt(p, t, ^record.Seq(0))
		if err != nil {
			return nil, nil, err
		}
		if !tgt.Exists {
			continue
		}
		for a, _ := index.SplitPath(p); a != ""; a, _ = index.SplitPath(a) {
			if have[a] || under(a, skip) {
				continue
			}
			cur, err := e.live(a)
			if err != nil {
				return nil, nil, err
			}
			if cur.Exists && cur.State.Kind == record.KindDir {
				continue
			}
			have[a] = true
			all = append(all, a)
			added = append(added, a)
		}
	}
	return all, added, nil
}
