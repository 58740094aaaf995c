package rewind

import "github.com/zerofs/zerofs/rewind/internal/index"

// A Retention folds a log, read in order, exactly as the engine does (the
// same index.State.Add), for readers outside the engine: which
// before-states survive, and so which blobs a kept state needs (verify),
// and what a gc would free (status: Thin).
type Retention = index.State

// NewRetention returns an empty Retention.
func NewRetention() *Retention { return index.NewState() }
