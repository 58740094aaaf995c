package history

import (
	"errors"
	"fmt"

	"github.com/zerofs/zerofs/rewind"
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

// TurnUndoTarget is the turn `undo --turn` takes back: the turn of undid,
// the step a plain undo would take back now (the engine names it: a dry
// run of {"undo": true}). Rewinding to its sequence minus one takes back
// that step and every other change made since the prompt. ErrNoTurn when
// that step came before any turn (or is not a step).
func TurnUndoTarget(blocks []*Block, turns []Turn, undid rewind.StepRef) (Turn, error) {
	var b *Block
	for i := len(blocks) - 1; i >= 0; i-- {
		if blocks[i].Type == BlockStep && blocks[i].Seq == undid.Sequence {
			b = blocks[i]
			break
		}
	}
	if b == nil || undid.Kind == "rewind" {
		return Turn{}, fmt.Errorf("%w: the last action in effect (%d) is not a step", ErrNoTurn, undid.Sequence)
	}
	if b.Turn == 0 {
		return Turn{}, fmt.Errorf("%w: the last step in effect (%d %q) came before any prompt hook recorded a turn", ErrNoTurn, b.Seq, b.Label)
	}
	return FindTurn(turns, b.Turn)
}
