package record

import (
	"errors"
	"fmt"
)

// ErrBeforeBaseline: the store holds a record in a format older than the
// store-format baseline this version reads (docs/design.md, The store).
// Such a store is refused, never misread.
var ErrBeforeBaseline = errors.New("record: store format older than this zerofs reads")

// BaselineError names a record from before the baseline: the store file,
// the log line (0 for the intent record) and what it lacks. errors.Is it
// with ErrBeforeBaseline.
type BaselineError struct {
	File string
	Line int
	What string
}

func (e *BaselineError) Error() string {
	at := e.File
	if e.Line > 0 {
		at = fmt.Sprintf("%s: line %d (sequence %d)", e.File, e.Line, e.Line)
	}
	return fmt.Sprintf("rewind: %s: %s: written by a zerofs older than the store format this version reads (see docs/design.md, The store)", at, e.What)
}

// Unwrap makes a *BaselineError an ErrBeforeBaseline.
func (e *BaselineError) Unwrap() error { return ErrBeforeBaseline }
