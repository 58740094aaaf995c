package rewind

import (
	"context"
	"errors"
	"fmt"

	"golang.org/x/sys/unix"

	"github.com/zerofs/zerofs/blobstore"
	"github.com/zerofs/zerofs/record"
	"github.com/zerofs/zerofs/rewind/internal/index"
)

// An unlink's stash by a move: where StashAt links the file into the store
// and the unlink removes its name (two calls), the capture records a stash
// name that does not exist yet, and the unlink is the rename of the file
// into the store under that name (blobstore.Store.PrepareMove, Move.Do).
// The checkpoint is in the log before the rename, as before the unlink. A
// crash between the two leaves a record naming a stash that is not there
// while the file is still in the workspace, unchanged: naming it then
// stores the file from its path when it is still as recorded (nameMissing).

// moveSlot receives the move a capture prepared (CaptureUnlinkLocked).
type moveSlot struct{ m *blobstore.Move }

// Removal is how a name CaptureUnlinkLocked captured is removed.
type Removal struct {
	e *Engine
	m *blobstore.Move
}

// CaptureUnlinkLocked is CaptureLocked of c, a name about to be unlinked
// (c.Removed, c.Stash, c.InDir with c.Dirfd its parent). The caller then
// removes the name with Removal.Unlink, which renames it into the store
// when the capture stashed it that way and unlinks it otherwise; on an
// error nothing was captured and the name must stay.
func (e *Engine) CaptureUnlinkLocked(ctx context.Context, who Caller, c Change) (*Removal, error) {
	slot := &moveSlot{}
	c.move = slot
	if err := e.CaptureLocked(ctx, who, c); err != nil {
		if slot.m != nil {
			slot.m.Cancel()
		}
		return nil, err
	}
	return &Removal{e: e, m: slot.m}, nil
}

// Unlink removes name from the directory open at dirfd: by moving it into
// the store as the stash its record names, or by unlink(2). It returns the
// error of that rename or unlink (a unix.Errno), or of storing the file
// when the store could take neither its rename nor a link (then nothing
// was removed). After a failed unlink the name stays, linked as the
// stash, and the caller names the stashes at once (Engine.NameStashes).
func (r *Removal) Unlink(ctx context.Context, dirfd int, name string, unlink func() error) error {
	if r.m == nil {
		return unlink()
	}
	crashPoint("stash:recorded")
	stashed, err := r.m.Do(dirfd, name)
	if stashed || !errors.Is(err, unix.EXDEV) {
		return err // a failed rename left the name: the caller names the stash
	}
	// Neither moved nor linked because the store is on another mount (a
	// kernel whose statx gives no mount id; PrepareMove refuses such a
	// file otherwise): the record's stash is named from the file, still
	// in place (nameMissing), before the name goes.
	if nerr := r.e.NameStashes(ctx); nerr != nil {
		return nerr
	}
	return unlink()
}

// stashByMove captures p, about to be unlinked from dirfd, as a stash the
// unlink will move into the store: one statx (PrepareMove) and its xattrs
// read by name through dirfd (none when the caller knows there are none),
// where StashAt costs a linkat and an lstat.
// moved is false, and nothing is prepared, when PrepareMove refuses it
// (the caller captures it as before).
func (e *Engine) stashByMove(p string, dirfd int, slot *moveSlot, noXattrs bool) (fs record.FileState, moved bool, err error) {
	_, name := index.SplitPath(p)
	m, st, ok, err := e.blobs.PrepareMove(dirfd, name, e.openForWrite)
	if err != nil || !ok {
		return record.FileState{}, false, err
	}
	if e.opts.MaxBlobSize > 0 && st.Size > e.opts.MaxBlobSize {
		m.Cancel() // recorded as skipped, as readStateAt does
		return record.FileState{}, false, nil
	}
	fs = record.FileState{Path: p, Kind: record.KindFile, Mode: st.Mode & 0o7777, Bytes: st.Size, Kept: m.Stash}
	setMeta(&fs, &st)
	if noXattrs {
		// The caller knows there are none (Change.NoXattrs).
	} else if fs.Xattrs, err = dirXattrs(dirfd, name); err != nil {
		m.Cancel()
		return record.FileState{}, false, fmt.Errorf("rewind: capture %q: %w", p, err)
	}
	slot.m = m
	return fs, true, nil
}

// nameMissing names u, whose stash is not in the store, by the file at
// u.Path when that is still the file u's record describes (a regular file
// of the recorded size, mode, owner and modification time): a removal by
// a move that never happened (the daemon died between the record and the
// rename, or the rename and the link after it both failed), whose file
// is still the before-state. The file is copied into the store. ok is
// false when it is not (the stash is then lost, as before).
func (e *Engine) nameMissing(u index.Unnamed) (n record.Named, ok bool) {
	rec, found := e.index.At(u.Path, u.Seq-1, u.Seq+1)
	if !found || rec.Seq != u.Seq || rec.State.Kept != u.Kept {
		return n, false
	}
	f, err := e.ws.openFile(u.Path)
	if err != nil {
		return n, false
	}
	defer f.Close()
	var st unix.Stat_t
	if unix.Fstat(int(f.Fd()), &st) != nil || st.Mode&unix.S_IFMT != unix.S_IFREG {
		return n, false
	}
	var now record.FileState
	setMeta(&now, &st)
	want := rec.State
	if st.Size != want.Bytes || st.Mode&0o7777 != want.Mode || want.UID == nil || *want.UID != *now.UID ||
		want.GID == nil || *want.GID != *now.GID || want.MTime == nil || !want.MTime.Equal(*now.MTime) {
		return n, false
	}
	id, size, err := e.blobs.Put(f)
	if err != nil || size != want.Bytes {
		return n, false
	}
	e.opts.Logger.Warn("rewind: a removed file's stash was never made; its file was still in place and is stored now", "path", record.Readable(u.Path), "seq", u.Seq)
	return record.Named{Sequence: u.Seq, Kept: u.Kept, Blob: id.String(), Bytes: size}, true
}

// namedMissing appends nameMissing's name for u to names, if it has one.
func (e *Engine) namedMissing(u index.Unnamed, names *[]record.Named) bool {
	n, ok := e.nameMissing(u)
	if ok {
		*names = append(*names, n)
	}
	return ok
}
