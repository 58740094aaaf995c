package rewind

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"time"

	"golang.org/x/sys/unix"

	"github.com/zerofs/zerofs/internal/quote"
	"github.com/zerofs/zerofs/merge"
	"github.com/zerofs/zerofs/record"
	"github.com/zerofs/zerofs/rewind/internal/index"
)

// merge carries out req.Merge: the three-way merge of the fork's tree
// with the workspace against the workspace's state at the fork's base
// (package merge decides each path), applied as a rewind to that new
// state: one checkpoint of everything it changes, an intent that lists
// every path's new state (its content stored first), then the workspace
// changes, then a session_rewind of form "merge" naming what came in. So
// undo takes the whole merge back, and a crash leaves the workspace merged
// or not (the next open finishes it from the intent). Other writers wait.
func (e *Engine) merge(ctx context.Context, req record.Request) (record.RewindResult, error) {
	mr := *req.Merge
	if mr.Dir == "" || mr.Workspace == "" {
		return record.RewindResult{}, fmt.Errorf("%w: it names no fork directory or no workspace", record.ErrBadRequest)
	}
	if mr.Settle != "" && mr.Settle != record.SettleOurs && mr.Settle != record.SettleTheirs {
		return record.RewindResult{}, fmt.Errorf("%w: settle %q is neither ours nor theirs", record.ErrBadRequest, mr.Settle)
	}
	if len(mr.Paths) > 0 && mr.Settle == "" {
		return record.RewindResult{}, fmt.Errorf("%w: paths go with ours or theirs", record.ErrBadRequest)
	}
	for _, p := range mr.Paths {
		if err := record.CleanPath(p); err != nil || p == "" {
			return record.RewindResult{}, fmt.Errorf("%w: %q is not a workspace path", record.ErrBadRequest, p)
		}
	}
	e.wsMu.Lock()
	defer e.wsMu.Unlock()
	// A branch of this workspace, or else a fork of it.
	br, err := e.findBranch(mr.Dir)
	if err != nil {
		return record.RewindResult{}, err
	}
	var side *mergeSide
	if br != nil {
		side, err = e.openBranch(br)
	} else {
		side, err = openFork(mr.Dir, mr.Workspace)
	}
	if err != nil {
		return record.RewindResult{}, err
	}
	defer side.close()
	if err := e.NameStashes(ctx); err != nil {
		return record.RewindResult{}, err
	}
	if err := e.Sync(); err != nil {
		return record.RewindResult{}, err
	}
	if r := e.refuseSeq(side.base); r != nil {
		r.Msg = fmt.Sprintf("rewind: merge: the fork's base, state %d of this workspace, is no longer in its history (%v)", side.base, r)
		return record.RewindResult{}, r
	}
	m := &merger{e: e, side: side, base: side.base, nodes: map[nodeKey]*mergeNode{}}
	results, err := m.run(mr)
	if err != nil {
		return record.RewindResult{}, err
	}
	results = e.mergeKept(results)
	rec := record.MergeRecord{Dir: side.dir, Base: side.base, Head: side.head, Steps: append([]record.StepRef{}, side.steps...)}
	if br != nil {
		rec.Branch = br.ID
		if br.Merged != nil {
			rec.Since = br.Merged.Seq
		}
	}
	var conflicts []record.MergeConflict
	var changed []merge.Result
	for _, r := range results {
		switch {
		case r.Action == merge.Conflict:
			conflicts = append(conflicts, m.conflict(r))
		case r.Changes():
			changed = append(changed, r)
		}
		if r.Action == merge.Combine && r.Content != nil {
			rec.Merged = append(rec.Merged, r.Path)
		}
		if m.settled[r.Path] {
			rec.Settled = append(rec.Settled, r.Path)
		}
	}
	if len(rec.Settled) > 0 {
		rec.SettledAs = mr.Settle
	}
	res := record.RewindResult{Merge: &record.MergeReport{Record: rec, Conflicts: conflicts}}
	if len(conflicts) > 0 {
		cerr := &record.MergeConflictError{Dir: side.dir, Conflicts: conflicts}
		res.DryRun = req.DryRun
		return res, cerr
	}
	if req.DryRun {
		res.DryRun = true
		res.Report = record.Report{Skipped: []string{}}
		for _, r := range changed {
			if r.Node.Kind == merge.Absent {
				res.Report.Deleted++
			} else {
				res.Report.Restored++
			}
		}
		res.Preview, err = m.preview(changed)
		res.Record = record.RewindPayload{TargetSequence: e.Head(), Form: record.FormMerge, Merge: &rec}
		return res, err
	}
	targets, err := m.targets(changed)
	if err != nil {
		return record.RewindResult{}, err
	}
	// A branch's state as merged is its next merge's base: read (and its
	// contents stored) before the workspace changes, noted once the merge
	// is done.
	var mergedStates []record.FileState
	if br != nil {
		if mergedStates, err = m.branchMergedStates(); err != nil {
			return record.RewindResult{}, err
		}
		if err := e.recordPending(br, side.head, mergedStates); err != nil {
			return record.RewindResult{}, err
		}
	}
	plan, err := e.planTargets(targets)
	if err != nil {
		return record.RewindResult{}, err
	}
	if plan.empty() {
		// Nothing to bring in: the fork changed nothing, or nothing that
		// the workspace has not got already. Nothing is recorded, and as
		// after any rewind the step's captures end.
		e.capMu.Lock()
		e.captured = map[string]record.Seq{}
		e.capMu.Unlock()
		res.Unchanged = true
		res.Report = record.Report{Skipped: append([]string{}, plan.skipped...)}
		res.Record = record.RewindPayload{TargetSequence: e.Head(), Form: record.FormMerge, Merge: &rec}
		if br != nil {
			err = e.recordMerged(*br, 0, side.head, mergedStates)
		}
		return res, err
	}
	in := intent{Target: e.Head(), Form: record.FormMerge, Narrow: true, Targets: targets, Merge: &rec}
	for _, t := range targets {
		in.Paths = append(in.Paths, t.Path)
	}
	out, err := e.carryOut(ctx, in, plan)
	out.Merge = res.Merge
	if err == nil && br != nil {
		err = e.recordMerged(*br, out.Seq, side.head, mergedStates)
	}
	return out, err
}

// planTargets plans the changes that give each path of targets its state
// (Absent: removed), as planPaths does for states of the history.
func (e *Engine) planTargets(targets []record.FileState) (*rewindPlan, error) {
	ts := append([]record.FileState(nil), targets...)
	sort.SliceStable(ts, func(i, j int) bool {
		if di, dj := depth(ts[i].Path), depth(ts[j].Path); di != dj {
			return di < dj
		}
		return ts[i].Path < ts[j].Path
	})
	p := &rewindPlan{}
	for _, st := range ts {
		tgt := Entry{Exists: !st.Absent, State: st}
		cur, err := e.live(st.Path)
		if err != nil {
			return nil, err
		}
		n := len(p.removes) + len(p.creates) + len(p.chmods)
		if err := e.planPath(p, st.Path, tgt, cur); err != nil {
			return nil, err
		}
		if len(p.removes)+len(p.creates)+len(p.chmods) != n {
			p.entries = append(p.entries, planEntry{path: st.Path, tgt: tgt, cur: cur})
		}
	}
	if err := e.leaveIgnored(p); err != nil {
		return nil, err
	}
	p.removes = outermost(p.removes)
	sort.SliceStable(p.removes, func(i, j int) bool { return depth(p.removes[i]) > depth(p.removes[j]) })
	sort.SliceStable(p.chmods, func(i, j int) bool { return depth(p.chmods[i].Path) > depth(p.chmods[j].Path) })
	return p, nil
}

// checkTargets checks the targets of a merge's intent as untrusted input:
// each a clean path, with a kind, mode and blob zerofs writes.
func checkTargets(ts []record.FileState) error {
	for _, st := range ts {
		if st.Path == "" || record.CleanPath(st.Path) != nil {
			return fmt.Errorf("names path %q", st.Path)
		}
		if st.Absent {
			continue
		}
		switch {
		case st.Kind != record.KindFile && st.Kind != record.KindDir && st.Kind != record.KindSymlink:
			return fmt.Errorf("names kind %q for %q", st.Kind, st.Path)
		case st.Mode > 0o7777:
			return fmt.Errorf("names mode %o for %q", st.Mode, st.Path)
		case st.Kind == record.KindSymlink && st.Target == "":
			return fmt.Errorf("names a symlink without a target at %q", st.Path)
		case st.Skipped:
			return fmt.Errorf("names a skipped state for %q", st.Path)
		}
		if reason := record.CheckXattrs(st.Xattrs); reason != "" {
			return fmt.Errorf("%q: %s", st.Path, reason)
		}
	}
	return nil
}

// reportTargets is the plan a whole merge made, for the report of one a
// crash interrupted.
func reportTargets(ts []record.FileState) *rewindPlan {
	p := &rewindPlan{}
	for _, st := range ts {
		if st.Absent {
			p.removes = append(p.removes, st.Path)
		} else {
			p.creates = append(p.creates, st)
		}
	}
	return p
}

// merger gathers one merge's states.
type merger struct {
	e     *Engine
	side  *mergeSide
	base  record.Seq
	nodes map[nodeKey]*mergeNode
	// settled holds the conflicts the request settled.
	settled map[string]bool
}

type nodeKey struct {
	side merge.Side
	path string
}

// mergeNode is one path on one side, with what it takes to read it. A
// path in a tree has its xattrs read and its content hashed only when
// asked (complete): most of a fork's files differ from the base in size,
// or not at all.
type mergeNode struct {
	node  merge.Node
	size  int64
	ent   Entry // base: the state at the base (its content, when a file)
	owner *[2]uint32
	mtime *time.Time
	// tree and path find a path of a tree; complete says node.Xattrs and
	// node.Hash are set.
	tree     *workspace
	path     string
	complete bool
}

// complete reads n's xattrs and hashes its content, if n is a file or
// directory of a tree not read yet.
func (m *merger) complete(n *mergeNode) (err error) {
	if n.complete || n.tree == nil || (n.node.Kind != merge.File && n.node.Kind != merge.Dir) {
		return nil
	}
	switch {
	case n.tree == m.side.tree && m.side.branch != nil:
		// The branch's upper layer: overlayfs's own xattrs are not the
		// branch's.
		defer func() { filterOverlay(n.node.Xattrs) }()
	case n.tree == m.side.tree:
		// The fork's: what it could not copy of the base's xattrs it
		// did not change.
		defer func() {
			if err == nil {
				err = m.keptXattrs(n)
			}
		}()
	}
	if n.node.Kind == merge.Dir {
		if n.node.Xattrs, err = n.tree.xattrs(n.path); err != nil {
			return fmt.Errorf("rewind: merge: xattrs of %q: %w", n.path, err)
		}
		n.complete = true
		return nil
	}
	// A file: its xattrs and content through one descriptor.
	f, err := n.tree.openFile(n.path)
	if err != nil {
		return fmt.Errorf("rewind: merge: open %q: %w", n.path, err)
	}
	defer f.Close()
	if n.node.Xattrs, err = readXattrs(int(f.Fd())); err != nil {
		return fmt.Errorf("rewind: merge: xattrs of %q: %w", n.path, err)
	}
	id, _, err := m.e.blobs.HashFile(f)
	if err != nil {
		return fmt.Errorf("rewind: merge: read %q: %w", n.path, err)
	}
	n.node.Hash, n.complete = id.String(), true
	return nil
}

// node is path on side, read once.
func (m *merger) node(side merge.Side, p string) (*mergeNode, error) {
	k := nodeKey{side, p}
	if n, ok := m.nodes[k]; ok {
		return n, nil
	}
	var n *mergeNode
	var err error
	switch side {
	case merge.Base:
		n, err = m.baseNode(p)
	case merge.Ours:
		n, err = treeNode(&m.e.ws, p)
	case merge.Theirs:
		if m.side.branch != nil {
			n, err = m.branchNode(p)
		} else if n, err = treeNode(m.side.tree, p); err == nil {
			var b *mergeNode
			if b, err = m.node(merge.Base, p); err == nil {
				keptBits(b, n)
			}
		}
	}
	if err != nil {
		return nil, err
	}
	m.nodes[k] = n
	return n, nil
}

// keptXattrs gives t, a fork's path, the base's xattrs its writer could
// not copy, as keptBits does its mode's bits: security.capability and
// trusted.* when the fork was written by a user other than root, and a
// capability also when root wrote it for a file recorded with another
// owner (restoreXattrs keeps a capability only under its owner).
func (m *merger) keptXattrs(t *mergeNode) error {
	b, err := m.node(merge.Base, t.path)
	if err != nil || b.node.Kind != t.node.Kind || t.owner == nil {
		return err
	}
	if err := m.complete(b); err != nil {
		return err
	}
	for name, v := range b.node.Xattrs {
		if _, ok := t.node.Xattrs[name]; ok || record.XattrKept(name, false) {
			continue
		}
		copied := t.owner[0] == 0 && (name != record.XattrCapability || b.owner != nil && b.owner[0] == 0)
		if !copied {
			if t.node.Xattrs == nil {
				t.node.Xattrs = map[string][]byte{}
			}
			t.node.Xattrs[name] = v
		}
	}
	return nil
}

// keptBits gives t, a fork's path, the setuid and setgid bits its base b
// had when the fork's writer could not keep them (a copy keeps such a bit
// only for the owner it was recorded with: copyMode): a fork made by
// another user changed nothing by leaving them off, and a merge must not
// take that as the fork's change.
func keptBits(b, t *mergeNode) {
	if b.node.Kind != t.node.Kind || t.owner == nil || b.node.Mode&(unix.S_ISUID|unix.S_ISGID) == 0 {
		return
	}
	dropped := b.node.Mode
	if b.owner == nil || b.owner[0] != t.owner[0] {
		dropped &^= unix.S_ISUID
	}
	if b.owner == nil || b.owner[1] != t.owner[1] {
		dropped &^= unix.S_ISGID
	}
	if dropped != b.node.Mode && t.node.Mode == dropped {
		t.node.Mode = b.node.Mode
	}
}

func kindOf(st record.FileState) merge.Kind {
	switch {
	case st.Skipped:
		return merge.Other
	case st.Kind == record.KindFile:
		return merge.File
	case st.Kind == record.KindDir:
		return merge.Dir
	case st.Kind == record.KindSymlink:
		return merge.Symlink
	}
	return merge.Other
}

// baseNode is p at the base, from the history (or the workspace where p
// has not changed since).
func (m *merger) baseNode(p string) (*mergeNode, error) {
	if st, ok := m.mergedBase(p); ok {
		return m.entryNode(st)
	}
	ent, err := m.e.stateAt(p, m.base, ^record.Seq(0))
	if err != nil {
		return nil, err
	}
	return m.entryNode(ent)
}

// entryNode is a node of a state of the history (ent): where the path is
// unchanged since (Live), as the workspace has it now, where a rename took
// it. Its mtime is read only on the side a merge takes from.
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
	if n.node.Kind == merge.Symlink {
		n.node.Mode = 0 // as treeNode: a symlink's mode means nothing
	}
	if st.MTime != nil {
		mt := *st.MTime
		n.mtime = &mt
	}
	if n.node.Kind == merge.File {
		n.node.Hash = st.Blob
	}
	return n, nil
}

// treeNode is p in a tree now: the workspace, or a fork's (its xattrs and
// content not read yet: complete).
func treeNode(w *workspace, p string) (*mergeNode, error) {
	st, err := w.lstat(p)
	if isMissing(err) {
		return &mergeNode{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("rewind: merge: stat %q: %w", p, err)
	}
	n := &mergeNode{size: st.Size, owner: &[2]uint32{st.Uid, st.Gid}, tree: w, path: p}
	mt := time.Unix(st.Mtim.Unix()).UTC()
	n.mtime = &mt
	n.node.Mode = st.Mode & 0o7777
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFREG:
		n.node.Kind = merge.File
	case unix.S_IFDIR:
		n.node.Kind = merge.Dir
	case unix.S_IFLNK:
		n.node.Kind, n.node.Mode = merge.Symlink, 0
		if n.node.Target, err = w.readlink(p); err != nil {
			return nil, fmt.Errorf("rewind: merge: readlink %q: %w", p, err)
		}
	default:
		n.node.Kind = merge.Other
	}
	return n, nil
}

// run finds the paths either side changed since the base and merges them.
func (m *merger) run(mr record.MergeRequest) ([]merge.Result, error) {
	cands := map[string]bool{}
	ours, err := m.e.changedSince(m.base, ^record.Seq(0))
	if err != nil {
		return nil, err
	}
	for _, p := range ours {
		if p != "" {
			cands[p] = true
		}
	}
	changed := m.side.changed
	if m.side.branch != nil {
		changed = m.branchChanged
	}
	if changed == nil {
		changed = m.theirsChanged
	}
	theirs, err := changed()
	if err != nil {
		return nil, err
	}
	for _, p := range theirs {
		cands[p] = true
	}
	var paths []merge.Path
	for p := range cands {
		mp := merge.Path{Path: p}
		for _, s := range []merge.Side{merge.Base, merge.Ours, merge.Theirs} {
			n, err := m.node(s, p)
			if err != nil {
				return nil, err
			}
			if err := m.complete(n); err != nil {
				return nil, err
			}
			switch s {
			case merge.Base:
				mp.Base = n.node
			case merge.Ours:
				mp.Ours = n.node
			case merge.Theirs:
				mp.Theirs = n.node
			}
		}
		paths = append(paths, mp)
	}
	m.settled = map[string]bool{}
	opts := merge.Options{Read: m.read, Size: m.size}
	if mr.Settle != "" {
		side := merge.Ours
		if mr.Settle == record.SettleTheirs {
			side = merge.Theirs
		}
		opts.Settle = func(p string) (merge.Side, bool) {
			if len(mr.Paths) > 0 && !under(p, mr.Paths) {
				return 0, false
			}
			m.settled[p] = true
			return side, true
		}
	}
	res, err := merge.Tree(paths, opts)
	if errors.Is(err, merge.ErrSettle) {
		return nil, fmt.Errorf("%w: %w", record.ErrBadRequest, err)
	}
	if err != nil {
		return nil, err
	}
	// A path to settle that holds no conflict is a mistake (a typo, a
	// path relative to the wrong directory): refused, as a path rewind
	// refuses a path that is nowhere.
	var idle []string
	for _, p := range mr.Paths {
		hit := false
		for q := range m.settled {
			hit = hit || under(q, []string{p})
		}
		if !hit {
			idle = append(idle, p)
		}
	}
	if len(idle) > 0 {
		return nil, fmt.Errorf("%w: no conflict to settle at %s", record.ErrBadRequest, quote.Names(idle, ", "))
	}
	return res, nil
}

// theirsChanged lists the paths whose state in the fork differs from the
// base: both trees walked side by side, a file's content compared only
// where kind, mode and size agree.
func (m *merger) theirsChanged() ([]string, error) {
	var out []string
	var walk func(dir string) error
	walk = func(dir string) error {
		names := map[string]bool{}
		fn, err := m.side.tree.readDirNames(dir)
		if err != nil && !isMissing(err) {
			return fmt.Errorf("rewind: merge: read %s in the fork: %w", dir, err)
		}
		for _, n := range fn {
			names[n] = true
		}
		bents, err := m.e.readDirAt(dir, m.base, ^record.Seq(0))
		if err != nil {
			return err
		}
		for _, de := range bents {
			names[de.Name] = true
		}
		for n := range names {
			if dir == "" && record.IsReserved(n) {
				continue
			}
			p := index.JoinPath(dir, n)
			same, dirs, err := m.sameAsBase(p)
			if err != nil {
				return err
			}
			if !same {
				out = append(out, p)
			}
			if dirs {
				if err := walk(p); err != nil {
					return err
				}
			} else if !same {
				// Everything beneath a directory the fork replaced or
				// removed changed too.
				for _, s := range []merge.Side{merge.Base, merge.Theirs} {
					n, _ := m.node(s, p)
					if n != nil && n.node.Kind == merge.Dir {
						if err := m.walkSide(s, p, func(q string) { out = append(out, q) }); err != nil {
							return err
						}
					}
				}
			}
		}
		return nil
	}
	if err := walk(""); err != nil {
		return nil, err
	}
	return out, nil
}

// walkSide calls fn with every path beneath directory p on side (base or
// theirs).
func (m *merger) walkSide(s merge.Side, p string, fn func(string)) error {
	var names []string
	if s == merge.Theirs {
		ns, err := m.side.tree.readDirNames(p)
		if err != nil && !isMissing(err) {
			return fmt.Errorf("rewind: merge: read %s in the fork: %w", p, err)
		}
		names = ns
	} else {
		ents, err := m.e.readDirAt(p, m.base, ^record.Seq(0))
		if err != nil {
			return err
		}
		for _, de := range ents {
			names = append(names, de.Name)
		}
	}
	for _, n := range names {
		q := index.JoinPath(p, n)
		fn(q)
		nd, err := m.node(s, q)
		if err != nil {
			return err
		}
		if nd.node.Kind == merge.Dir {
			if err := m.walkSide(s, q, fn); err != nil {
				return err
			}
		}
	}
	return nil
}

// sameAsBase compares p in the fork with p at the base; dirs reports
// whether both are directories (so the walk goes on beneath it).
func (m *merger) sameAsBase(p string) (same, dirs bool, err error) {
	b, err := m.node(merge.Base, p)
	if err != nil {
		return false, false, err
	}
	t, err := m.node(merge.Theirs, p)
	if err != nil {
		return false, false, err
	}
	dirs = b.node.Kind == merge.Dir && t.node.Kind == merge.Dir
	bn, tn := b.node, t.node
	bn.Hash, tn.Hash, bn.Xattrs, tn.Xattrs = "", "", nil, nil
	if !bn.Equal(tn) || b.size != t.size && bn.Kind == merge.File {
		return false, dirs, nil
	}
	for _, n := range []*mergeNode{b, t} {
		if err := m.complete(n); err != nil {
			return false, false, err
		}
	}
	return b.node.Equal(t.node), dirs, nil
}

// read reads a file's content on a side, for a line merge.
func (m *merger) read(s merge.Side, p string) ([]byte, error) {
	n, err := m.node(s, p)
	if err != nil {
		return nil, err
	}
	var r io.ReadCloser
	switch s {
	case merge.Base:
		r, err = m.e.OpenContent(n.ent)
	case merge.Ours:
		r, err = m.e.ws.openFile(p)
	case merge.Theirs:
		r, err = m.openNode(n)
	}
	if err != nil {
		return nil, err
	}
	defer r.Close()
	return io.ReadAll(r)
}

func (m *merger) size(s merge.Side, p string) int64 {
	n, err := m.node(s, p)
	if err != nil {
		return 0
	}
	return n.size
}

// conflict describes r with the step of each side that last changed it.
func (m *merger) conflict(r merge.Result) record.MergeConflict {
	c := record.MergeConflict{Path: r.Path, Why: r.Why}
	if ref, ok := m.side.last[r.Path]; ok {
		c.Theirs = &ref
	}
	// Ours: the newest checkpoint after the base that names the path.
	var last record.Seq
	for at := m.base; ; {
		rec, ok := m.e.index.At(r.Path, at, ^record.Seq(0))
		if !ok {
			break
		}
		last, at = rec.Seq, rec.Seq
	}
	if last != 0 {
		sp := m.e.state.SpanOf(last, m.e.Head())
		switch {
		case sp.Step != nil:
			c.Ours = &record.StepRef{Kind: "step", Sequence: sp.Step.Seq, Label: sp.Step.Label}
		case sp.Rewind:
			c.Ours = &record.StepRef{Kind: "rewind", Sequence: sp.End}
		default:
			c.Ours = &record.StepRef{Kind: "step", Sequence: last}
		}
	}
	return c
}

// targets turns the merge's changes into the states the workspace gets,
// storing every new file content first (the intent names them by blob).
func (m *merger) targets(changed []merge.Result) ([]record.FileState, error) {
	var out []record.FileState
	for _, r := range changed {
		n := r.Node
		st := record.FileState{Path: r.Path}
		if n.Kind == merge.Absent {
			st.Absent = true
			out = append(out, st)
			continue
		}
		st.Mode, st.Target, st.Xattrs = n.Mode, n.Target, n.Xattrs
		if st.Xattrs == nil {
			st.Xattrs = map[string][]byte{}
		}
		switch n.Kind {
		case merge.File:
			st.Kind = record.KindFile
		case merge.Dir:
			st.Kind = record.KindDir
		case merge.Symlink:
			st.Kind = record.KindSymlink
		default:
			return nil, fmt.Errorf("rewind: merge: %q is neither a file, a directory nor a symlink", r.Path)
		}
		// The owner: ours where the path exists, else the fork's.
		ours, err := m.node(merge.Ours, r.Path)
		if err != nil {
			return nil, err
		}
		theirs, err := m.node(merge.Theirs, r.Path)
		if err != nil {
			return nil, err
		}
		own := ours.owner
		if ours.node.Kind == merge.Absent {
			own = theirs.owner
		}
		if own != nil {
			uid, gid := own[0], own[1]
			st.UID, st.GID = &uid, &gid
		}
		if r.Action == merge.Take {
			st.MTime = theirs.mtime
		}
		if st.Kind == record.KindFile {
			var content io.Reader
			switch {
			case r.Content != nil:
				content = bytes.NewReader(r.Content)
			case n.Hash == theirs.node.Hash && theirs.node.Kind == merge.File:
				f, err := m.openNode(theirs)
				if err != nil {
					return nil, fmt.Errorf("rewind: merge: open %q in the fork: %w", r.Path, err)
				}
				defer f.Close()
				content = f
			default:
				f, err := m.e.ws.openFile(r.Path)
				if err != nil {
					return nil, fmt.Errorf("rewind: merge: open %q: %w", r.Path, err)
				}
				defer f.Close()
				content = f
			}
			id, size, err := m.e.blobs.Put(content)
			if err != nil {
				return nil, fmt.Errorf("rewind: merge: store %q: %w", r.Path, err)
			}
			if r.Content == nil && id.String() != n.Hash {
				return nil, fmt.Errorf("rewind: merge: %q changed while it was merged", r.Path)
			}
			st.Blob, st.Bytes = id.String(), size
		}
		out = append(out, st)
	}
	return out, nil
}

// preview lists what the merge would change in the workspace, with line
// counts for text files.
func (m *merger) preview(changed []merge.Result) ([]record.PathChange, error) {
	var out []record.PathChange
	for _, r := range changed {
		ours, err := m.node(merge.Ours, r.Path)
		if err != nil {
			return nil, err
		}
		c := record.PathChange{Path: r.Path}
		switch {
		case r.Node.Kind == merge.Absent:
			c.Action, c.Kind = record.ActionDelete, kindName(ours.node.Kind)
		case ours.node.Kind == merge.Absent:
			c.Action, c.Kind = record.ActionCreate, kindName(r.Node.Kind)
		default:
			c.Action, c.Kind = record.ActionRestore, kindName(r.Node.Kind)
		}
		a, aok := m.text(merge.Ours, r.Path, ours.node)
		var b []byte
		bok := true
		switch {
		case r.Content != nil:
			b, bok = r.Content, merge.IsText(r.Content) && len(r.Content) <= maxPreviewBytes
		case r.Node.Kind == merge.File:
			b, bok = m.text(merge.Theirs, r.Path, r.Node)
		}
		if aok && bok {
			added, removed := lineDelta(a, b)
			c.Lines = &record.LineCount{Added: added, Removed: removed}
		}
		out = append(out, c)
	}
	return out, nil
}

// text reads a file of a side for counting lines (ok false: too large or
// not text); anything but a file counts as no lines.
func (m *merger) text(s merge.Side, p string, n merge.Node) ([]byte, bool) {
	if n.Kind != merge.File {
		return nil, true
	}
	if m.size(s, p) > maxPreviewBytes {
		return nil, false
	}
	b, err := m.read(s, p)
	if err != nil || !merge.IsText(b) {
		return nil, false
	}
	return b, true
}

func kindName(k merge.Kind) record.Kind {
	switch k {
	case merge.File:
		return record.KindFile
	case merge.Dir:
		return record.KindDir
	case merge.Symlink:
		return record.KindSymlink
	}
	return ""
}
