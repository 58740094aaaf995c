package rewind

import (
	"context"
	"fmt"
	"os"

	"github.com/zerofs/zerofs/blobstore"
	"github.com/zerofs/zerofs/record"
	"github.com/zerofs/zerofs/rewind/internal/index"
)

// GC forgets states older than before: it appends a history_pruned event
// (none when before does not move the cut: nothing is forgotten),
// then removes every blob that no kept state needs (including blobs no
// event names at all, left by a crash between blob and event).
// ErrNoSuchSeq when before > head. Changes wait while it runs, so no capture
// can name a blob it is removing.
func (e *Engine) GC(ctx context.Context, before record.Seq) (record.GCResult, error) {
	return e.GCWith(ctx, record.GCRequest{Before: before})
}

// GCWith is GC with thinning: after the cut (if any), when req.ThinBefore
// is set, it plans the thin (internal/index/thin.go), appends the history_thinned event
// naming exactly the intervals that go (none when nothing would), folds it
// into the index, and only then removes the blobs that no surviving
// before-state names. A crash at any point leaves either no event (nothing
// went) or the event with some blobs it let go still there (the next gc
// removes them): never a kept state without its blob.
func (e *Engine) GCWith(ctx context.Context, req record.GCRequest) (record.GCResult, error) {
	return e.gc(ctx, req, record.PrunedPayload{Reason: "gc"})
}

func (e *Engine) gc(ctx context.Context, req record.GCRequest, pp record.PrunedPayload) (record.GCResult, error) {
	res, err := e.gcHistory(ctx, req, pp)
	if err != nil {
		return res, err
	}
	// The pruned records are gone from the index; a fresh snapshot keeps
	// the next mount from reading them again. It is encoded after the
	// workspace lock is let go, as the snapshotter's are.
	if err := e.writeSnapshotBehind(); err != nil {
		e.opts.Logger.Warn("rewind: could not save the index snapshot", "err", err)
	}
	return res, nil
}

// gcHistory is gc's work under the workspace lock: the events, and the
// blobs no kept state needs removed.
func (e *Engine) gcHistory(ctx context.Context, req record.GCRequest, pp record.PrunedPayload) (record.GCResult, error) {
	// Naming the stashes (hashing: seconds after an rm -rf of a large
	// tree) and making the captures so far durable need no lock: done
	// first, they leave the gc under the lock only what came meanwhile.
	if err := e.NameStashes(ctx); err != nil {
		return record.GCResult{}, err
	}
	if err := e.preSync(); err != nil {
		return record.GCResult{}, err
	}
	e.wsMu.Lock()
	defer e.wsMu.Unlock()
	if err := e.NameStashes(ctx); err != nil {
		return record.GCResult{}, err
	}
	before := req.Before
	for _, s := range []record.Seq{req.Before, req.ThinBefore} {
		if s > e.Head() {
			return record.GCResult{}, e.refuseSeq(s)
		}
	}
	if before < e.PrunedBefore() {
		before = e.PrunedBefore()
	}
	if iv, ok := index.ThinnedAt(e.Thinned(), before); ok {
		before = iv.Before
	}
	// A branch's base stays: the cut (and thinning) stops at the oldest
	// base of a branch this store keeps.
	floor, pinned, err := e.branchFloor()
	if err != nil {
		return record.GCResult{}, err
	}
	if pinned {
		before = min(before, max(floor, e.PrunedBefore()))
		req.ThinBefore = min(req.ThinBefore, floor)
	}
	if err := e.Sync(); err != nil {
		return record.GCResult{}, err
	}
	steps, err := e.stepsBetween(e.PrunedBefore(), before)
	if err != nil {
		return record.GCResult{}, err
	}
	res := record.GCResult{Before: before, Steps: steps}
	// A cut that does not move forgets no state: it needs no event (the
	// blobs it may still remove are ones no state needs).
	if before > e.PrunedBefore() {
		pp.Before, pp.Steps = before, steps
		ev, err := e.log.Append(ctx, record.TypeHistoryPruned, pp)
		if err == nil {
			err = e.log.Sync()
		}
		if err != nil {
			return record.GCResult{}, fmt.Errorf("rewind: gc: %w", err)
		}
		if err := e.state.Add(ev); err != nil {
			return record.GCResult{}, err
		}
		res.Seq = ev.Seq
	}
	if req.ThinBefore > e.PrunedBefore() {
		tp, err := e.planThin(req.ThinBefore)
		if err != nil {
			return res, err
		}
		if len(tp.Intervals) > 0 {
			crashPoint("thin:planned")
			ev, err := e.log.Append(ctx, record.TypeHistoryThinned, tp)
			if err == nil {
				err = e.log.Sync()
			}
			if err != nil {
				return res, fmt.Errorf("rewind: gc: thin: %w", err)
			}
			if err := e.state.Add(ev); err != nil {
				return res, err
			}
			res.ThinSeq, res.Thinned = ev.Seq, &tp
			crashPoint("thin:appended")
		}
	}
	keep, err := e.blobsNamedAfter(e.PrunedBefore())
	if err != nil {
		return res, err
	}
	if err := e.branchBlobs(keep); err != nil {
		return res, err
	}
	pr, err := e.blobs.PruneWith(func(id blobstore.ID) bool { return keep[id] }, ProgressIn(ctx))
	res.BlobsRemoved, res.BytesFreed = len(pr.Removed), pr.BytesFreed
	if err != nil {
		return res, fmt.Errorf("rewind: gc: %w", err)
	}
	return res, nil
}

// blobsNamedAfter is the set of blobs named by the surviving before-states
// (the index's records: thinning dropped some) with sequence > before: the
// only ones a state at or after before can need.
func (e *Engine) blobsNamedAfter(before record.Seq) (map[blobstore.ID]bool, error) {
	return e.index.BlobsAfter(before)
}

// planThin plans a thin of the history before before (index.PlanThin over
// the state's steps) with the records each interval drops. The caller
// holds wsMu for writing.
func (e *Engine) planThin(before record.Seq) (record.ThinnedPayload, error) {
	ivs, before := e.state.PlanThin(before)
	tp := record.ThinnedPayload{Reason: "gc", Before: before, Intervals: ivs}
	for _, iv := range tp.Intervals {
		tp.Steps += iv.Steps
		tp.Records += iv.Records
	}
	return tp, nil
}

// stepsBetween counts the tool_call events from seq from up to (not
// including) seq to.
func (e *Engine) stepsBetween(from, seq record.Seq) (int, error) {
	n := 0
	for ev, err := range e.log.Events(max(from, 1)) {
		if err != nil {
			return 0, err
		}
		if ev.Seq >= seq {
			break
		}
		if ev.Type == record.TypeToolCall {
			n++
		}
	}
	return n, nil
}

// storeBytes is the store's size: the log and the blobs.
func (e *Engine) storeBytes() int64 {
	n := e.blobs.Size()
	if fi, err := os.Stat(e.log.Path()); err == nil {
		n += fi.Size()
	}
	return n
}

// pruneToBound is the pruner's work (bound.go): enforceBound, its
// failure logged.
func (e *Engine) pruneToBound(ctx context.Context) {
	if _, err := e.enforceBound(ctx); err != nil {
		e.opts.Logger.Error("rewind: cannot keep the store within its bound", "max", e.opts.MaxStoreSize, "err", err)
	}
}

// enforceBound prunes the oldest history while the store is larger than
// Options.MaxStoreSize: it cuts at the oldest step boundary that brings the
// store within the bound (with a tenth to spare, so that the next steps do
// not prune again at once), found by bisection over the steps (what a cut
// frees grows with the cut), and never later than the current step's
// start. It reports whether it pruned.
func (e *Engine) enforceBound(ctx context.Context) (bool, error) {
	size := e.storeBytes()
	limit := e.opts.MaxStoreSize
	if size <= limit {
		return false, nil
	}
	target := size - limit + limit/10
	var cuts []record.Seq
	floor := e.PrunedBefore()
	for ev, err := range e.log.Events(floor + 1) {
		if err != nil {
			return false, err
		}
		if ev.Type == record.TypeToolCall {
			cuts = append(cuts, ev.Seq)
		}
	}
	last := e.Step().Seq
	for len(cuts) > 0 && cuts[len(cuts)-1] > last {
		cuts = cuts[:len(cuts)-1]
	}
	if len(cuts) == 0 {
		return false, nil
	}
	frees := func(cut record.Seq) (int64, error) {
		keep, err := e.blobsNamedAfter(cut)
		if err != nil {
			return 0, err
		}
		r, err := e.blobs.Reclaimable(func(id blobstore.ID) bool { return keep[id] })
		return r.BytesFreed, err
	}
	lo, hi := 0, len(cuts)-1
	if f, err := frees(cuts[hi]); err != nil {
		return false, err
	} else if f < target {
		lo = hi // even the latest cut does not suffice: take it
	}
	for lo < hi {
		mid := (lo + hi) / 2
		f, err := frees(cuts[mid])
		if err != nil {
			return false, err
		}
		if f >= target {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	if cuts[lo] <= floor {
		return false, nil
	}
	res, err := e.gc(ctx, record.GCRequest{Before: cuts[lo]}, record.PrunedPayload{Reason: "max-store-size", StoreBytes: size, MaxStoreSize: limit})
	if err != nil {
		return false, err
	}
	e.opts.Logger.Info("rewind: store over its bound: pruned the oldest history",
		"before", res.Before, "blobs", res.BlobsRemoved, "freed", res.BytesFreed, "size", size, "max", limit)
	return true, nil
}
