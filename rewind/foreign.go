package rewind

import (
	"sort"

	"github.com/zerofs/zerofs/record"
)

// Why a change is foreign: it was made outside the agent's steps.
const (
	// WhyBetweenSteps: made while no step was open (before the first step
	// or after a rewind), though the workspace has steps.
	WhyBetweenSteps = "between steps"
	// WhyOtherSession: made in a step of another agent session (as its
	// hook's session id tells).
	WhyOtherSession = "another session"
	// WhyPerson: a person's change (SPEC, Whose change it is): made by a
	// process outside every agent's process tree while agent sessions
	// were known.
	WhyPerson = "outside the agents"
)

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
		if !pe.cur.Exists || pe.cur.State.Kind != record.KindDir || (pe.tgt.Exists && pe.tgt.State.Kind == record.KindDir) {
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
// outside the agent's steps: by a person, between steps (when there are
// steps at all), or in a step of an agent session other than session.
func (e *Engine) foreign(plan *rewindPlan, session string) ([]record.Foreign, error) {
	ents, err := e.overwritten(plan)
	if err != nil {
		return nil, err
	}
	steps := e.state.HasSteps()
	var out []record.Foreign
	for _, pe := range ents {
		if !pe.cur.Exists {
			continue
		}
		rec, ok := e.index.Last(pe.path)
		if !ok {
			continue // as it was before history began
		}
		f := record.Foreign{Path: pe.path, Seq: rec.Seq, PID: rec.State.PID, Comm: rec.State.Comm}
		m, inStep := e.state.MarkAt(rec.Seq)
		switch {
		case e.state.IsPerson(rec.Seq):
			f.Why = WhyPerson
		case !inStep && steps:
			f.Why = WhyBetweenSteps
		case inStep && m.Kind == record.MarkStep && session != "" && m.Session != "" && m.Session != session:
			f.Why, f.Session = WhyOtherSession, m.Session
		default:
			continue
		}
		out = append(out, f)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out, nil
}
