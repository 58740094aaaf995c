package rewind

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"time"

	"golang.org/x/sys/unix"

	"github.com/zerofs/zerofs/blobstore"
	"github.com/zerofs/zerofs/internal/durable"
	"github.com/zerofs/zerofs/record"
)

// A branch's record and directories live in the store, in
// record.BranchesName/ID/: the engine makes them (a branch request, under
// the workspace lock, so that its base is pinned before anything can cut
// it) and removes them; the client (package branch) mounts the copy-up
// layer over @BASE/ and the branch's own zerofs over it.

// maxBranchRecord bounds a branch record read from the store.
const maxBranchRecord = 64 << 20

// branch carries out req.Branch: a new branch's record, or the removal of
// one.
func (e *Engine) branch(ctx context.Context, req record.Request) (record.RewindResult, error) {
	br := *req.Branch
	if req.DryRun || req.Target != 0 || len(req.Paths) > 0 {
		return record.RewindResult{}, fmt.Errorf("%w: a branch request goes with nothing else", record.ErrBadRequest)
	}
	e.wsMu.Lock()
	defer e.wsMu.Unlock()
	if br.Delete != "" {
		return e.deleteBranch(br.Delete)
	}
	if br.Dir == "" || !filepath.IsAbs(br.Dir) || filepath.Clean(br.Dir) != br.Dir {
		return record.RewindResult{}, fmt.Errorf("%w: branch directory %q is not a clean absolute path", record.ErrBadRequest, br.Dir)
	}
	recs, err := ReadBranches(e.opts.StoreDir)
	if err != nil {
		return record.RewindResult{}, err
	}
	for _, r := range recs {
		if r.Dir == br.Dir {
			return record.RewindResult{}, fmt.Errorf("%w: %s is a branch already (id %s)", record.ErrBadRequest, br.Dir, r.ID)
		}
	}
	if err := e.Sync(); err != nil {
		return record.RewindResult{}, err
	}
	var base record.Seq
	if br.At != nil {
		if r := e.refuseSeq(*br.At); r != nil {
			return record.RewindResult{}, r
		}
		base = *br.At
	} else {
		// Now: the state at head is stable only if every later change is
		// captured again, also to paths the current step captured already
		// (a rewind that changes nothing does the same). A file held open
		// for writing is captured at once, as at a step boundary: its
		// writes may bypass the daemon.
		e.capMu.Lock()
		e.captured = map[string]record.Seq{}
		e.capMu.Unlock()
		base = e.Head()
		if err := e.captureOpenWriters(ctx); err != nil {
			return record.RewindResult{}, err
		}
		if err := e.Sync(); err != nil {
			return record.RewindResult{}, err
		}
	}
	var idb [8]byte
	rand.Read(idb[:])
	rec := record.BranchRecord{ID: hex.EncodeToString(idb[:]), Dir: br.Dir, Base: base, Created: time.Now().UTC()}
	if err := writeBranch(e.opts.StoreDir, rec, true); err != nil {
		return record.RewindResult{}, err
	}
	return record.RewindResult{Unchanged: true, Branch: &rec, Report: record.Report{Skipped: []string{}},
		Record: record.RewindPayload{TargetSequence: base}}, nil
}

// writeBranch writes rec's record, making its directories first when
// fresh (the copy-up layer's upper and work directories and the branch's
// store, empty), each made durable before the record names them. A fresh
// branch is made whole under another name (new-ID, which ReadBranches
// skips) and renamed into place, so that a reader (a client listing the
// branches while another makes one: they read without the engine's lock)
// never finds a branch's directory without its record.
func writeBranch(store string, rec record.BranchRecord, fresh bool) error {
	branches := filepath.Join(store, record.BranchesName)
	dir := filepath.Join(branches, rec.ID)
	final := dir
	if fresh {
		if err := os.Mkdir(branches, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
			return fmt.Errorf("rewind: branch: %w", err)
		}
		dir = filepath.Join(branches, "new-"+rec.ID)
		if err := os.Mkdir(dir, 0o700); err != nil {
			return fmt.Errorf("rewind: branch: %w", err)
		}
		for _, n := range []string{record.BranchUpperName, record.BranchWorkName, record.BranchStoreName} {
			if err := os.Mkdir(filepath.Join(dir, n), 0o700); err != nil {
				return fmt.Errorf("rewind: branch: %w", err)
			}
		}
		if err := durable.SyncDir(dir); err != nil {
			return fmt.Errorf("rewind: branch: %w", err)
		}
	}
	b, err := json.MarshalIndent(rec, "", "  ")
	if err != nil {
		return err
	}
	if err := durable.WriteFileAtomic(dir, record.BranchRecordName, append(b, '\n'), 0o600); err != nil {
		return fmt.Errorf("rewind: branch: %w", err)
	}
	if fresh {
		if err := os.Rename(dir, final); err != nil {
			return fmt.Errorf("rewind: branch: %w", err)
		}
		if err := durable.SyncDir(branches); err != nil {
			return fmt.Errorf("rewind: branch: %w", err)
		}
	}
	return nil
}

// deleteBranch removes the branch id: its directory is first renamed
// aside (so no half-removed branch is ever read as one), then removed.
func (e *Engine) deleteBranch(id string) (record.RewindResult, error) {
	if err := record.CheckBranchID(id); err != nil {
		return record.RewindResult{}, fmt.Errorf("%w: %v", record.ErrBadRequest, err)
	}
	recs, err := ReadBranches(e.opts.StoreDir)
	if err != nil {
		return record.RewindResult{}, err
	}
	var rec *record.BranchRecord
	for i := range recs {
		if recs[i].ID == id {
			rec = &recs[i]
		}
	}
	if rec == nil {
		return record.RewindResult{}, fmt.Errorf("%w: no branch %s", record.ErrNotBranch, id)
	}
	dir := filepath.Join(e.opts.StoreDir, record.BranchesName)
	gone := "deleted-" + id
	if err := os.Rename(filepath.Join(dir, id), filepath.Join(dir, gone)); err != nil {
		return record.RewindResult{}, fmt.Errorf("rewind: branch: %w", err)
	}
	if err := durable.SyncDir(dir); err != nil {
		return record.RewindResult{}, fmt.Errorf("rewind: branch: %w", err)
	}
	if err := os.RemoveAll(filepath.Join(dir, gone)); err != nil {
		return record.RewindResult{}, fmt.Errorf("rewind: branch: removing %s: %w", id, err)
	}
	return record.RewindResult{Unchanged: true, Branch: rec, Report: record.Report{Skipped: []string{}}}, nil
}

// ReadBranches reads the branch records in the store at store, checked
// as untrusted input (a damaged one is an error naming it); none when the
// store has no branches. Directories of removals a crash interrupted are
// skipped.
func ReadBranches(store string) ([]record.BranchRecord, error) {
	dir := filepath.Join(store, record.BranchesName)
	ents, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("rewind: branches: %w", err)
	}
	var out []record.BranchRecord
	for _, de := range ents {
		if record.CheckBranchID(de.Name()) != nil {
			continue // deleted-ID: a removal a crash interrupted
		}
		rec, err := readBranch(dir, de.Name())
		if err != nil {
			return nil, err
		}
		out = append(out, rec)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Dir < out[j].Dir })
	return out, nil
}

func readBranch(dir, id string) (record.BranchRecord, error) {
	var rec record.BranchRecord
	p := filepath.Join(dir, id, record.BranchRecordName)
	fd, err := unix.Open(p, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return rec, fmt.Errorf("rewind: branch %s: %w", id, err)
	}
	f := os.NewFile(uintptr(fd), p)
	defer f.Close()
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		return rec, fmt.Errorf("rewind: branch %s: its record is not a regular file", id)
	}
	b, err := io.ReadAll(io.LimitReader(f, maxBranchRecord+1))
	if err != nil {
		return rec, fmt.Errorf("rewind: branch %s: %w", id, err)
	}
	if len(b) > maxBranchRecord {
		return rec, fmt.Errorf("rewind: branch %s: its record is larger than %d bytes", id, maxBranchRecord)
	}
	if err := json.Unmarshal(b, &rec); err != nil {
		return rec, fmt.Errorf("rewind: branch %s: damaged record: %v", id, err)
	}
	if err := rec.Check(id); err != nil {
		return rec, fmt.Errorf("rewind: damaged branch record: %v", err)
	}
	return rec, nil
}

// BranchDir is where the store at store keeps the branch id.
func BranchDir(store, id string) string { return filepath.Join(store, record.BranchesName, id) }

// branchFloor is the oldest base of a branch of this store (ok false:
// none): gc never cuts above it, so that every branch's base stays in the
// history. A damaged record is an error: its base is not known.
func (e *Engine) branchFloor() (record.Seq, bool, error) { return BranchFloor(e.opts.StoreDir) }

// BranchFloor is the oldest base of a branch of the store at store (ok
// false: it has none): what gc keeps.
func BranchFloor(store string) (record.Seq, bool, error) {
	recs, err := ReadBranches(store)
	if err != nil || len(recs) == 0 {
		return 0, false, err
	}
	floor := recs[0].Base
	for _, r := range recs[1:] {
		floor = min(floor, r.Base)
	}
	return floor, true, nil
}

// branchBlobs adds to keep the blobs the branches' merged states name:
// the base of their next merge.
func (e *Engine) branchBlobs(keep map[blobstore.ID]bool) error {
	return BranchBlobs(e.opts.StoreDir, keep)
}

// BranchBlobs adds to keep the blobs the merged states of the branches of
// the store at store name (what gc keeps).
func BranchBlobs(store string, keep map[blobstore.ID]bool) error {
	recs, err := ReadBranches(store)
	if err != nil {
		return err
	}
	for _, r := range recs {
		for _, m := range []*record.BranchMerged{r.Merged, r.Pending} {
			if m == nil {
				continue
			}
			for _, st := range m.States {
				if st.Kind != record.KindFile || st.Absent {
					continue
				}
				if id, err := blobstore.ParseID(st.Blob); err == nil {
					keep[id] = true
				}
			}
		}
	}
	return nil
}

// findBranch is the branch of this store mounted at dir, if any, by its
// name alone (the client resolves symlinks, as the branch's record did):
// the daemon never looks at a branch's mount, whose base it serves.
func (e *Engine) findBranch(dir string) (*record.BranchRecord, error) {
	recs, err := ReadBranches(e.opts.StoreDir)
	if err != nil {
		return nil, err
	}
	for i := range recs {
		if recs[i].Dir == filepath.Clean(dir) {
			return &recs[i], e.settlePending(&recs[i])
		}
	}
	return nil, nil
}
