package rewind

import (
	"context"
	"errors"
	"fmt"

	"github.com/zerofs/zerofs/blobstore"
	"github.com/zerofs/zerofs/record"
	"github.com/zerofs/zerofs/rewind/internal/index"
)

// Stashes: an unlinked file (Change.Stash) is linked into the store unread
// (blobstore.Store.Stash) and its checkpoint record names the stash
// (FileState.Kept) instead of a blob, so an rm -rf costs a link and a
// record per file on the request path, no read and no hash. The namer
// (namer.go) then hashes each stash (blobstore.Store.HashStashes), appends
// one stash_named event for a batch of them (internal/index/named.go), and
// once that event is durable renames each stash to its blob, kept/<sha256>
// (blobstore.Store.MoveStashes).
//
// The order keeps every promise of a capture: the stash (data and entry)
// is in the store, durable per Options.Sync, before the checkpoint naming
// it, and that checkpoint is in the log before the unlink; the stash is
// durable before the stash_named event, and that event before the stash
// becomes its blob. A crash anywhere leaves a record naming a stash that
// is still there, or a named record whose stash is still there: the next
// Open names the one and moves the other before anything reads them. Anything reading
// a record still unnamed (a view, a rewind, gc, a fork) names every stash
// first (NameStashes), so no reader ever sees a file record without a blob.
// A stash the store no longer holds, or holds damaged, is named lost: its
// record becomes skipped with the reason, never invented content.
//
// A file about to be written that is large and mostly holes is stashed the
// same way, by a copy of its data (blobstore.Store.StashCopy, readState):
// its sha256 spans its whole length, holes hashed as zeros, seconds for a
// 10 GiB file that the writer's open would otherwise wait for. The copy
// is the store's own file, so nothing writes it; everything above holds
// for it as for an unlinked file's stash.

// wakeNamer tells the namer a stash was recorded.
func (e *Engine) wakeNamer() { e.namer.wake() }

// NameStashes names every stash a record names and the index does not
// have named yet: hashed, linked as blobs, one stash_named event per
// batch, each made durable before the stashes' own links go. It returns
// once all of them are named. Callers may hold the workspace lock.
func (e *Engine) NameStashes(ctx context.Context) error { return e.namer.nameAll(ctx) }

// nameStashesLocked is NameStashes' work, under the namer's lock.
func (e *Engine) nameStashesLocked(ctx context.Context) error {
	for {
		un := e.index.Unnamed()
		if len(un) == 0 {
			return nil
		}
		if len(un) > namerBatch {
			un = un[:namerBatch]
		}
		if err := e.nameBatch(ctx, un); err != nil {
			return err
		}
	}
}

// nameBatch names the stashes of un; the caller holds the namer's lock.
// Each stash is hashed, the stash_named event naming their blobs is made
// durable, and then each stash is renamed to its blob (one call where a
// link and an unlink were two): from the event on, a stash left by a crash
// is moved by the next Open (recoverStashes).
func (e *Engine) nameBatch(ctx context.Context, un []index.Unnamed) error {
	if err := e.syncFailed(); err != nil {
		return err
	}
	names := make([]record.Named, 0, len(un))
	moves := make([]blobstore.Moved, 0, len(un))
	kepts := make([]string, len(un))
	for i, u := range un {
		kepts[i] = u.Kept
	}
	hashed := e.blobs.HashStashes(kepts)
	for i, u := range un {
		id, n, err := hashed[i].ID, hashed[i].N, hashed[i].Err
		switch {
		case err == nil:
			names = append(names, record.Named{Sequence: u.Seq, Kept: u.Kept, Blob: id.String(), Bytes: n})
			moves = append(moves, blobstore.Moved{Stash: u.Kept, ID: id})
		case errors.Is(err, blobstore.ErrNotFound) && e.namedMissing(u, &names):
		case errors.Is(err, blobstore.ErrNotFound), errors.Is(err, blobstore.ErrCorrupt):
			e.opts.Logger.Warn("rewind: a removed file's stash is missing or damaged; its before-state is lost", "path", record.Readable(u.Path), "seq", u.Seq, "err", err)
			names = append(names, record.Named{Sequence: u.Seq, Kept: u.Kept, Lost: "its stash in the store was missing or damaged: " + err.Error()})
		default:
			return fmt.Errorf("rewind: name the stash of %q: %w", u.Path, err)
		}
	}
	crashPoint("stash:hashed")
	// The stashes (the blobs' content) are durable before the event that
	// names them.
	if !e.opts.Sync {
		if err := e.Sync(); err != nil {
			return err
		}
	}
	p := record.NamedPayload{Named: names}
	ev, err := e.log.Append(ctx, record.TypeStashNamed, p)
	if err != nil {
		return err
	}
	// And the event is durable before the stashes become their blobs.
	if !e.opts.Sync {
		if err := e.Sync(); err != nil {
			return err
		}
	}
	crashPoint("stash:named")
	// The index learns the blobs once they are there: until then a reader
	// finds the records unnamed and waits for this batch (nameAll).
	if err := e.blobs.MoveStashes(moves); err != nil {
		e.opts.Logger.Warn("rewind: could not move named stashes to their blobs; the next mount does", "err", err)
	}
	e.state.AddNamed(ev.Seq, p)
	var lost []string
	for _, n := range names {
		if n.Lost != "" {
			lost = append(lost, n.Kept)
		}
	}
	if err := e.blobs.Unstash(lost); err != nil {
		e.opts.Logger.Warn("rewind: could not remove damaged stashes; the next mount does", "err", err)
	}
	return nil
}

// unstashFailed removes the stashes of files whose checkpoint was never
// appended (their capture failed, so the unlink never happens).
func (e *Engine) unstashFailed(files []record.FileState) {
	var kept []string
	for _, f := range files {
		if f.Kept != "" {
			kept = append(kept, f.Kept)
		}
	}
	if len(kept) > 0 {
		e.blobs.Unstash(kept)
	}
}

// recoverStashes, at Open, names the stashes the log's records name, then
// makes every stash left in the store its blob: a crash after a
// stash_named event was durable and before its stashes were moved leaves
// them (the event names their blobs, which are not there yet), and one
// between a stash and its checkpoint leaves one that nothing names (its
// blob then waits for gc, like any blob no event refers to).
func (e *Engine) recoverStashes(ctx context.Context) error {
	if err := e.NameStashes(ctx); err != nil {
		return err
	}
	left, err := e.blobs.Stashes()
	if err != nil {
		return err
	}
	var moves []blobstore.Moved
	var damaged []string
	for _, k := range left {
		id, _, err := e.blobs.HashStash(k)
		switch {
		case err == nil:
			moves = append(moves, blobstore.Moved{Stash: k, ID: id})
		case errors.Is(err, blobstore.ErrNotFound):
		case errors.Is(err, blobstore.ErrCorrupt):
			damaged = append(damaged, k)
		default:
			return fmt.Errorf("rewind: recover stash %s: %w", k, err)
		}
	}
	if err := e.blobs.MoveStashes(moves); err != nil {
		return fmt.Errorf("rewind: recover stashes: %w", err)
	}
	if err := e.blobs.Unstash(damaged); err != nil {
		e.opts.Logger.Warn("rewind: a damaged stash could not be removed", "err", err)
	}
	return nil
}

// named returns rec with its blob, naming the stashes first if rec's is
// not named yet.
func (e *Engine) named(rec index.Record) (index.Record, error) {
	st := rec.State
	if st.Kept == "" || st.Blob != "" || st.Absent || st.Skipped {
		return rec, nil
	}
	if err := e.NameStashes(context.Background()); err != nil {
		return rec, err
	}
	p := st.Path
	again, ok := e.index.At(p, rec.Seq-1, rec.Seq+1)
	if !ok {
		return rec, fmt.Errorf("rewind: %q at checkpoint %d: record gone while naming its stash", p, rec.Seq)
	}
	return again, nil
}
