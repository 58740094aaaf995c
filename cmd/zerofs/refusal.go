package main

import (
	"errors"
	"fmt"

	"github.com/zerofs/zerofs/history"
	"github.com/zerofs/zerofs/internal/quote"
	"github.com/zerofs/zerofs/record"
)

// advise is the line the CLI prints for a failure: err's own words and,
// for a refusal (each kind the engine and the daemon hand back typed:
// record.Refusal), what to do next. The same refusal reads the same
// mounted and unmounted: the wording comes from the refusal's kind and
// details, never from where it was refused.
func advise(err error) string {
	msg := err.Error()
	var se *history.SeqError
	var re *record.RefusedError
	var te *history.TurnError
	var ce *record.ConflictError
	switch {
	case errors.As(err, &te):
		return msg // it names zerofs log already
	case errors.As(err, &se):
		switch {
		case se.Seq > se.Head:
			return fmt.Sprintf("%s: zerofs log lists the steps and their sequences", msg)
		case se.Seq < se.PrunedBefore:
			return fmt.Sprintf("%s by gc: %d is the oldest state left (zerofs log lists what remains)", msg, se.PrunedBefore)
		}
		if se.Thinned != nil {
			return fmt.Sprintf("%s: zerofs rewind %d or %d goes to the nearest state kept", msg, se.Thinned.After, se.Thinned.Before)
		}
		return msg + ": zerofs log lists what remains"
	case errors.As(err, &ce):
		return msg + ": zerofs log -- PATH shows a path's later changes; zerofs revert --force puts them back too"
	case !errors.As(err, &re):
		return msg
	}
	switch re.Refusal {
	case record.RefusedNothingToUndo:
		return "nothing to undo: no step or rewind is in effect (zerofs log shows the history; zerofs rewind SEQ goes to any state in it)"
	case record.RefusedNothingToRedo:
		return "nothing to redo: no undo is waiting to be redone, and a change since an undo ends the chain (zerofs log shows every state; zerofs rewind SEQ goes back to one)"
	case record.RefusedNoTurn:
		return msg + ": zerofs undo takes back the last action alone; zerofs hooks install AGENT records the prompts that begin turns"
	case record.RefusedNoSuchSeq:
		if re.Op != "" || re.Seq > re.Head {
			return fmt.Sprintf("%s: zerofs log lists the steps and their sequences", msg)
		}
		return msg
	case record.RefusedPruned:
		if re.Op != "" {
			return fmt.Sprintf("%s: zerofs rewind %d goes to the oldest state left", msg, re.PrunedBefore)
		}
		return fmt.Sprintf("%s: %d is the oldest state left (zerofs log lists what remains)", msg, re.PrunedBefore)
	case record.RefusedThinned:
		if re.Thinned != nil {
			return fmt.Sprintf("%s: zerofs rewind %d or %d goes to the nearest state kept", msg, re.Thinned.After, re.Thinned.Before)
		}
		return msg + ": zerofs log lists what remains"
	case record.RefusedNoSuchPath:
		return fmt.Sprintf("no such path at %d or now: %s (paths are relative to this directory; zerofs log --stat lists what each step changed)",
			re.Seq, quote.Names(re.Missing, ", "))
	case record.RefusedConflict:
		return msg + ": zerofs revert --force puts the later changes back too"
	case record.RefusedBadRequest:
		return msg + " (zerofs help rewind gives the forms a request takes)"
	case record.RefusedWorkspace:
		return msg
	case record.RefusedFailed:
		return msg + " (the store failed: the daemon's log is STORE/daemon.log, and zerofs verify checks the store)"
	}
	return msg
}
