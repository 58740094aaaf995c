package rewind

import (
	"github.com/zerofs/zerofs/record"
	"github.com/zerofs/zerofs/rewind/internal/index"
)

// refuseSeq is the refusal of the state t in the engine's history.
func (e *Engine) refuseSeq(t record.Seq) *record.RefusedError {
	return Refuse(t, e.Head(), e.PrunedBefore(), e.Thinned())
}

// Refuse is the refusal of the state t in a history up to head, cut before
// pruned and thinned over thinned: above head (or below 0, which cannot
// be), pruned or thinned; nil when the history has t. The engine and a
// restore from a replica (which reads a history without an engine) refuse
// by the same rules.
func Refuse(t, head, pruned record.Seq, thinned []record.ThinInterval) *record.RefusedError {
	switch {
	case t > head:
		return &record.RefusedError{Refusal: record.RefusedNoSuchSeq, Seq: t, Head: head, PrunedBefore: pruned}
	case t < pruned:
		return &record.RefusedError{Refusal: record.RefusedPruned, Seq: t, Head: head, PrunedBefore: pruned}
	}
	if iv, ok := index.ThinnedAt(thinned, t); ok {
		return &record.RefusedError{Refusal: record.RefusedThinned, Seq: t, Head: head, PrunedBefore: pruned, Thinned: &iv}
	}
	return nil
}
