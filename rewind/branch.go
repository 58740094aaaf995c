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
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/zerofs/zerofs/blobstore"
	"github.com/zerofs/zerofs/internal/durable"
	"github.com/zerofs/zerofs/merge"
	"github.com/zerofs/zerofs/record"
	"github.com/zerofs/zerofs/rewind/internal/index"
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

// Overlayfs's marks in its upper directory: a whiteout (a character
// device 0/0, or a file with the whiteout xattr) stands for a removed
// path, an opaque directory hides everything the lower layer has beneath
// it.
const (
	ovlOpaque   = "trusted.overlay.opaque"
	ovlWhiteout = "trusted.overlay.whiteout"
	ovlPrefix   = "trusted.overlay."
)

// upperEntry is what the upper layer holds at a path.
type upperEntry int

const (
	upperNone     upperEntry = iota // nothing: the lower layer shows through
	upperWhiteout                   // removed in the branch
	upperDir                        // a directory (merged with the lower one)
	upperOpaque                     // a directory that hides the lower one
	upperOther                      // a file, symlink or other node
)

// upperAt is the upper layer's entry at p (in the tree open at w).
func upperAt(w *workspace, p string) (upperEntry, error) {
	st, err := w.lstat(p)
	if isMissing(err) {
		return upperNone, nil
	}
	if err != nil {
		return upperNone, err
	}
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFCHR:
		if st.Rdev == 0 {
			return upperWhiteout, nil
		}
	case unix.S_IFDIR:
		var buf [8]byte
		n, err := w.getxattr(p, ovlOpaque, buf[:])
		if err == nil && n == 1 && buf[0] == 'y' {
			return upperOpaque, nil
		}
		return upperDir, nil
	case unix.S_IFREG:
		if st.Size == 0 {
			if _, err := w.getxattr(p, ovlWhiteout, nil); err == nil {
				return upperWhiteout, nil
			}
		}
	}
	return upperOther, nil
}

// UpperPaths lists every path the upper layer in dir holds (files,
// directories, whiteouts), parents first: the paths a branch changed, or
// whose directory a change beneath copied up. Reserved names at the root
// are left out.
func UpperPaths(dir string) ([]string, error) {
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("rewind: branch: %w", err)
	}
	w := &workspace{root: os.NewFile(uintptr(fd), dir)}
	defer w.root.Close()
	return upperPaths(w)
}

func upperPaths(w *workspace) ([]string, error) {
	var out []string
	var walk func(d string) error
	walk = func(d string) error {
		names, err := w.readDirNames(d)
		if err != nil {
			return fmt.Errorf("rewind: branch: read %q: %w", d, err)
		}
		sort.Strings(names)
		for _, n := range names {
			if d == "" && record.IsReserved(n) {
				continue
			}
			p := index.JoinPath(d, n)
			out = append(out, p)
			st, err := w.lstat(p)
			if err != nil {
				return fmt.Errorf("rewind: branch: %q: %w", p, err)
			}
			if st.Mode&unix.S_IFMT == unix.S_IFDIR {
				if err := walk(p); err != nil {
					return err
				}
			}
		}
		return nil
	}
	return out, walk("")
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

// openBranch opens the branch rec as a merge side: its tree is its
// copy-up layer over the workspace's state at its base (read from the
// upper directory and the history: never through a mount, so the daemon
// never reads its own), its history its own store's log, the paths it
// changed those its upper directory holds.
func (e *Engine) openBranch(rec *record.BranchRecord) (*mergeSide, error) {
	dir := BranchDir(e.opts.StoreDir, rec.ID)
	fd, err := unix.Open(filepath.Join(dir, record.BranchUpperName), unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("rewind: branch %s: %w", rec.ID, err)
	}
	side := &mergeSide{dir: rec.Dir, tree: &workspace{root: os.NewFile(uintptr(fd), filepath.Join(dir, record.BranchUpperName))},
		base: rec.Base, last: map[string]record.StepRef{}, branch: rec}
	var after record.Seq
	if rec.Merged != nil {
		after = rec.Merged.Head
	}
	f, err := os.Open(filepath.Join(dir, record.BranchStoreName, record.LogName))
	switch {
	case errors.Is(err, os.ErrNotExist):
		// Never mounted: no history, no steps.
	case err != nil:
		side.close()
		return nil, fmt.Errorf("rewind: branch %s: %w", rec.ID, err)
	default:
		err = side.readEvents(f, "", after)
		f.Close()
		if err != nil {
			side.close()
			return nil, err
		}
	}
	side.changed = func() ([]string, error) { return upperPaths(side.tree) }
	return side, nil
}

// filterOverlay drops overlayfs's own xattrs (trusted.overlay.*) from xs:
// the overlay keeps them in its upper layer; the branch never shows them.
func filterOverlay(xs map[string][]byte) map[string][]byte {
	for k := range xs {
		if strings.HasPrefix(k, ovlPrefix) {
			delete(xs, k)
		}
	}
	return xs
}

// branchNode is p in the branch: from the upper layer where it holds p
// (a whiteout: absent), absent beneath an opaque directory or a
// non-directory of the upper layer, else as the workspace was at the
// branch's base (the lower layer, @BASE/).
func (m *merger) branchNode(p string) (*mergeNode, error) {
	up := m.side.tree
	parts := strings.Split(p, "/")
	for i := 1; i <= len(parts); i++ {
		q := strings.Join(parts[:i], "/")
		ue, err := upperAt(up, q)
		if err != nil {
			return nil, fmt.Errorf("rewind: merge: branch %q: %w", q, err)
		}
		last := i == len(parts)
		switch {
		case ue == upperWhiteout:
			return &mergeNode{}, nil
		case ue == upperNone:
			if hidden, err := m.hiddenBelowOpaque(parts[:i-1]); err != nil || hidden {
				return &mergeNode{}, err
			}
			return m.lowerNode(p)
		case last:
			return treeNode(up, p)
		case ue == upperOther:
			return &mergeNode{}, nil // a file where the path needs a directory
		}
	}
	return &mergeNode{}, nil
}

// hiddenBelowOpaque reports whether one of the directories dirs names
// (each a prefix of the next) is opaque in the upper layer.
func (m *merger) hiddenBelowOpaque(dirs []string) (bool, error) {
	for i := 1; i <= len(dirs); i++ {
		ue, err := upperAt(m.side.tree, strings.Join(dirs[:i], "/"))
		if err != nil {
			return false, err
		}
		if ue == upperOpaque {
			return true, nil
		}
	}
	return false, nil
}

// lowerNode is p as the workspace was at the branch's base: the lower
// layer the branch reads where it changed nothing.
func (m *merger) lowerNode(p string) (*mergeNode, error) {
	ent, err := m.e.stateAt(p, m.side.branch.Base, ^record.Seq(0))
	if err != nil {
		return nil, err
	}
	return m.entryNode(ent)
}

// entryNode is a node of a state of the history (ent).
func (m *merger) entryNode(ent Entry) (*mergeNode, error) {
	if !ent.Exists {
		return &mergeNode{}, nil
	}
	if ent.Live {
		n, err := treeNode(&m.e.ws, ent.State.Path)
		if n != nil {
			n.ent = ent
		}
		return n, err
	}
	st := ent.State
	n := &mergeNode{ent: ent, size: st.Bytes, complete: true}
	if st.Owned() {
		n.owner = &[2]uint32{*st.UID, *st.GID}
	}
	n.node.Kind, n.node.Mode, n.node.Target, n.node.Xattrs = kindOf(st), st.Mode&0o7777, st.Target, st.Xattrs
	if st.MTime != nil {
		mt := *st.MTime
		n.mtime = &mt
	}
	if n.node.Kind == merge.File {
		n.node.Hash = st.Blob
	}
	return n, nil
}

// branchMergedStates are the branch's changed paths as this merge brings
// them in, each file's content stored in this workspace's blob store: the
// base of the branch's next merge (git's rule).
func (m *merger) branchMergedStates() ([]record.FileState, error) {
	paths, err := m.branchChanged()
	if err != nil {
		return nil, err
	}
	sort.Strings(paths)
	var out []record.FileState
	for i, p := range paths {
		if i > 0 && paths[i-1] == p {
			continue
		}
		n, err := m.node(merge.Theirs, p)
		if err != nil {
			return nil, err
		}
		if err := m.complete(n); err != nil {
			return nil, err
		}
		st := record.FileState{Path: p, Mode: n.node.Mode, Target: n.node.Target, Xattrs: n.node.Xattrs}
		switch n.node.Kind {
		case merge.Absent:
			st = record.FileState{Path: p, Absent: true}
		case merge.Dir:
			st.Kind = record.KindDir
		case merge.Symlink:
			st.Kind = record.KindSymlink
		case merge.File:
			st.Kind = record.KindFile
			r, err := m.openNode(n)
			if err != nil {
				return nil, err
			}
			id, size, err := m.e.blobs.Put(r)
			r.Close()
			if err != nil {
				return nil, fmt.Errorf("rewind: merge: store %q of the branch: %w", p, err)
			}
			st.Blob, st.Bytes = id.String(), size
		default:
			continue // not a node a merge takes
		}
		if n.owner != nil {
			uid, gid := n.owner[0], n.owner[1]
			st.UID, st.GID = &uid, &gid
		}
		out = append(out, st)
	}
	return out, nil
}

// openNode opens a file node's content, wherever it is.
func (m *merger) openNode(n *mergeNode) (io.ReadCloser, error) {
	if n.tree != nil {
		return n.tree.openFile(n.path)
	}
	return m.e.OpenContent(n.ent)
}

// recordPending notes in the branch's record the state a merge about to
// change the workspace brings in (after: the head before it), before it
// changes anything; recordMerged makes it the base of the next merge once
// the merge at seq is done. A crash in between leaves it pending, and
// settlePending decides from the log.
func (e *Engine) recordPending(rec *record.BranchRecord, head record.Seq, states []record.FileState) error {
	rec.Pending = &record.BranchMerged{Head: head, After: e.Head(), States: states}
	return writeBranch(e.opts.StoreDir, *rec, false)
}

func (e *Engine) recordMerged(rec record.BranchRecord, seq, head record.Seq, states []record.FileState) error {
	if seq == 0 && rec.Merged != nil {
		seq = rec.Merged.Seq // a merge that had nothing to bring in is no event
	}
	rec.Merged = &record.BranchMerged{Seq: seq, Head: head, States: states}
	rec.Pending = nil
	return writeBranch(e.opts.StoreDir, rec, false)
}

// settlePending settles a merge of rec that a crash left pending: the
// merge happened (the next open finished it from its intent) when the log
// holds, after the head it began from, a session_rewind of form merge of
// this branch; then its state is the branch's merged state, else it is
// dropped. The caller holds wsMu.
func (e *Engine) settlePending(rec *record.BranchRecord) error {
	if rec.Pending == nil {
		return nil
	}
	p := *rec.Pending
	rec.Pending = nil
	for ev, err := range e.log.Events(p.After + 1) {
		if err != nil {
			return err
		}
		if ev.Type != record.TypeRewind {
			continue
		}
		var rp record.RewindPayload
		if json.Unmarshal(ev.Payload, &rp) == nil && rp.Form == record.FormMerge && rp.Merge != nil && rp.Merge.Branch == rec.ID {
			p.Seq, p.After = ev.Seq, 0
			rec.Merged = &p
			break
		}
	}
	return writeBranch(e.opts.StoreDir, *rec, false)
}

// getxattr reads xattr name of p (never following a symlink) into buf
// (nil: only whether it exists).
func (w *workspace) getxattr(p, name string, buf []byte) (int, error) {
	f, err := w.open(p, unix.O_PATH|unix.O_NOFOLLOW)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	return unix.Getxattr(procFd(int(f.Fd())), name, buf)
}

// mergedBase is p's state as the branch's last merge brought it in (the
// base of this merge, git's rule), when the branch had changed p by then.
func (m *merger) mergedBase(p string) (Entry, bool) {
	if m.side.branch == nil || m.side.branch.Merged == nil {
		return Entry{}, false
	}
	for _, st := range m.side.branch.Merged.States {
		if st.Path == p {
			return Entry{Exists: !st.Absent, State: st}, true
		}
	}
	return Entry{}, false
}

// branchChanged lists the paths the branch may have changed since the
// base of this merge: those its upper layer holds, everything the base
// had beneath a directory it made opaque (removed and made again), and
// the paths its last merge brought in (their base is that merge's state).
func (m *merger) branchChanged() ([]string, error) {
	out, err := m.side.changed()
	if err != nil {
		return nil, err
	}
	for _, p := range out {
		ue, err := upperAt(m.side.tree, p)
		if err != nil {
			return nil, err
		}
		if ue == upperDir {
			continue
		}
		// Removed (a whiteout), replaced by a file, or removed and made
		// again (opaque): everything the base had beneath it changed too.
		b, err := m.node(merge.Base, p)
		if err != nil {
			return nil, err
		}
		if b.node.Kind == merge.Dir {
			if err := m.walkSide(merge.Base, p, func(q string) { out = append(out, q) }); err != nil {
				return nil, err
			}
		}
	}
	if m.side.branch.Merged != nil {
		for _, st := range m.side.branch.Merged.States {
			out = append(out, st.Path)
		}
	}
	return out, nil
}
