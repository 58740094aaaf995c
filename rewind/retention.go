package rewind

import (
	"github.com/zerofs/zerofs/record"
	"github.com/zerofs/zerofs/rewind/internal/index"
)

// A Retention folds a log, read in order, exactly as the engine does (the
// same fold, index.State.Add), for readers outside the engine: which
// before-states survive, and so which blobs a kept state needs (verify),
// and what a gc would free (status: Thin).
type Retention struct{ s *index.State }

// NewRetention returns an empty Retention.
func NewRetention() *Retention { return &Retention{index.NewState()} }

// Add folds ev in; a damaged event is a *record.DamageError and folds in
// nothing.
func (r *Retention) Add(ev record.Event) error { return r.s.Add(ev) }

// NameAhead folds in, ahead of its turn, the names a stash_named event
// gives to records already folded (index.State.NameAhead); any other event
// is ignored.
func (r *Retention) NameAhead(ev record.Event) error { return r.s.NameAhead(ev) }

// Pruned is the start of history: the states before it are gone.
func (r *Retention) Pruned() record.Seq { return r.s.Pruned() }

// Thinned is the intervals of states thinned away, sorted.
func (r *Retention) Thinned() []record.ThinInterval { return r.s.Thinned() }

// Records calls fn for every before-state that survives the cut and the
// thins.
func (r *Retention) Records(fn func(seq record.Seq, st record.FileState)) { r.s.Records(fn) }

// Thin folds in the thin a gc with ThinBefore before would make now, as if
// it had run (for "what would gc free"), and returns its intervals; the
// log records nothing of it.
func (r *Retention) Thin(before record.Seq) []record.ThinInterval { return r.s.Thin(before) }

// Unnamed is the records whose stash no stash_named event has named yet.
func (r *Retention) Unnamed() []index.Unnamed { return r.s.Index().Unnamed() }

// HasUnnamed reports whether any record's stash is not named yet.
func (r *Retention) HasUnnamed() bool { return r.s.Index().HasUnnamed() }
