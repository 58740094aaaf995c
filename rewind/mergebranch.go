package rewind

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/zerofs/zerofs/merge"
	"github.com/zerofs/zerofs/record"
	"github.com/zerofs/zerofs/rewind/internal/index"
)

// A branch as a merge side (mergeSide with branch set): its tree is its
// copy-up layer's upper directory over this workspace's history at its
// base, read beneath the store and never through a mount; its changed
// paths are the upper directory's; its state as merged, noted in its
// record (pending, then settled from the log), is the base of its next
// merge.

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
