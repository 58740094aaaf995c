package rewind

import (
	"context"
	"errors"
	"fmt"
	"sort"

	"github.com/zerofs/zerofs/rewind/internal/index"
)

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
	// (internal/index/undo.go). The engine chooses the target under the
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
}

// form is the form req asks for (index.Form*).
func (req Request) form() string {
	switch {
	case req.Undo && req.WholeTurn:
		return index.FormTurn
	case req.Undo:
		return index.FormUndo
	case req.Redo:
		return index.FormRedo
	case req.Turn != 0:
		return index.FormTurn
	case req.Revert != 0:
		return index.FormRevert
	case len(req.Paths) > 0:
		return index.FormPaths
	}
	return index.FormRewind
}

// check refuses a request that mixes forms.
func (req Request) check() error {
	forms := 0
	for _, on := range []bool{req.Undo, req.Redo, req.Revert != 0, req.Turn != 0} {
		if on {
			forms++
		}
	}
	switch {
	case req.WholeTurn && !req.Undo:
		return &RefusedError{Refusal: RefusedBadRequest, Msg: "rewind: bad request: a whole turn goes with an undo only"}
	case forms > 1:
		return &RefusedError{Refusal: RefusedBadRequest, Msg: "rewind: bad request: more than one of revert, undo, redo and turn"}
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

// Apply carries out req: a full rewind, a path rewind, or a revert, or a
// dry run of one. A revert whose paths were changed since its step fails
// with a *ConflictError naming each (unless req.Force), changing nothing;
// the Result then lists the conflicts (and, dry, the preview of a forced
// revert). Other writers wait while it runs.
func (e *Engine) Apply(ctx context.Context, req Request) (Result, error) {
	e.wsMu.Lock()
	defer e.wsMu.Unlock()
	if err := e.NameStashes(ctx); err != nil {
		return Result{}, err
	}
	if err := e.Sync(); err != nil {
		return Result{}, err
	}
	in, plan, conflicts, session, err := e.resolve(req)
	if err != nil {
		return Result{}, err
	}
	foreign, err := e.foreign(plan, session)
	if err != nil {
		return Result{}, err
	}
	if len(in.Foreign) > 0 { // the person's changes it leaves alone
		foreign = append(in.Foreign, foreign...)
		sort.Slice(foreign, func(i, j int) bool { return foreign[i].Path < foreign[j].Path })
	}
	var cerr error
	if len(conflicts) > 0 && !req.Force {
		cerr = &ConflictError{Step: req.Revert, Paths: conflicts}
	}
	if req.DryRun {
		report, err := e.report(plan)
		if err != nil {
			return Result{}, err
		}
		res := Result{DryRun: true, Report: report, Foreign: foreign, Conflicts: conflicts}
		// A rewind, path rewind or revert that would change nothing says
		// so, as the real run does (it records nothing).
		res.Unchanged = plan.empty() && cerr == nil && (in.Form == index.FormRewind || in.Form == index.FormPaths || in.Form == index.FormRevert)
		res.Record = RewindPayload{TargetSequence: in.Target, Report: res.Report, Paths: in.Roots,
			RevertOf: in.RevertOf, Force: in.Force, Foreign: foreign, Form: in.Form, Step: in.Step}
		res.Preview, err = e.preview(plan)
		if err != nil {
			return Result{}, err
		}
		e.acted(&res, in)
		return res, cerr
	}
	if cerr != nil {
		res := Result{Conflicts: conflicts}
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
	if plan.empty() && (in.Form == index.FormRewind || in.Form == index.FormPaths || in.Form == index.FormRevert) {
		// A rewind, path rewind or revert that changes nothing records
		// nothing: no event, nothing to undo. (An undo or redo always
		// records: its stack is read back from the log.) It still ends
		// the step's captures, as a rewind ends a step (SPEC, Rewind):
		// every path changed after it is captured again, so the state
		// just before it stays what @head showed then (a write after it
		// to a path the step had captured would otherwise change that
		// state unrecorded: e2e/TestFSX, seed 1796395561946588390).
		e.capMu.Lock()
		e.captured = map[string]Seq{}
		e.capMu.Unlock()
		res := Result{Unchanged: true, Report: Report{Skipped: append([]string{}, plan.skipped...)}}
		res.Record = RewindPayload{TargetSequence: in.Target, Report: res.Report, Paths: in.Roots,
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
func (e *Engine) acted(res *Result, in intent) {
	if in.Step == nil {
		return
	}
	ref := *in.Step
	if ref.Kind == "turn" {
		ref.Prompt = e.turnPrompt(ref.Sequence)
	}
	res.Step = &ref
	switch in.Form {
	case index.FormUndo, index.FormTurn:
		res.Undid = &ref
	case index.FormRedo:
		res.Redid = &ref
	}
}

// resolve turns req into the intent and plan to carry out, the conflicts
// of a revert, and the agent session it acts for. The caller holds wsMu.
func (e *Engine) resolve(req Request) (in intent, plan *rewindPlan, conflicts []string, session string, err error) {
	if err := req.check(); err != nil {
		return in, nil, nil, "", err
	}
	if req.Revert != 0 {
		return e.resolveRevert(req)
	}
	var what *StepRef
	var turn Mark // the turn a turn form takes back
	switch {
	case req.Undo && req.WholeTurn:
		_, w, ok := e.state.UndoTarget()
		if !ok {
			return in, nil, nil, "", &RefusedError{Refusal: RefusedNothingToUndo, Head: e.Head(), PrunedBefore: e.PrunedBefore()}
		}
		if w.Kind != "step" {
			return in, nil, nil, "", &RefusedError{Refusal: RefusedNoTurn, Op: index.FormTurn, Step: &w, Head: e.Head(), PrunedBefore: e.PrunedBefore(),
				Msg: fmt.Sprintf("%v: the last action in effect (rewind %d) is not a step", ErrNoTurn, w.Sequence)}
		}
		if turn, ok = e.state.TurnOf(w); !ok {
			return in, nil, nil, "", &RefusedError{Refusal: RefusedNoTurn, Op: index.FormTurn, Step: &w, Head: e.Head(), PrunedBefore: e.PrunedBefore(),
				Msg: fmt.Sprintf("%v: the last step in effect (%d %q) came before any prompt hook recorded a turn", ErrNoTurn, w.Sequence, w.Label)}
		}
		req.Target, what = turn.Seq-1, &StepRef{Kind: "turn", Sequence: turn.Seq}
	case req.Undo:
		t, w, ok := e.state.UndoTarget()
		if !ok {
			return in, nil, nil, "", &RefusedError{Refusal: RefusedNothingToUndo, Head: e.Head(), PrunedBefore: e.PrunedBefore()}
		}
		req.Target, what = t, &w
	case req.Redo:
		t, w, ok := e.state.RedoTarget()
		if !ok {
			return in, nil, nil, "", &RefusedError{Refusal: RefusedNothingToRedo, Head: e.Head(), PrunedBefore: e.PrunedBefore()}
		}
		req.Target, what = t, w
	case req.Turn != 0:
		var ok bool
		if turn, ok = e.state.TurnAt(req.Turn); !ok {
			return in, nil, nil, "", &RefusedError{Refusal: RefusedNoSuchSeq, Seq: req.Turn, Head: e.Head(), PrunedBefore: e.PrunedBefore(),
				Msg: fmt.Sprintf("rewind: no such turn: %d is not a turn event", req.Turn)}
		}
		req.Target, what = req.Turn-1, &StepRef{Kind: "turn", Sequence: req.Turn}
	}
	if r := e.refuseSeq(req.Target); r != nil {
		if req.Undo || req.Redo || req.Turn != 0 {
			r.Op, r.Step = req.form(), what
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
	in = intent{Target: req.Target, Form: req.form(), Step: what}
	if roots == nil {
		plan, err = e.plan(req.Target, ^Seq(0))
		if err != nil || in.Form == index.FormRewind {
			return in, plan, nil, session, err
		}
		// An undo, redo or turn taken back leaves a person's changes
		// alone (person.go): it then restores exactly the other paths.
		plan, in.Foreign, in.Paths, err = e.keepPersons(req.Target, plan)
		in.Narrow = in.Paths != nil
		return in, plan, nil, session, err
	}
	changed, err := e.changedSince(req.Target, ^Seq(0))
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
	plan, err = e.planPaths(req.Target, ^Seq(0), cands)
	return in, plan, nil, session, err
}

// refuseMissing refuses a path rewind whose paths include one that exists
// neither at t nor now: it can match nothing, so it is a mistake (a typo,
// a path relative to the wrong directory), not a rewind that happens to
// change nothing.
func (e *Engine) refuseMissing(t Seq, roots []string) error {
	var missing []string
	for _, p := range roots {
		at, err := e.stateAt(p, t, ^Seq(0))
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
	return &RefusedError{Refusal: RefusedNoSuchPath, Seq: t, Head: e.Head(), PrunedBefore: e.PrunedBefore(), Missing: missing}
}

// cleanRoots checks a path rewind's paths and drops those beneath another;
// nil means every path (none given, or the root among them).
func cleanRoots(paths []string) ([]string, error) {
	var roots []string
	for _, p := range paths {
		if err := CleanPath(p); err != nil {
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
func (e *Engine) withAncestors(t Seq, cands, skip []string) (all, added []string, err error) {
	have := map[string]bool{}
	for _, p := range cands {
		have[p] = true
	}
	all = append([]string(nil), cands...)
	for _, p := range cands {
		tgt, err := e.stateAt(p, t, ^Seq(0))
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
			if cur.Exists && cur.State.Kind == KindDir {
				continue
			}
			have[a] = true
			all = append(all, a)
			added = append(added, a)
		}
	}
	return all, added, nil
}
