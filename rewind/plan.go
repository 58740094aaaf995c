package rewind

import (
	"fmt"
	"sort"
	"strings"

	"github.com/zerofs/zerofs/blobstore"
	"github.com/zerofs/zerofs/record"
	"github.com/zerofs/zerofs/rewind/internal/index"
)

// rewindPlan is what a rewind must do, in order: removals (deepest first),
// creations (parents first), then fixes of owner, mode and mtime (deepest
// first, so a directory that forbids writing gets its mode, and every
// directory its mtime, after its children are in place).
type rewindPlan struct {
	removes []string
	creates []record.FileState
	chmods  []record.FileState
	skipped []string
	// entries are the paths the plan changes, with their state now and at
	// the target, parents first (for previews and whose-change reports).
	entries []planEntry
}

// planEntry is one path a plan changes.
type planEntry struct {
	path     string
	tgt, cur Entry
}

func (p *rewindPlan) empty() bool {
	return len(p.removes) == 0 && len(p.creates) == 0 && len(p.chmods) == 0
}

// changed lists the plan's paths, parents first.
func (p *rewindPlan) changed() []string {
	seen := map[string]bool{}
	var out []string
	for _, s := range p.removes {
		seen[s] = true
	}
	for _, s := range p.creates {
		seen[s.Path] = true
	}
	for _, s := range p.chmods {
		seen[s.Path] = true
	}
	for s := range seen {
		out = append(out, s)
	}
	sortParentsFirst(out)
	return out
}

// depth is the number of components in a workspace path ("" has 0).
func depth(p string) int {
	if p == "" {
		return 0
	}
	return strings.Count(p, "/") + 1
}

func sortParentsFirst(ps []string) {
	sort.Slice(ps, func(i, j int) bool {
		if di, dj := depth(ps[i]), depth(ps[j]); di != dj {
			return di < dj
		}
		return ps[i] < ps[j]
	})
}

// plan compares the state at t (from records below limit) with the
// workspace for every path a checkpoint after t names (changedSince).
func (e *Engine) plan(t, limit record.Seq) (*rewindPlan, error) {
	cands, err := e.changedSince(t, limit)
	if err != nil {
		return nil, err
	}
	return e.planPaths(t, limit, cands)
}

// changedSince lists the paths whose state at t (from records below limit)
// may differ from the workspace's: those a checkpoint after t names, and
// for each rename record after t, the paths beneath its source at t and
// beneath its destination now (a rename record names neither).
func (e *Engine) changedSince(t, limit record.Seq) ([]string, error) {
	return e.changedIn(t, limit, limit)
}

// changedIn lists the paths whose state at t may differ from their state
// at hi-1 (from records below limit; hi == limit means the workspace): as
// changedSince, with the destinations of the rename records before hi
// walked at hi-1.
func (e *Engine) changedIn(t, hi, limit record.Seq) ([]string, error) {
	cands := e.index.ChangedBetween(t, hi)
	renames := e.index.RenamesBetween(t, hi)
	if len(renames) == 0 {
		return cands, nil
	}
	seen := map[string]bool{}
	for _, p := range cands {
		seen[p] = true
	}
	add := func(p string) {
		if !seen[p] {
			seen[p] = true
			cands = append(cands, p)
		}
	}
	var walkAt func(dir string, t record.Seq) error
	walkAt = func(dir string, t record.Seq) error {
		ents, err := e.readDirAt(dir, t, limit)
		if err != nil {
			return err
		}
		for _, de := range ents {
			p := index.JoinPath(dir, de.Name)
			add(p)
			if de.Entry.State.Kind == record.KindDir {
				if err := walkAt(p, t); err != nil {
					return err
				}
			}
		}
		return nil
	}
	for _, r := range renames {
		if ent, err := e.stateAt(r.From, t, limit); err != nil {
			return nil, err
		} else if ent.Exists && ent.State.Kind == record.KindDir {
			if err := walkAt(r.From, t); err != nil {
				return nil, err
			}
		}
		if hi == limit {
			if err := e.walk(r.To, add); err != nil {
				return nil, err
			}
		} else if ent, err := e.stateAt(r.To, hi-1, limit); err != nil {
			return nil, err
		} else if ent.Exists && ent.State.Kind == record.KindDir {
			if err := walkAt(r.To, hi-1); err != nil {
				return nil, err
			}
		}
	}
	return cands, nil
}

// planPaths plans the rewind of exactly cands to their state at t (from
// records below limit). A state that is another path's content now (a
// rename record took it there) is stored first, so that the plan restores
// it from a blob like any recorded state. (A recovering rewind finds such
// content in its own checkpoint where it recorded it: childAt.)
func (e *Engine) planPaths(t, limit record.Seq, cands []string) (*rewindPlan, error) {
	cands = append([]string(nil), cands...)
	sortParentsFirst(cands)
	p := &rewindPlan{}
	for _, path := range cands {
		tgt, err := e.stateAt(path, t, limit)
		if err != nil {
			return nil, err
		}
		if tgt.Exists && tgt.Live {
			if tgt.State.Path == path {
				continue // unchanged since t
			}
			if tgt, err = e.storeMoved(tgt.State.Path); err != nil {
				return nil, err
			}
		}
		cur, err := e.live(path)
		if err != nil {
			return nil, err
		}
		n := len(p.removes) + len(p.creates) + len(p.chmods)
		if err := e.planPath(p, path, tgt, cur); err != nil {
			return nil, err
		}
		if len(p.removes)+len(p.creates)+len(p.chmods) != n {
			p.entries = append(p.entries, planEntry{path: path, tgt: tgt, cur: cur})
		}
	}
	if err := e.leaveIgnored(p); err != nil {
		return nil, err
	}
	p.removes = outermost(p.removes)
	// Deepest first for removals and mode fixes.
	sort.SliceStable(p.removes, func(i, j int) bool { return depth(p.removes[i]) > depth(p.removes[j]) })
	sort.SliceStable(p.chmods, func(i, j int) bool { return depth(p.chmods[i].Path) > depth(p.chmods[j].Path) })
	return p, nil
}

// planPath adds what it takes to turn cur into tgt at path.
func (e *Engine) planPath(p *rewindPlan, path string, tgt, cur Entry) error {
	if !tgt.Exists {
		if cur.Exists && path != "" {
			p.removes = append(p.removes, path)
		}
		return nil
	}
	want := tgt.State
	want.Path = path
	if want.Skipped {
		p.skipped = append(p.skipped, path)
		return nil
	}
	have := cur.State
	if !cur.Exists {
		p.creates = append(p.creates, want)
		if want.Kind == record.KindDir {
			p.chmods = append(p.chmods, want)
		}
		return nil
	}
	switch want.Kind {
	case record.KindDir:
		if have.Kind != record.KindDir {
			p.removes = append(p.removes, path)
			p.creates = append(p.creates, want)
			p.chmods = append(p.chmods, want)
		} else if e.metaDiffers(have, want) {
			p.chmods = append(p.chmods, want)
		}
	case record.KindFile:
		if err := e.checkBlob(want); err != nil {
			return err
		}
		same := false
		if have.Kind == record.KindFile && have.Bytes == want.Bytes {
			h, err := e.hashLive(path)
			if err != nil {
				return err
			}
			same = h == want.Blob
		}
		switch {
		case same && e.metaDiffers(have, want) && e.sharedInode(path):
			p.creates = append(p.creates, want)
		case same && e.metaDiffers(have, want):
			p.chmods = append(p.chmods, want)
		case same:
		default:
			if have.Kind == record.KindDir {
				p.removes = append(p.removes, path)
			}
			p.creates = append(p.creates, want)
		}
	case record.KindSymlink:
		if have.Kind == record.KindSymlink {
			target, err := e.ws.readlink(path)
			if err != nil {
				return fmt.Errorf("rewind: readlink %q: %w", path, err)
			}
			if target == want.Target {
				if e.metaDiffers(have, want) {
					p.chmods = append(p.chmods, want)
				}
				return nil
			}
		}
		if have.Kind == record.KindDir {
			p.removes = append(p.removes, path)
		}
		p.creates = append(p.creates, want)
	default:
		p.skipped = append(p.skipped, path)
	}
	return nil
}

// sharedInode reports whether the file at path has other names (hard
// links): a fix of mode, owner or mtime in place would change theirs too,
// so such a name is restored as a file of its own instead.
func (e *Engine) sharedInode(path string) bool {
	st, err := e.ws.lstat(path)
	return err == nil && st.Nlink > 1
}

// checkBlob verifies the blob a restore would write, before anything
// changes: a damaged or missing blob fails the rewind cleanly.
func (e *Engine) checkBlob(st record.FileState) error {
	id, err := blobstore.ParseID(st.Blob)
	if err != nil {
		return fmt.Errorf("rewind: %q: %w", st.Path, err)
	}
	if err := e.blobs.Verify(id); err != nil {
		return fmt.Errorf("rewind: cannot restore %q: %w", st.Path, err)
	}
	return nil
}

// hashLive is the sha256 of the workspace file at p.
func (e *Engine) hashLive(p string) (string, error) {
	f, err := e.ws.openFile(p)
	if err != nil {
		return "", fmt.Errorf("rewind: read %q: %w", p, err)
	}
	defer f.Close()
	id, _, err := e.blobs.HashFile(f) // a sparse file's holes are not read, and hashed once
	if err != nil {
		return "", fmt.Errorf("rewind: read %q: %w", p, err)
	}
	return id.String(), nil
}

// check refuses, before anything is done, a plan that would act on a path
// that is not a clean relative workspace path, or remove or create the root
// itself. Records are checked as they enter the index; this is the last
// line, so that no bug in planning can send a rewind outside the workspace.
func (p *rewindPlan) check() error {
	bad := func(path string, root bool) bool {
		return (path == "" && !root) || record.CheckRecordPath(path) != ""
	}
	for _, path := range p.removes {
		if bad(path, false) {
			return fmt.Errorf("%w: a rewind would remove %q", record.ErrUnsafePath, path)
		}
	}
	for _, st := range p.creates {
		if bad(st.Path, false) {
			return fmt.Errorf("%w: a rewind would create %q", record.ErrUnsafePath, st.Path)
		}
	}
	for _, st := range p.chmods {
		if bad(st.Path, true) {
			return fmt.Errorf("%w: a rewind would chmod %q", record.ErrUnsafePath, st.Path)
		}
	}
	return nil
}

// outermost drops the paths that lie beneath another path of ps (removing
// a directory removes them), keeping ps's order.
func outermost(ps []string) []string {
	sorted := append([]string(nil), ps...)
	sortParentsFirst(sorted)
	var keep []string
	for _, p := range sorted {
		if !under(p, keep) {
			keep = append(keep, p)
		}
	}
	return keep
}

// under reports whether p is one of roots or beneath one.
func under(p string, roots []string) bool {
	for _, r := range roots {
		if p == r || strings.HasPrefix(p, r+"/") {
			return true
		}
	}
	return false
}

// storeMoved is the workspace path at as a recorded state: its content
// stored now.
func (e *Engine) storeMoved(at string) (Entry, error) {
	st, err := e.readState(at, false, false, false)
	if err != nil {
		return Entry{}, err
	}
	return Entry{Exists: !st.Absent, State: st}, nil
}
