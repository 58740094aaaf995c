package rewind

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/zerofs/zerofs/blobstore"
	"github.com/zerofs/zerofs/eventlog"
	"github.com/zerofs/zerofs/internal/durable"
)

// intentName is the rewind's intent record in the store. It exists exactly
// while a rewind is being applied: Open finishes a rewind whose intent it
// finds.
const intentName = "rewind-intent.json"

// intent names the rewind under way: its target and the checkpoint holding
// the before-state of everything it changes. A path rewind or a revert
// (Narrow) plans exactly Paths; the other fields are what its
// session_rewind records.
type intent struct {
	Target     Seq       `json:"target"`
	Checkpoint Seq       `json:"checkpoint"`
	Narrow     bool      `json:"narrow,omitempty"`
	Paths      []string  `json:"paths,omitempty"`
	Roots      []string  `json:"roots,omitempty"`
	RevertOf   Seq       `json:"revertOf,omitempty"`
	Force      bool      `json:"force,omitempty"`
	Foreign    []Foreign `json:"foreign,omitempty"`
}

// crashPoint is called at the named points of a rewind; crash tests set it
// to kill the process there.
var crashPoint = func(name string) {}

// crashReader, when set (by crash tests), wraps the content of every file a
// rewind restores, so that a crash point can fire inside the file's write.
var crashReader func(io.Reader) io.Reader

// rewindPlan is what a rewind must do, in order: removals (deepest first),
// creations (parents first), then fixes of owner, mode and mtime (deepest
// first, so a directory that forbids writing gets its mode, and every
// directory its mtime, after its children are in place).
type rewindPlan struct {
	removes []string
	creates []FileState
	chmods  []FileState
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

// Rewind makes the workspace equal to its state at t, records the rewind,
// and ends the current step. ErrNoSuchSeq when t > head. Other writers wait
// while it runs.
func (e *Engine) Rewind(ctx context.Context, t Seq) (Result, error) {
	return e.Apply(ctx, Request{Target: t})
}

// carryOut makes plan happen and records it: its before-states become one
// durable checkpoint, then the intent, then the workspace changes, then the
// session_rewind. The caller holds wsMu for writing.
func (e *Engine) carryOut(ctx context.Context, in intent, plan *rewindPlan) (Result, error) {
	if !plan.empty() {
		cp, err := e.captureForRewind(ctx, plan)
		if err != nil {
			return Result{}, err
		}
		crashPoint("rewind:captured")
		in.Checkpoint = cp
		b, _ := json.Marshal(in)
		if err := durable.WriteFileAtomic(e.opts.StoreDir, intentName, b, 0o600); err != nil {
			return Result{}, fmt.Errorf("rewind: write intent: %w", err)
		}
		crashPoint("rewind:intent")
		if err := e.applyPlan(plan); err != nil {
			return Result{}, e.rollBack(cp, err)
		}
		crashPoint("rewind:applied")
	}
	return e.finishRewind(ctx, in, plan)
}

// finishRewind appends the session_rewind event, removes the intent and
// ends the current step.
func (e *Engine) finishRewind(ctx context.Context, in intent, plan *rewindPlan) (Result, error) {
	report := e.report(plan)
	payload := RewindPayload{TargetSequence: in.Target, CheckpointSequence: in.Checkpoint, Report: report,
		Paths: in.Roots, RevertOf: in.RevertOf, Force: in.Force, Foreign: in.Foreign}
	ev, err := e.log.Append(ctx, eventlog.TypeRewind, payload)
	if err == nil {
		err = e.Sync()
	}
	if err == nil && in.Checkpoint != 0 {
		err = durable.Remove(e.opts.StoreDir, intentName)
	}
	if err != nil {
		// The workspace is rewound but the rewind is not recorded, and its
		// intent may remain: a later change would be undone when the next
		// open finishes the rewind, so refuse changes until then.
		return Result{}, e.fail(fmt.Errorf("rewind: the rewind was applied but could not be recorded (%w); remount to finish it", err))
	}
	e.capMu.Lock()
	e.lastRewind, e.lastRewindAt = payload, ev.Seq
	e.setStep(Step{Seq: ev.Seq})
	e.markLocked(ev)
	e.capMu.Unlock()
	if err := e.captureOpenWriters(ctx); err != nil {
		// The rewind is done and recorded; only the new step's record of
		// a file held open for writing is missing.
		e.opts.Logger.Warn("rewind: after the rewind", "err", err)
	}
	return Result{Report: report, Seq: ev.Seq, Changed: plan.changed(), Foreign: in.Foreign, Record: payload}, nil
}

// report counts what plan did.
func (e *Engine) report(plan *rewindPlan) Report {
	r := Report{Skipped: append([]string{}, plan.skipped...)}
	restored := map[string]bool{}
	for _, s := range plan.creates {
		restored[s.Path] = true
	}
	for _, s := range plan.chmods {
		restored[s.Path] = true
	}
	r.Restored = len(restored)
	for _, p := range plan.removes {
		if !restored[p] {
			r.Deleted++
		}
	}
	return r
}

// rollBack tries to put back the before-rewind state after a failed apply.
// If that fails too, the intent stays, further changes are refused, and the
// next Open finishes the rewind.
func (e *Engine) rollBack(cp Seq, cause error) error {
	back, err := e.plan(cp-1, ^Seq(0))
	if err == nil {
		err = e.applyPlan(back)
	}
	if err == nil {
		err = durable.Remove(e.opts.StoreDir, intentName)
	}
	if err != nil {
		return e.fail(fmt.Errorf("rewind: a rewind failed half-way (%v) and could not be rolled back (%v); remount to finish it", cause, err))
	}
	return fmt.Errorf("rewind: failed and rolled back: %w", cause)
}

// plan compares the state at t (from records below limit) with the
// workspace for every path a checkpoint after t names.
func (e *Engine) plan(t, limit Seq) (*rewindPlan, error) {
	return e.planPaths(t, limit, e.index.changedBetween(t, limit))
}

// planPaths plans the rewind of exactly cands to their state at t (from
// records below limit).
func (e *Engine) planPaths(t, limit Seq, cands []string) (*rewindPlan, error) {
	cands = append([]string(nil), cands...)
	sortParentsFirst(cands)
	p := &rewindPlan{}
	for _, path := range cands {
		tgt, err := e.stateAt(path, t, limit)
		if err != nil {
			return nil, err
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
		if want.Kind == KindDir {
			p.chmods = append(p.chmods, want)
		}
		return nil
	}
	switch want.Kind {
	case KindDir:
		if have.Kind != KindDir {
			p.removes = append(p.removes, path)
			p.creates = append(p.creates, want)
			p.chmods = append(p.chmods, want)
		} else if metaDiffers(have, want) {
			p.chmods = append(p.chmods, want)
		}
	case KindFile:
		if err := e.checkBlob(want); err != nil {
			return err
		}
		same := false
		if have.Kind == KindFile && have.Bytes == want.Bytes {
			h, err := e.hashLive(path)
			if err != nil {
				return err
			}
			same = h == want.Blob
		}
		switch {
		case same && metaDiffers(have, want) && e.sharedInode(path):
			p.creates = append(p.creates, want)
		case same && metaDiffers(have, want):
			p.chmods = append(p.chmods, want)
		case same:
		default:
			if have.Kind == KindDir {
				p.removes = append(p.removes, path)
			}
			p.creates = append(p.creates, want)
		}
	case KindSymlink:
		if have.Kind == KindSymlink {
			target, err := e.ws.readlink(path)
			if err != nil {
				return fmt.Errorf("rewind: readlink %q: %w", path, err)
			}
			if target == want.Target {
				if metaDiffers(have, want) {
					p.chmods = append(p.chmods, want)
				}
				return nil
			}
		}
		if have.Kind == KindDir {
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
func (e *Engine) checkBlob(st FileState) error {
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
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", fmt.Errorf("rewind: read %q: %w", p, err)
	}
	var id blobstore.ID
	h.Sum(id[:0])
	return id.String(), nil
}

// captureForRewind stores the before-state of everything plan changes
// (whole subtrees of what it removes) as one durable checkpoint.
func (e *Engine) captureForRewind(ctx context.Context, plan *rewindPlan) (Seq, error) {
	// What a removal takes away includes everything under it; a restore or
	// a mode fix changes only its own path.
	removed := map[string]bool{}
	for _, p := range plan.removes {
		removed[p] = true
	}
	var changes []Change
	for _, p := range plan.changed() {
		changes = append(changes, Change{Path: p, Tree: removed[p]})
	}
	paths, err := e.expand(changes)
	if err != nil {
		return 0, err
	}
	files := make([]FileState, 0, len(paths))
	for _, p := range paths {
		st, err := e.readState(p, false)
		if err != nil {
			return 0, err
		}
		files = append(files, st)
	}
	ev, err := e.appendCheckpoint(ctx, "rewind", files)
	if err != nil {
		return 0, err
	}
	if err := e.Sync(); err != nil {
		return 0, err
	}
	return ev.Seq, nil
}

// check refuses, before anything is done, a plan that would act on a path
// that is not a clean relative workspace path, or remove or create the root
// itself. Records are checked as they enter the index; this is the last
// line, so that no bug in planning can send a rewind outside the workspace.
func (p *rewindPlan) check() error {
	bad := func(path string, root bool) bool {
		return (path == "" && !root) || checkRecordPath(path) != ""
	}
	for _, path := range p.removes {
		if bad(path, false) {
			return fmt.Errorf("%w: a rewind would remove %q", ErrUnsafePath, path)
		}
	}
	for _, st := range p.creates {
		if bad(st.Path, false) {
			return fmt.Errorf("%w: a rewind would create %q", ErrUnsafePath, st.Path)
		}
	}
	for _, st := range p.chmods {
		if bad(st.Path, true) {
			return fmt.Errorf("%w: a rewind would chmod %q", ErrUnsafePath, st.Path)
		}
	}
	return nil
}

// applyPlan carries plan out and makes it durable.
func (e *Engine) applyPlan(plan *rewindPlan) error {
	if err := plan.check(); err != nil {
		return err
	}
	dirs := map[string]bool{}
	touch := func(p string) {
		d, _ := splitPath(p)
		dirs[d] = true
	}
	for _, p := range plan.removes {
		if err := e.ws.remove(p); err != nil {
			return fmt.Errorf("rewind: remove %q: %w", p, err)
		}
		touch(p)
	}
	for i, st := range plan.creates {
		if i == len(plan.creates)/2 {
			crashPoint("rewind:half")
		}
		if err := e.create(st); err != nil {
			return err
		}
		touch(st.Path)
	}
	for _, st := range plan.chmods {
		if err := e.restoreMeta(st); err != nil {
			return err
		}
		touch(st.Path)
		if st.Kind == KindDir {
			dirs[st.Path] = true
		}
	}
	for d := range dirs {
		if err := e.ws.syncDir(d); err != nil && !isMissing(err) {
			return fmt.Errorf("rewind: fsync %q: %w", d, err)
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

// create makes st at its path: a directory, a file from its blob, or a
// symlink. Files and symlinks replace what is there atomically.
func (e *Engine) create(st FileState) error {
	switch st.Kind {
	case KindDir:
		err := e.ws.mkdir(st.Path)
		if err != nil && !errors.Is(err, os.ErrExist) {
			return fmt.Errorf("rewind: mkdir %q: %w", st.Path, err)
		}
	case KindFile:
		id, err := blobstore.ParseID(st.Blob)
		if err != nil {
			return fmt.Errorf("rewind: %q: %w", st.Path, err)
		}
		r, err := e.blobs.Open(id)
		if err != nil {
			return fmt.Errorf("rewind: restore %q: %w", st.Path, err)
		}
		defer r.Close()
		var content io.Reader = r
		if crashReader != nil {
			content = crashReader(r)
		}
		finish := func(fd int) error { return finishFile(fd, st) }
		if err := e.ws.writeFile(st.Path, content, finish); err != nil {
			return fmt.Errorf("rewind: restore %q: %w", st.Path, err)
		}
	case KindSymlink:
		finish := func(dirfd int, tmp string) error { return finishSymlink(dirfd, tmp, st) }
		if err := e.ws.symlink(st.Path, st.Target, finish); err != nil {
			return fmt.Errorf("rewind: symlink %q: %w", st.Path, err)
		}
	}
	return nil
}

// recoverRewind finishes a rewind interrupted by a crash: it plans again
// from the records before the rewind's own checkpoint, applies what is
// left, and records the rewind. The intent record is untrusted input like
// the rest of the store: it must name a rewind's checkpoint that the log
// holds as its last event (or followed only by that rewind's own
// session_rewind, when the crash came after recording it), or Open refuses
// the store.
func (e *Engine) recoverRewind(ctx context.Context) error {
	b, err := os.ReadFile(filepath.Join(e.opts.StoreDir, intentName))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("rewind: read intent: %w", err)
	}
	in, recorded, err := checkIntent(intentName, b, e.Head(), e.PrunedBefore(), e.log.Events)
	if err != nil {
		return err
	}
	if recorded {
		// The crash came after the session_rewind was durable and before
		// the intent was removed: the rewind is whole.
		e.opts.Logger.Warn("rewind: removing the intent of a rewind already recorded", "target", in.Target, "checkpoint", in.Checkpoint)
		return durable.Remove(e.opts.StoreDir, intentName)
	}
	e.opts.Logger.Warn("rewind: finishing a rewind interrupted by a crash", "target", in.Target, "checkpoint", in.Checkpoint)
	if err := e.sweepTemp(in); err != nil {
		return err
	}
	var plan *rewindPlan
	if in.Narrow {
		for _, p := range in.Paths {
			if err := CleanPath(p); err != nil {
				return &DamageError{File: intentName, Reason: fmt.Sprintf("names path %q: %v", p, err)}
			}
		}
		plan, err = e.planPaths(in.Target, in.Checkpoint, in.Paths)
	} else {
		plan, err = e.plan(in.Target, in.Checkpoint)
	}
	if err != nil {
		return err
	}
	if err := e.applyPlan(plan); err != nil {
		return err
	}
	// The report is what the whole rewind changed, not only what was left
	// to do after the crash.
	_, err = e.finishRewind(ctx, in, e.planFromCheckpoint(in))
	return err
}

// CheckIntentFile checks the intent record in store, if there is one, the
// way Open does: against the log, given its head, the start of history and
// its events from a sequence on. It returns a *DamageError naming the
// record, or nil (also when there is no record).
func CheckIntentFile(store string, head, pruned Seq, events func(from Seq) iter.Seq2[eventlog.Event, error]) error {
	b, err := os.ReadFile(filepath.Join(store, intentName))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("rewind: read intent: %w", err)
	}
	_, _, err = checkIntent(filepath.Join(store, intentName), b, head, pruned, events)
	return err
}

// tempForAny reports whether n is a temporary name for one of names.
func tempForAny(n string, names map[string]bool) bool {
	for name := range names {
		if durable.IsTempFor(n, name) {
			return true
		}
	}
	return false
}

// checkIntent parses the intent record data and checks it against the log
// (head, the pruned start of history, and its events from a sequence on):
// the checkpoint it names must be a rewind's checkpoint above the target,
// and nothing may follow it but that rewind's session_rewind (recorded is
// then true). Anything else is a *DamageError naming file.
func checkIntent(file string, data []byte, head, pruned Seq, events func(from Seq) iter.Seq2[eventlog.Event, error]) (in intent, recorded bool, err error) {
	bad := func(format string, args ...any) (intent, bool, error) {
		return in, false, &DamageError{File: file, Reason: fmt.Sprintf(format, args...)}
	}
	if err := json.Unmarshal(data, &in); err != nil {
		return bad("not an intent record: %v", err)
	}
	if in.Checkpoint == 0 || in.Checkpoint > head {
		return bad("names checkpoint %d, not in the log (head %d)", in.Checkpoint, head)
	}
	if in.Target >= in.Checkpoint || in.Target < pruned {
		return bad("names target %d, not in %d..%d", in.Target, pruned, in.Checkpoint-1)
	}
	for ev, err := range events(in.Checkpoint) {
		if err != nil {
			return in, false, err
		}
		switch {
		case ev.Seq == in.Checkpoint:
			var cp Checkpoint
			if ev.Type != eventlog.TypeCheckpoint || json.Unmarshal(ev.Payload, &cp) != nil || cp.Tool != "rewind" {
				return bad("names sequence %d, which is not a rewind's checkpoint", in.Checkpoint)
			}
		case ev.Seq == in.Checkpoint+1 && ev.Type == eventlog.TypeRewind:
			var rp RewindPayload
			if json.Unmarshal(ev.Payload, &rp) != nil || rp.CheckpointSequence != in.Checkpoint || rp.TargetSequence != in.Target {
				return bad("checkpoint %d is followed by another rewind (sequence %d)", in.Checkpoint, ev.Seq)
			}
			recorded = true
		default:
			return bad("checkpoint %d is followed by sequence %d (%s): the intent is stale", in.Checkpoint, ev.Seq, ev.Type)
		}
	}
	return in, recorded, nil
}

// sweepTemp removes the temporary files a crash inside the rewind's file
// writes left in the workspace: in the directory of every path the rewind
// restores, the names internal/durable's scheme gives a temporary file for
// that path's name. Nothing else is touched, so a user's file of a similar
// name survives.
func (e *Engine) sweepTemp(in intent) error {
	byDir := map[string]map[string]bool{}
	for _, p := range e.index.changedBetween(in.Target, in.Checkpoint+1) {
		if p == "" {
			continue
		}
		dir, name := splitPath(p)
		if byDir[dir] == nil {
			byDir[dir] = map[string]bool{}
		}
		byDir[dir][name] = true
	}
	for dir, names := range byDir {
		ents, err := e.ws.readDirNames(dir)
		if isMissing(err) {
			continue
		}
		if err != nil {
			return fmt.Errorf("rewind: sweep temporary files in %q: %w", dir, err)
		}
		for _, n := range ents {
			if !durable.IsTemp(n) || !tempForAny(n, names) {
				continue
			}
			p := joinPath(dir, n)
			if err := e.ws.remove(p); err != nil {
				return fmt.Errorf("rewind: remove temporary file %q: %w", p, err)
			}
			e.opts.Logger.Warn("rewind: removed a temporary file left by the crash", "path", p)
		}
	}
	return nil
}

// planFromCheckpoint rebuilds, for the report, the set of paths the
// interrupted rewind changed: those its checkpoint names whose state at the
// target differs from the before-state it captured.
func (e *Engine) planFromCheckpoint(in intent) *rewindPlan {
	p := &rewindPlan{}
	for _, path := range e.index.changedBetween(in.Checkpoint-1, in.Checkpoint+1) {
		tgt, err := e.stateAt(path, in.Target, in.Checkpoint)
		if err != nil {
			continue
		}
		before, ok := e.index.at(path, in.Checkpoint-1, in.Checkpoint+1)
		if !ok {
			continue
		}
		switch {
		case !tgt.Exists && !before.st.Absent:
			p.removes = append(p.removes, path)
		case tgt.Exists && tgt.State.Skipped:
			p.skipped = append(p.skipped, path)
		case tgt.Exists:
			st := tgt.State
			st.Path = path
			p.creates = append(p.creates, st)
		}
	}
	return p
}
