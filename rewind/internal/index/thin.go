package index

import (
	"fmt"
	"sort"
	"time"

	"github.com/zerofs/zerofs/blobstore"
	"github.com/zerofs/zerofs/record"
)

// Thinning keeps one state a day of old history (gc's ThinBefore). The
// log is append-only, so nothing in it is rewritten: a history_thinned
// event names intervals of sequences, and from then on the states strictly
// inside each interval no longer exist.
//
// For an interval (A, B), the state at A stays exact if, for each path,
// only the earliest record naming it with A < seq <= B is kept: the state
// at A is, per path, the first record after A, and later records of the
// same path up to B answer only states strictly inside the interval. The
// states at B and after use only records after B. So a thin drops, in
// each interval, every record but the first of each path, and gc removes
// the blobs only the dropped records needed.
//
// The kept states (the interval bounds) are the start of history, the
// first step of each UTC day (the state that day's first step began from:
// the workspace as the previous day left it), and ThinBefore itself; every
// state from ThinBefore on is untouched. The choice of days depends only
// on the steps' times in the log, so a later thin with a later ThinBefore
// keeps the same days and merely widens the last interval and adds new
// ones.
//
// State.Add folds the intervals in as it reads the log (foldThin), for the
// engine and for readers outside it (verify, status) alike, so they agree
// on which records survive.

// ThinDay is the day a step's time falls on: its UTC date (a variable so
// that a test can speak of days without waiting for them).
var ThinDay = func(t time.Time) int {
	y, m, d := t.UTC().Date()
	return y*10000 + int(m)*100 + d
}

// ThinnedAt returns the interval of ivs (sorted, apart) that holds the
// state t strictly inside it.
func ThinnedAt(ivs []record.ThinInterval, t record.Seq) (record.ThinInterval, bool) {
	i := sort.Search(len(ivs), func(i int) bool { return ivs[i].Before > t })
	if i < len(ivs) && ivs[i].After < t {
		return ivs[i], true
	}
	return record.ThinInterval{}, false
}

// mergeThin is the union of the states have and add give up, as sorted
// intervals apart from each other (two that share only a bound stay two:
// the bound is kept). Counts are not kept: the result is only for lookups
// and folds.
func mergeThin(have, add []record.ThinInterval) []record.ThinInterval {
	all := make([]record.ThinInterval, 0, len(have)+len(add))
	for _, iv := range have {
		all = append(all, record.ThinInterval{After: iv.After, Before: iv.Before})
	}
	for _, iv := range add {
		all = append(all, record.ThinInterval{After: iv.After, Before: iv.Before})
	}
	sort.Slice(all, func(i, j int) bool { return all[i].After < all[j].After })
	var out []record.ThinInterval
	for _, iv := range all {
		if n := len(out); n > 0 && iv.After+1 < out[n-1].Before {
			// They share a state strictly inside both: one interval.
			out[n-1].Before = max(out[n-1].Before, iv.Before)
			continue
		}
		out = append(out, iv)
	}
	return out
}

// foldThin folds a history_thinned event into the index: the merged
// intervals that take in one of p's are thinned (each record but the first
// of each path in (After, Before] dropped; thinning an interval twice drops
// nothing more). It returns the new merged intervals.
func foldThin(ix *Index, have []record.ThinInterval, p record.ThinnedPayload) []record.ThinInterval {
	merged := mergeThin(have, p.Intervals)
	for _, m := range merged {
		for _, iv := range p.Intervals {
			if iv.After >= m.After && iv.Before <= m.Before {
				ix.Thin(m.After, m.Before)
				break
			}
		}
	}
	return merged
}

// foldPrune drops the intervals that end at or before a gc's cut (their
// records went with the cut).
func foldPrune(have []record.ThinInterval, before record.Seq) []record.ThinInterval {
	var out []record.ThinInterval
	for _, iv := range have {
		if iv.Before > before {
			out = append(out, iv)
		}
	}
	return out
}

// Thin drops, for each path, every record with after < seq <= before but
// the first, and returns how many it dropped. Their bytes stay in the
// arena until the index is written out and read back (as prune's).
func (ix *Index) Thin(after, before record.Seq) int {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	ix.rewrites++
	return ix.thinLocked(after, before, true)
}

// thinCount is how many records Thin(after, before) would drop.
func (ix *Index) thinCount(after, before record.Seq) int {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	return ix.thinLocked(after, before, false)
}

func (ix *Index) thinLocked(after, before record.Seq, drop bool) int {
	n := 0
	// Renames inside the interval: the state at after may resolve through
	// them (renames.go), so their records stay, and so does the first
	// record beneath each destination after it.
	var renames []Rename
	if len(ix.moves) > 0 {
		renames = ix.renamesBetweenLocked(after, before+1)
	}
	for i := range ix.paths.n {
		pr := ix.paths.at(i)
		recs := pr.list()
		if len(recs) < 2 {
			continue // most paths: nothing to thin
		}
		lo, hi := pr.search(after), pr.search(before)
		if hi-lo < 2 {
			continue
		}
		var keep map[int]bool
		if len(ix.moves) > 0 {
			keep = ix.thinKeepLocked(pr, lo+1, hi, renames)
		}
		n += hi - lo - 1 - len(keep)
		if !drop {
			continue
		}
		kept := append(recs[:lo+1:lo+1], recs[hi:]...)
		if len(keep) > 0 {
			kept = append([]rec(nil), recs[:lo+1]...)
			for j := lo + 1; j < hi; j++ {
				if keep[j] {
					kept = append(kept, recs[j])
				}
			}
			kept = append(kept, recs[hi:]...)
		}
		pr.setRecs(kept)
	}
	return n
}

// BlobsAfter is the set of blobs named by the index's records with seq >
// after: the only ones a state at or after after can need.
func (ix *Index) BlobsAfter(after record.Seq) (map[blobstore.ID]bool, error) {
	keep := map[blobstore.ID]bool{}
	err := ix.RecordsAfter(after, func(seq record.Seq, st record.FileState) error {
		if st.Blob == "" {
			return nil
		}
		id, err := blobstore.ParseID(st.Blob)
		if err != nil {
			return fmt.Errorf("rewind: checkpoint %d: %w", seq, err)
		}
		keep[id] = true
		return nil
	})
	return keep, err
}

// RecordsAfter calls fn with every record with seq > after, path by path.
func (ix *Index) RecordsAfter(after record.Seq, fn func(seq record.Seq, st record.FileState) error) error {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	for i := range ix.paths.n {
		pr := ix.paths.at(i)
		for _, r := range pr.list()[pr.search(after):] {
			st := ix.arena.get(r.off)
			st.Path = pr.path
			if err := fn(r.seq, st); err != nil {
				return err
			}
		}
	}
	return nil
}

// StepStart is a step's tool_call: its sequence and time.
type StepStart struct {
	seq record.Seq
	at  time.Time
}

// PlanThin plans a thin of the history before before: the intervals
// between consecutive kept states (the start of history pruned, the first
// step of each UTC day, and before) that hold a state still there. steps
// are the log's tool_calls in order; have the intervals already thinned.
// A before inside a thinned interval becomes that interval's start. It
// returns the intervals, each with the steps that began inside it and are
// not gone already (Records is left for the index to count), and the
// effective before.
func PlanThin(steps []StepStart, pruned, before record.Seq, have []record.ThinInterval) ([]record.ThinInterval, record.Seq) {
	if iv, ok := ThinnedAt(have, before); ok {
		before = iv.After
	}
	if before <= pruned+1 {
		return nil, before
	}
	kept := []record.Seq{pruned}
	day, first := 0, true
	for _, s := range steps {
		if s.seq >= before {
			break
		}
		d := ThinDay(s.at)
		if !first && d == day {
			continue
		}
		day, first = d, false
		if _, gone := ThinnedAt(have, s.seq); s.seq > pruned && !gone {
			kept = append(kept, s.seq)
		}
	}
	kept = append(kept, before)
	var out []record.ThinInterval
	for i := 1; i < len(kept); i++ {
		a, b := kept[i-1], kept[i]
		if b <= a+1 {
			continue
		}
		if iv, ok := ThinnedAt(have, a+1); ok && iv.After <= a && iv.Before >= b {
			continue // gone already
		}
		iv := record.ThinInterval{After: a, Before: b}
		for _, s := range steps {
			if _, gone := ThinnedAt(have, s.seq); s.seq > a && s.seq < b && !gone {
				iv.Steps++
			}
		}
		out = append(out, iv)
	}
	return out, before
}

// Records calls fn with every surviving before-state.
func (s *State) Records(fn func(seq record.Seq, st record.FileState)) {
	s.ix.RecordsAfter(s.Pruned(), func(seq record.Seq, st record.FileState) error {
		fn(seq, st)
		return nil
	})
}

// PlanThin plans the thin a gc with ThinBefore before would make now
// (PlanThin over the state's steps), with each interval's Records counted,
// and the effective before. It changes nothing.
func (s *State) PlanThin(before record.Seq) ([]record.ThinInterval, record.Seq) {
	ivs, before := PlanThin(s.Steps(before), s.Pruned(), before, s.Thinned())
	for i := range ivs {
		ivs[i].Records = s.ix.thinCount(ivs[i].After, ivs[i].Before)
	}
	return ivs, before
}

// Thin folds in the thin a gc with ThinBefore before would make now, as
// if it had run (for "what would gc free"), and returns its intervals.
// Only a reader's copy of the state may be thinned this way: nothing
// records it in the log.
func (s *State) Thin(before record.Seq) []record.ThinInterval {
	ivs, _ := s.PlanThin(before)
	if len(ivs) > 0 {
		s.setThinned(foldThin(s.ix, s.Thinned(), record.ThinnedPayload{Intervals: ivs}))
	}
	return ivs
}
