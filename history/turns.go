package history

import (
	"fmt"

	"github.com/zerofs/zerofs/record"
)

// Turns group steps by the prompt that led to them (SPEC: the turn event).
// Taking a turn back is a rewind to the state just before its turn event:
// a turn changes no file, so that is the state after everything before the
// prompt and before everything after it, whichever step it landed in.

// TurnError names a sequence that is not a turn.
type TurnError struct{ Seq record.Seq }

func (e *TurnError) Error() string {
	return fmt.Sprintf("%d is not a turn (zerofs log shows each turn's sequence)", e.Seq)
}

// FindTurn is the turn whose event has sequence seq.
func FindTurn(turns []Turn, seq record.Seq) (Turn, error) {
	for _, t := range turns {
		if t.Seq == seq {
			return t, nil
		}
	}
	return Turn{}, &TurnError{Seq: seq}
}
