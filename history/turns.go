package history

import (
	"errors"
	"fmt"
)

// Turns group steps by the prompt that led to them (SPEC: the turn event).
// Taking a turn back is a rewind to the state just before its turn event:
// a turn changes no file, so that is the state after everything before the
// prompt and before everything after it, whichever step it landed in.

// ErrNoTurn: there is no turn to take back (no prompt hook recorded one,
// or the steps in effect were made before the first turn).
var ErrNoTurn = errors.New("no turn to undo")

// TurnError names a sequence that is not a turn.
type TurnError struct{ Seq Seq }

func (e *TurnError) Error() string {
	return fmt.Sprintf("%d is not a turn (zerofs log shows each turn's sequence)", e.Seq)
}

// FindTurn is the turn whose event has sequence seq.
func FindTurn(turns []Turn, seq Seq) (Turn, error) {
	for _, t := range turns {
		if t.Seq == seq {
			return t, nil
		}
	}
	return Turn{}, &TurnError{Seq: seq}
}

// TurnUndoTarget is the turn `undo --turn` takes back: the turn of the
// newest step that changed something and is still in effect (as undo
// picks it). Rewinding to its sequence minus one takes back that step and
// every other change made since the prompt. ErrNoTurn when that step came
// before any turn; ErrNothingToUndo when no step is in effect.
func TurnUndoTarget(blocks []*Block, turns []Turn, prunedBefore Seq) (Turn, error) {
	b := inEffect(blocks, Now)
	if b == nil {
		return Turn{}, ErrNothingToUndo
	}
	if b.Turn == 0 {
		return Turn{}, fmt.Errorf("%w: the last step in effect (%d %q) came before any prompt hook recorded a turn", ErrNoTurn, b.Seq, b.Label)
	}
	t, err := FindTurn(turns, b.Turn)
	if err != nil {
		return Turn{}, err
	}
	if t.Seq-1 < prunedBefore {
		return t, &PrunedError{What: fmt.Sprintf("cannot undo turn %d", t.Seq), Seq: t.Seq - 1, PrunedBefore: prunedBefore}
	}
	return t, nil
}
