package rewind

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/zerofs/zerofs/blobstore"
	"github.com/zerofs/zerofs/eventlog"
)

// GC forgets states older than before: it appends a history_pruned event
// (none when before does not move the cut: nothing is forgotten),
// then removes every blob that no checkpoint after before names (including
// blobs no event names at all, left by a crash between blob and event).
// ErrNoSuchSeq when before > head. Changes wait while it runs, so no capture
// can name a blob it is removing.
func (e *Engine) GC(ctx context.Context, before Seq) (GCResult, error) {
	e.wsMu.Lock()
	defer e.wsMu.Unlock()
	if before > e.Head() {
		return GCResult{}, fmt.Errorf("%w: %d (head is %d)", ErrNoSuchSeq, before, e.Head())
	}
	if before < e.PrunedBefore() {
		before = e.PrunedBefore()
	}
	if err := e.Sync(); err != nil {
		return GCResult{}, err
	}
	res := GCResult{Before: before}
	// A cut that does not move forgets no state: it needs no event (the
	// blobs it may still remove are ones no state needs).
	if before > e.PrunedBefore() {
		ev, err := e.log.Append(ctx, eventlog.TypeHistoryPruned, PrunedPayload{Before: before})
		if err == nil {
			err = e.log.Sync()
		}
		if err != nil {
			return GCResult{}, fmt.Errorf("rewind: gc: %w", err)
		}
		if err := e.apply(ev); err != nil {
			return GCResult{}, err
		}
		res.Seq = ev.Seq
	}
	keep, err := e.blobsNamedAfter(before)
	if err != nil {
		return GCResult{}, err
	}
	pr, err := e.blobs.Prune(func(id blobstore.ID) bool { return keep[id] })
	res.BlobsRemoved, res.BytesFreed = len(pr.Removed), pr.BytesFreed
	if err != nil {
		return res, fmt.Errorf("rewind: gc: %w", err)
	}
	// The pruned records are gone from the index; a fresh snapshot keeps
	// the next mount from reading them again.
	if err := e.writeSnapshot(); err != nil {
		e.opts.Logger.Warn("rewind: could not save the index snapshot", "err", err)
	}
	return res, nil
}

// blobsNamedAfter is the set of blobs named by checkpoints with sequence >
// before: the only ones a state at or after before can need.
func (e *Engine) blobsNamedAfter(before Seq) (map[blobstore.ID]bool, error) {
	keep := map[blobstore.ID]bool{}
	for ev, err := range e.log.Events(before + 1) {
		if err != nil {
			return nil, err
		}
		if ev.Type != eventlog.TypeCheckpoint {
			continue
		}
		var cp Checkpoint
		if err := json.Unmarshal(ev.Payload, &cp); err != nil {
			return nil, fmt.Errorf("rewind: checkpoint %d: %w", ev.Seq, err)
		}
		for _, f := range cp.Files {
			if f.Blob == "" {
				continue
			}
			id, err := blobstore.ParseID(f.Blob)
			if err != nil {
				return nil, fmt.Errorf("rewind: checkpoint %d: %w", ev.Seq, err)
			}
			keep[id] = true
		}
	}
	return keep, nil
}
