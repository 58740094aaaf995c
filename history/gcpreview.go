package history

import (
	"github.com/zerofs/zerofs/blobstore"
	"github.com/zerofs/zerofs/record"
	"github.com/zerofs/zerofs/rewind"
)

// A GCPreview is what a gc cutting at Before would do, from a read of the
// store that changes nothing (`zerofs gc --dry-run`).
type GCPreview struct {
	// Before is the cut (never below the present start of history).
	Before record.Seq
	// Steps is how many steps began between the present start of history
	// and Before: the states that would go.
	Steps int
	// Freed is the blobs that would go and their stored bytes (the packs'
	// own small overhead aside).
	Freed blobstore.PruneResult
}

// PreviewGC reads store (beside a daemon or not, without its lock) and
// says what a gc cutting at before would forget and free.
func PreviewGC(store string, before record.Seq) (GCPreview, error) {
	ret := rewind.NewRetention()
	var starts []record.Seq
	for ev, err := range StoreEvents(store) {
		if err != nil {
			return GCPreview{}, err
		}
		ret.Add(ev)
		if ev.Type == record.TypeToolCall {
			starts = append(starts, ev.Seq)
		}
	}
	p := GCPreview{Before: max(before, ret.Pruned())}
	// gc keeps every branch's base (and the blobs of its merged state).
	floor, pinned, err := rewind.BranchFloor(store)
	if err != nil {
		return GCPreview{}, err
	}
	if pinned {
		p.Before = min(p.Before, max(floor, ret.Pruned()))
	}
	for _, s := range starts {
		if s > ret.Pruned() && s < p.Before {
			p.Steps++
		}
	}
	keep := map[blobstore.ID]bool{}
	ret.Records(func(seq record.Seq, f record.FileState) {
		if seq <= p.Before {
			return
		}
		if id, err := blobstore.ParseID(f.Blob); err == nil {
			keep[id] = true
		}
	})
	if err := rewind.BranchBlobs(store, keep); err != nil {
		return GCPreview{}, err
	}
	_, _, would, err := StoreFigures(store, func(id blobstore.ID) bool { return keep[id] })
	p.Freed = would
	return p, err
}
