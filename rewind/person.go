package rewind

import (
	"sort"
	"strings"

	"github.com/zerofs/zerofs/record"
	"github.com/zerofs/zerofs/rewind/internal/index"
)

// A person's change (SPEC, Whose change it is) is a change made, while
// agent sessions are known, by a process outside every agent's process
// tree (session.go); its checkpoint is marked "person" and belongs to no
// step. The forms that take an agent's work back leave it alone:
//
//   - undo, redo and taking a turn back (a whole-workspace rewind to the
//     state before the action) keep every path a person changed after
//     their target, and every directory above one that they would replace
//     or remove (keepPersons): such a path stays as it is, and the result
//     names it (a Foreign with Kept);
//   - a revert takes back only its step's own captures (interleave.go),
//     and a path a person changed after the step is a conflict, as any
//     later change is.
//
// A whole rewind to a sequence, and a rewind of given paths, are asked for
// by state or by name: they overwrite a person's change and name it first
// (foreign.go).

// personRecords walks p's records after t, oldest first, calling fn with
// each and whether it is a person's.
func (e *Engine) personRecords(p string, t record.Seq, fn func(rec index.Record, person bool)) {
	for after := t; ; {
		rec, ok := e.index.At(p, after, ^record.Seq(0))
		if !ok {
			return
		}
		fn(rec, e.state.IsPerson(rec.Seq))
		after = rec.Seq
	}
}

// keepPersons takes out of plan (a rewind to t) every path whose state a
// person changed after t, with the directories above it that plan would
// replace or remove, and plans the rest again. It returns the new plan, the
// paths it kept and the paths it still restores (nil when it kept none, and
// the plan is unchanged).
func (e *Engine) keepPersons(t record.Seq, plan *rewindPlan) (*rewindPlan, []record.Foreign, []string, error) {
	if !e.state.HasPerson(t) {
		return plan, nil, nil, nil
	}
	ents, err := e.overwritten(plan)
	if err != nil {
		return nil, nil, nil, err
	}
	var kept []record.Foreign
	for _, pe := range ents {
		var last index.Record
		found := false
		e.personRecords(pe.path, t, func(rec index.Record, person bool) {
			if person {
				last, found = rec, true
			}
		})
		if found {
			kept = append(kept, record.Foreign{Path: pe.path, Seq: last.Seq, Why: WhyPerson, PID: last.State.PID, Comm: last.State.Comm, Kept: true})
		}
	}
	if len(kept) == 0 {
		return plan, nil, nil, nil
	}
	sort.Slice(kept, func(i, j int) bool { return kept[i].Path < kept[j].Path })
	keep := func(p string) bool {
		for _, k := range kept {
			if k.Path == p || p == "" || strings.HasPrefix(k.Path, p+"/") {
				return true
			}
		}
		return false
	}
	cands := []string{}
	for _, pe := range plan.entries {
		if !keep(pe.path) {
			cands = append(cands, pe.path)
		}
	}
	narrowed, err := e.planPaths(t, ^record.Seq(0), cands)
	if err != nil {
		return nil, nil, nil, err
	}
	return narrowed, kept, cands, nil
}

// personInSpan sorts a revert's path p by its captures after lo up to hi:
// only a person's (the step did not change it), or a person's among the
// step's (putting it back would take the person's change back too).
func (e *Engine) personInSpan(p string, lo, hi record.Seq) (onlyPerson, mixed bool) {
	persons, others := 0, 0
	e.personRecords(p, lo, func(rec index.Record, person bool) {
		if rec.Seq > hi {
			return
		}
		if person {
			persons++
		} else {
			others++
		}
	})
	return persons > 0 && others == 0, persons > 0 && others > 0
}
