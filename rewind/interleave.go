package rewind

import (
	"github.com/zerofs/zerofs/record"
	"github.com/zerofs/zerofs/rewind/internal/index"
)

// stepCaptures is which paths one step captured, when its sequences
// interleave with another agent session's step or a person's change
// (session.go): its own
// captures, wherever they are in the log, and the other steps' captures
// after it began. A revert of such a step puts back what it changed and
// nothing the other step did, though their sequences are mixed.
type stepCaptures struct {
	// first and last are the step's first and last capture of each path.
	first, last map[string]record.Seq
	// others holds, for each path, the captures of other steps after the
	// step began (within the sequences read).
	others map[string][]record.Seq
}

// interleaved reads the log for the step sp (a tool_call) and returns its
// captures, or nil when nothing interleaves with it: no checkpoint in its
// span belongs to another step or is a person's, and none of its own lies
// outside. The log
// is read from the step on, through its span and, for a step of an agent
// session, on to where that session's step ended (its next step, or a
// rewind), since its captures may come after another session's steps.
// The caller holds wsMu.
func (e *Engine) interleaved(sp index.Span) (*stepCaptures, error) {
	if sp.Step == nil {
		return nil, nil
	}
	step := sp.Step.Seq
	limit := sp.End
	if sp.Step.Session != "" {
		limit = e.Head()
		for _, m := range e.state.Marks() {
			if m.Seq <= step {
				continue
			}
			if m.Kind == record.MarkRewind || m.Kind == record.MarkRewindCheckpoint || (m.Kind == record.MarkStep && m.Session == sp.Step.Session) {
				limit = m.Seq - 1
				break
			}
		}
	}
	sc := &stepCaptures{first: map[string]record.Seq{}, last: map[string]record.Seq{}, others: map[string][]record.Seq{}}
	mixed := false
	owner := step // the newest step or boundary before the event
	for ev, err := range e.log.Events(step + 1) {
		if err != nil {
			return nil, err
		}
		if ev.Seq > limit {
			break
		}
		switch ev.Type {
		case record.TypeToolCall, record.TypeTurn, record.TypeRewind:
			owner = ev.Seq
			continue
		case record.TypeCheckpoint:
		default:
			continue
		}
		v, err := record.DecodeEvent(e.log.Path(), ev)
		if err != nil {
			return nil, err
		}
		cp, _ := v.(record.Checkpoint)
		who := owner
		switch {
		case cp.Person:
			who = 0 // a person's change: no step's
		case cp.Step != 0:
			who = cp.Step
		}
		if (who == step) != (owner == step) {
			mixed = true
		}
		for _, f := range cp.Files {
			switch {
			case who != step:
				sc.others[f.Path] = append(sc.others[f.Path], ev.Seq)
			case sc.first[f.Path] == 0:
				sc.first[f.Path] = ev.Seq
				fallthrough
			default:
				sc.last[f.Path] = ev.Seq
			}
		}
	}
	if !mixed {
		return nil, nil
	}
	return sc, nil
}

// touchedBetween reports whether another step captured p after a and
// before b.
func (sc *stepCaptures) touchedBetween(p string, a, b record.Seq) bool {
	for _, s := range sc.others[p] {
		if a < s && s < b {
			return true
		}
	}
	return false
}
