package rewind

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
)

// Request is one rewind: of the whole workspace to Target, of some Paths
// only, or the Revert of one step. A DryRun of any of them changes and
// records nothing. The JSON form is what .zero/rewind accepts (see fs).
type Request struct {
	// Target is the state to go back to (unused by a revert).
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
	// DryRun: plan, report and preview, but change nothing.
	DryRun bool `json:"dryRun,omitempty"`
	// Session is the agent session on whose behalf the rewind runs, for
	// telling whose changes it overwrites; "" means the session of the
	// reverted step, or of the newest agent step the rewind undoes.
	Session string `json:"session,omitempty"`
	// Pick, when set, chooses Target under the workspace lock, after every
	// capture so far is durable, so no change or step lands between the
	// choice and the rewind (undo and redo choose with it; two of them
	// never choose the same step). An error from Pick is returned as it is
	// and nothing changes.
	Pick func() (Seq, error) `json:"-"`
}

var (
	// ErrConflict: a revert found the paths of its step changed since.
	ErrConflict = errors.New("rewind: later changes conflict with the revert")
	// ErrBadRequest: a Request that makes no sense (a revert with paths).
	ErrBadRequest = errors.New("rewind: bad request")
)

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

// Why a change is foreign: it was made outside the agent's steps.
const (
	// WhyBetweenSteps: made while no step was open (before the first step
	// or after a rewind), though the workspace has steps.
	WhyBetweenSteps = "between steps"
	// WhyOtherSession: made in a step of another agent session (as its
	// hook's session id tells).
	WhyOtherSession = "another session"
)

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
}

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
	var cerr error
	if len(conflicts) > 0 && !req.Force {
		cerr = &ConflictError{Step: req.Revert, Paths: conflicts}
	}
	if req.DryRun {
		res := Result{DryRun: true, Report: e.report(plan), Foreign: foreign, Conflicts: conflicts}
		res.Record = RewindPayload{TargetSequence: in.Target, Report: res.Report, Paths: in.Roots,
			RevertOf: in.RevertOf, Force: in.Force, Foreign: foreign}
		res.Preview, err = e.preview(plan)
		if err != nil {
			return Result{}, err
		}
		return res, cerr
	}
	if cerr != nil {
		return Result{Conflicts: conflicts}, cerr
	}
	if len(foreign) > 0 {
		paths := make([]string, len(foreign))
		for i, f := range foreign {
			paths[i] = f.Path + " (" + f.Why + ")"
		}
		e.opts.Logger.Warn("rewind: overwriting changes made outside the agent's steps", "paths", paths)
	}
	in.Foreign = foreign
	res, err := e.carryOut(ctx, in, plan)
	res.Conflicts = conflicts
	return res, err
}

// RewindFunc is Rewind to the target pick chooses under the workspace lock
// (see Request.Pick).
func (e *Engine) RewindFunc(ctx context.Context, pick func() (Seq, error)) (Result, error) {
	return e.Apply(ctx, Request{Pick: pick})
}

// resolve turns req into the intent and plan to carry out, the conflicts
// of a revert, and the agent session it acts for. The caller holds wsMu.
func (e *Engine) resolve(req Request) (in intent, plan *rewindPlan, conflicts []string, session string, err error) {
	if req.Revert != 0 {
		if len(req.Paths) > 0 {
			return in, nil, nil, "", fmt.Errorf("%w: a revert takes no paths", ErrBadRequest)
		}
		return e.resolveRevert(req)
	}
	if req.Pick != nil {
		if req.Target, err = req.Pick(); err != nil {
			return in, nil, nil, "", err
		}
	}
	if err := e.checkSeq(req.Target); err != nil {
		return in, nil, nil, "", err
	}
	session = req.Session
	if session == "" {
		session = e.latestSession(req.Target)
	}
	roots, err := cleanRoots(req.Paths)
	if err != nil {
		return in, nil, nil, "", err
	}
	in = intent{Target: req.Target}
	if roots == nil {
		plan, err = e.plan(req.Target, ^Seq(0))
		return in, plan, nil, session, err
	}
	var cands []string
	for _, p := range e.index.changedBetween(req.Target, ^Seq(0)) {
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
		for a, _ := splitPath(p); a != ""; a, _ = splitPath(a) {
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

// resolveRevert plans the revert of the step holding req.Revert.
func (e *Engine) resolveRevert(req Request) (in intent, plan *rewindPlan, conflicts []string, session string, err error) {
	fail := func(err error) (intent, *rewindPlan, []string, string, error) {
		return intent{}, nil, nil, "", err
	}
	if req.Revert > e.Head() {
		return fail(fmt.Errorf("%w: %d (head is %d)", ErrNoSuchSeq, req.Revert, e.Head()))
	}
	sp := e.spanOf(req.Revert)
	if err := e.checkSeq(sp.before); err != nil {
		return fail(err)
	}
	// The state after the step too: inside a thinned interval the index no
	// longer holds every later change, so conflicts could not be found.
	if err := e.checkSeq(sp.end); err != nil {
		return fail(err)
	}
	session = req.Session
	if session == "" && sp.step != nil {
		session = sp.step.session
	}
	// The paths the step changed: captured in it, and different after it.
	var changed []string
	for _, p := range e.index.changedBetween(sp.before, sp.end+1) {
		a, err := e.stateAt(p, sp.before, ^Seq(0))
		if err != nil {
			return fail(err)
		}
		b, err := e.stateAt(p, sp.end, ^Seq(0))
		if err != nil {
			return fail(err)
		}
		same, err := e.sameState(a, b)
		if err != nil {
			return fail(err)
		}
		if !same {
			changed = append(changed, p)
		}
	}
	sortParentsFirst(changed)
	// A conflict is a path whose state now is not the one the step left:
	// one of its paths, a path beneath one that the revert removes, or an
	// ancestor that must become a directory again.
	bad := map[string]bool{}
	later := e.index.changedBetween(sp.end, ^Seq(0))
	for _, p := range changed {
		b, err := e.stateAt(p, sp.end, ^Seq(0))
		if err != nil {
			return fail(err)
		}
		cur, err := e.live(p)
		if err != nil {
			return fail(err)
		}
		same, err := e.sameState(b, cur)
		if err != nil {
			return fail(err)
		}
		if !same {
			bad[p] = true
			continue
		}
		a, err := e.stateAt(p, sp.before, ^Seq(0))
		if err != nil {
			return fail(err)
		}
		if !cur.Exists || cur.State.Kind != KindDir || (a.Exists && a.State.Kind == KindDir) {
			continue
		}
		for _, q := range later {
			if !strings.HasPrefix(q, p+"/") || bad[q] {
				continue
			}
			qb, err := e.stateAt(q, sp.end, ^Seq(0))
			if err != nil {
				return fail(err)
			}
			qc, err := e.live(q)
			if err != nil {
				return fail(err)
			}
			if same, err := e.sameState(qb, qc); err != nil {
				return fail(err)
			} else if !same {
				bad[q] = true
			}
		}
	}
	cands, added, err := e.withAncestors(sp.before, changed, nil)
	if err != nil {
		return fail(err)
	}
	for _, a := range added {
		bad[a] = true
	}
	for p := range bad {
		conflicts = append(conflicts, p)
	}
	sort.Strings(conflicts)
	in = intent{Target: sp.before, Narrow: true, Paths: cands, RevertOf: req.Revert, Force: req.Force && len(conflicts) > 0}
	plan, err = e.planPaths(sp.before, ^Seq(0), cands)
	if err != nil {
		return fail(err)
	}
	return in, plan, conflicts, session, nil
}

// sameState reports whether two states of one path are equal: existence,
// kind, permission bits, and content or target.
func (e *Engine) sameState(a, b Entry) (bool, error) {
	if a.Exists != b.Exists {
		return false, nil
	}
	if !a.Exists {
		return true, nil
	}
	x, y := a.State, b.State
	if x.Kind != y.Kind || x.Mode != y.Mode || x.Skipped != y.Skipped {
		return false, nil
	}
	switch x.Kind {
	case KindFile:
		if x.Skipped {
			return a.From == b.From, nil
		}
		if x.Bytes != y.Bytes {
			return false, nil
		}
		hx, err := e.entryHash(a)
		if err != nil {
			return false, err
		}
		hy, err := e.entryHash(b)
		if err != nil {
			return false, err
		}
		return hx == hy, nil
	case KindSymlink:
		tx, err := e.ReadLink(a)
		if err != nil {
			return false, err
		}
		ty, err := e.ReadLink(b)
		if err != nil {
			return false, err
		}
		return tx == ty, nil
	}
	return true, nil
}

// entryHash is a file state's content hash: recorded, or of the live file.
func (e *Engine) entryHash(ent Entry) (string, error) {
	if ent.Live {
		return e.hashLive(ent.State.Path)
	}
	return ent.State.Blob, nil
}

// overwritten lists the paths whose present state plan replaces or removes,
// with the entries beneath each directory it removes.
func (e *Engine) overwritten(plan *rewindPlan) ([]planEntry, error) {
	var out []planEntry
	listed := map[string]bool{}
	for _, pe := range plan.entries {
		listed[pe.path] = true
	}
	for _, pe := range plan.entries {
		out = append(out, pe)
		if !pe.cur.Exists || pe.cur.State.Kind != KindDir || (pe.tgt.Exists && pe.tgt.State.Kind == KindDir) {
			continue
		}
		var walkErr error
		err := e.walk(pe.path, func(q string) {
			if listed[q] || walkErr != nil {
				return
			}
			listed[q] = true
			cur, err := e.live(q)
			if err != nil {
				walkErr = err
				return
			}
			out = append(out, planEntry{path: q, cur: cur})
		})
		if err == nil {
			err = walkErr
		}
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// foreign lists the paths plan overwrites whose present state was made
// outside the agent's steps: between steps (when there are steps at all),
// or in a step of an agent session other than session.
func (e *Engine) foreign(plan *rewindPlan, session string) ([]Foreign, error) {
	ents, err := e.overwritten(plan)
	if err != nil {
		return nil, err
	}
	steps := e.hasSteps()
	var out []Foreign
	for _, pe := range ents {
		if !pe.cur.Exists {
			continue
		}
		rec, ok := e.index.last(pe.path)
		if !ok {
			continue // as it was before history began
		}
		f := Foreign{Path: pe.path, Seq: rec.seq, PID: rec.st.PID, Comm: rec.st.Comm}
		m, inStep := e.markAt(rec.seq)
		switch {
		case !inStep && steps:
			f.Why = WhyBetweenSteps
		case inStep && m.kind == markStep && session != "" && m.session != "" && m.session != session:
			f.Why, f.Session = WhyOtherSession, m.session
		default:
			continue
		}
		out = append(out, f)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out, nil
}
