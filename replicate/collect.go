package replicate

import (
	"context"
	"sort"

	"github.com/zerofs/zerofs/blobstore"
	"github.com/zerofs/zerofs/record"
)

// collect deletes from the replica what no state it offers needs any
// more: this is how a local gc (a cut, a thin) and compaction reach the
// bucket. The replica offers the states of its newest base's history (a
// restore reads that base and the log up to it), so it keeps:
//
//   - the newest base, and the segments of the chain (the rest were
//     merged into a segment of a higher level, or are older bases);
//   - the blobs that base names, the blobs of the before-states its
//     history keeps (the log up to it folded as the engine folds it:
//     what a cut or a thin dropped is not kept), and every blob the log
//     after it names (the next base's history may keep them).
//
// A new base is written before anything it makes unneeded is deleted, and
// every object is deleted only when the newest base does not need it, so
// a crash at any point of the deletion leaves a replica that restores
// every state it offers; the next run deletes the rest. A restore that
// listed the replica before a newer base was written may find an object
// gone: it reads the listing again (Restore).
func (r *Replicator) collect(ctx context.Context) error {
	if r.baseBlobs == nil {
		b, err := fetchBase(ctx, r.b, r.codec, r.base)
		if err != nil {
			return err
		}
		r.baseBlobs = r.blobNames(b)
	}
	ret, err := r.foldTo(r.base.Seq)
	if err != nil {
		return err
	}
	keep := map[string]bool{}
	for n := range r.baseBlobs {
		keep[n] = true
	}
	ret.Records(func(_ record.Seq, fs record.FileState) {
		if id, err := blobstore.ParseID(fs.Blob); err == nil {
			keep[r.codec.blobName(id)] = true
		}
	})
	logged := r.State().Logged
	for ev, err := range r.eng.Log().Events(r.base.Seq + 1) {
		if err != nil {
			return err
		}
		if ev.Seq > logged {
			break
		}
		ids, err := blobsOf(ev)
		if err != nil {
			return err
		}
		for _, id := range ids {
			keep[r.codec.blobName(id)] = true
		}
	}
	run, _ := chain(r.segs)
	inRun := map[string]bool{}
	for _, s := range run {
		inRun[s.Name] = true
	}
	var drop []string
	for _, b := range r.bases {
		if b.Name != r.base.Name {
			drop = append(drop, b.Name)
		}
	}
	for _, s := range r.segs {
		if !inRun[s.Name] {
			drop = append(drop, s.Name)
		}
	}
	var blobs []string
	for n := range r.known {
		if !keep[n] {
			blobs = append(blobs, n)
		}
	}
	sort.Strings(blobs)
	drop = append(drop, blobs...)
	for _, n := range drop {
		if err := r.b.Delete(ctx, n); err != nil {
			return err
		}
		r.forget(n)
		if afterDelete != nil {
			afterDelete(n)
		}
	}
	r.collectDue = false
	if len(drop) > 0 {
		return r.save()
	}
	return nil
}

// afterDelete, when set (a test), is called after each object deleted.
var afterDelete func(name string)

// forget notes that the object name is gone from the replica.
func (r *Replicator) forget(name string) {
	// The live cache names blobs of the newest base only, never deleted.
	delete(r.known, name)
	segs := r.segs[:0]
	for _, s := range r.segs {
		if s.Name != name {
			segs = append(segs, s)
		}
	}
	r.segs = segs
	bases := r.bases[:0]
	for _, b := range r.bases {
		if b.Name != name {
			bases = append(bases, b)
		}
	}
	r.bases = bases
	r.mu.Lock()
	r.st.Deleted++
	r.mu.Unlock()
}
