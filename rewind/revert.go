package rewind

import (
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/zerofs/zerofs/record"
)

// ErrRenameRecords: a form that does not resolve rename records yet.
var ErrRenameRecords = errors.New("rewind: not supported across a directory rename record")

// resolveRevert plans the revert of the step holding req.Revert.
func (e *Engine) resolveRevert(req record.Request) (in intent, plan *rewindPlan, conflicts []string, session string, err error) {
	fail := func(err error) (intent, *rewindPlan, []string, string, error) {
		return intent{}, nil, nil, "", err
	}
	if req.Revert > e.Head() {
		return fail(e.refuseSeq(req.Revert))
	}
	sp := e.state.SpanOf(req.Revert, e.Head())
	if err := e.checkSeq(sp.Before); err != nil {
		return fail(err)
	}
	// The state after the step too: inside a thinned interval the index no
	// longer holds every later change, so conflicts could not be found.
	if err := e.checkSeq(sp.End); err != nil {
		return fail(err)
	}
	session = req.Session
	if session == "" && sp.Step != nil {
		session = sp.Step.Session
	}
	sc, err := e.interleaved(sp)
	if err != nil {
		return fail(err)
	}
	// after is the sequence whose state of a path is the one the step left:
	// the end of its span, or, when another session's step interleaves
	// with it, its last capture of the path.
	after := func(string) record.Seq { return sp.End }
	bad := map[string]bool{}
	var changed []string
	if sc != nil && e.index.HasMoves() && len(e.index.RenamesBetween(sp.Before, ^record.Seq(0))) > 0 {
		return fail(fmt.Errorf("%w: the revert of a step interleaved with another session's, with a directory rename recorded since, is not supported", ErrRenameRecords))
	}
	if sc == nil {
		// The paths the step changed: captured in it (or beneath a
		// directory it renamed), and different after it.
		inStep, err := e.changedIn(sp.Before, sp.End+1, ^record.Seq(0))
		if err != nil {
			return fail(err)
		}
		for _, p := range inStep {
			// A person's change in the step's span is not the step's
			// (person.go): left alone, or a conflict when the step
			// changed the path too.
			onlyPerson, mixed := e.personInSpan(p, sp.Before, sp.End)
			if onlyPerson {
				continue
			}
			differs, err := e.differsBetween(p, sp.Before, sp.End)
			if err != nil {
				return fail(err)
			}
			if differs {
				changed = append(changed, p)
				if mixed {
					bad[p] = true
				}
			}
		}
	} else {
		after = func(p string) record.Seq { return sc.last[p] }
		// The paths the step captured, wherever in the log, and different
		// after its last capture than before its first. A path another
		// step captured between the two (or before the first, after the
		// step began) changed in both: putting it back would undo the
		// other's change too, so it is a conflict.
		for p, first := range sc.first {
			differs, err := e.differsBetween(p, first-1, sc.last[p])
			if err != nil {
				return fail(err)
			}
			if differs {
				changed = append(changed, p)
				if sc.touchedBetween(p, sp.Before, sc.last[p]) {
					bad[p] = true
				}
			}
		}
	}
	sortParentsFirst(changed)
	// A conflict is a path whose state now is not the one the step left:
	// one of its paths, a path beneath one that the revert removes, or an
	// ancestor that must become a directory again.
	later, err := e.changedSince(sp.End, ^record.Seq(0))
	if err != nil {
		return fail(err)
	}
	if sc != nil {
		later = e.index.ChangedBetween(sp.Before, ^record.Seq(0))
	}
	for _, p := range changed {
		if bad[p] {
			continue
		}
		b, err := e.stateAt(p, after(p), ^record.Seq(0))
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
		a, err := e.stateAt(p, sp.Before, ^record.Seq(0))
		if err != nil {
			return fail(err)
		}
		if !cur.Exists || cur.State.Kind != record.KindDir || (a.Exists && a.State.Kind == record.KindDir) {
			continue
		}
		for _, q := range later {
			if !strings.HasPrefix(q, p+"/") || bad[q] {
				continue
			}
			qb, err := e.stateAt(q, after(p), ^record.Seq(0))
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
	cands, added, err := e.withAncestors(sp.Before, changed, nil)
	if err != nil {
		return fail(err)
	}
	for _, a := range added {
		bad[a] = true
	}
	ign := e.ignoreRules()
	for p := range bad {
		if e.ignored(ign, p, "", -1, false) {
			continue // the revert leaves it alone (ignore.go)
		}
		conflicts = append(conflicts, p)
	}
	sort.Strings(conflicts)
	ref := sp.Ref
	in = intent{Target: sp.Before, Narrow: true, Paths: cands, RevertOf: req.Revert, Force: req.Force && len(conflicts) > 0, Form: record.FormRevert, Step: &ref}
	plan, err = e.planPaths(sp.Before, ^record.Seq(0), cands)
	if err != nil {
		return fail(err)
	}
	return in, plan, conflicts, session, nil
}

// sameState reports whether two states of one path are equal: existence,
// kind, permission bits, content or target, and the kept xattrs (ACLs
// included) where both are known.
func (e *Engine) sameState(a, b Entry) (bool, error) {
	same, err := e.sameBody(a, b)
	if err != nil || !same {
		return same, err
	}
	return e.sameXattrs(a, b)
}

// sameBody is sameState without the xattrs.
func (e *Engine) sameBody(a, b Entry) (bool, error) {
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
	case record.KindFile:
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
	case record.KindSymlink:
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

// differsBetween says whether path p's state at sequence to differs from
// its state at from.
func (e *Engine) differsBetween(p string, from, to record.Seq) (bool, error) {
	a, err := e.stateAt(p, from, ^record.Seq(0))
	if err != nil {
		return false, err
	}
	b, err := e.stateAt(p, to, ^record.Seq(0))
	if err != nil {
		return false, err
	}
	same, err := e.sameState(a, b)
	return !same, err
}
