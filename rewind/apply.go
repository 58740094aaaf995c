package rewind

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/zerofs/zerofs/blobstore"
	"github.com/zerofs/zerofs/internal/durable"
	"github.com/zerofs/zerofs/record"
	"github.com/zerofs/zerofs/rewind/internal/index"
)

// crashPoint is called at the named points of a rewind; crash tests set it
// to kill the process there.
var crashPoint = func(name string) {}

// crashReader, when set (by crash tests), wraps the content of every file a
// rewind restores, so that a crash point can fire inside the file's write.
var crashReader func(io.Reader) io.Reader

// Rewind makes the workspace equal to its state at t, records the rewind,
// and ends the current step. ErrNoSuchSeq when t > head. Other writers wait
// while it runs.
func (e *Engine) Rewind(ctx context.Context, t record.Seq) (record.RewindResult, error) {
	return e.Apply(ctx, record.Request{Target: t})
}

// carryOut makes plan happen and records it: its before-states become one
// durable checkpoint, then the intent, then the workspace changes, then the
// session_rewind. The caller holds wsMu for writing.
func (e *Engine) carryOut(ctx context.Context, in intent, plan *rewindPlan) (record.RewindResult, error) {
	report, err := e.report(plan)
	if err != nil {
		return record.RewindResult{}, err
	}
	if !plan.empty() {
		cp, err := e.captureForRewind(ctx, plan)
		if err != nil {
			return record.RewindResult{}, err
		}
		crashPoint("rewind:captured")
		in.Checkpoint = cp
		in.Ignore = e.IgnorePatterns()
		b, _ := json.Marshal(in)
		if err := durable.WriteFileAtomic(e.opts.StoreDir, intentName, b, 0o600); err != nil {
			return record.RewindResult{}, fmt.Errorf("rewind: write intent: %w", err)
		}
		crashPoint("rewind:intent")
		if err := e.applyPlan(plan, ProgressIn(ctx)); err != nil {
			return record.RewindResult{}, e.rollBack(cp, err)
		}
		crashPoint("rewind:applied")
	}
	return e.finishRewind(ctx, in, plan, report)
}

// finishRewind appends the session_rewind event, removes the intent and
// ends the current step. report is what the plan did (report, counted
// before it was applied).
func (e *Engine) finishRewind(ctx context.Context, in intent, plan *rewindPlan, report record.Report) (record.RewindResult, error) {
	payload := record.RewindPayload{TargetSequence: in.Target, CheckpointSequence: in.Checkpoint, Report: report,
		Paths: in.Roots, RevertOf: in.RevertOf, Force: in.Force, Foreign: in.Foreign, Form: in.Form, Step: in.Step, Merge: in.Merge}
	ev, err := e.log.Append(ctx, record.TypeRewind, payload)
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
		return record.RewindResult{}, e.fail(fmt.Errorf("rewind: the rewind was applied but could not be recorded (%w); remount to finish it", err))
	}
	e.capMu.Lock()
	e.setStep(Step{Seq: ev.Seq})
	e.sessions = nil // a rewind ends every session's step
	e.capMu.Unlock()
	e.state.AddRewind(ev, payload)
	if err := e.captureOpenWriters(ctx); err != nil {
		// The rewind is done and recorded; only the new step's record of
		// a file held open for writing is missing.
		e.opts.Logger.Warn("rewind: after the rewind", "err", err)
	}
	return record.RewindResult{Report: report, Seq: ev.Seq, Changed: plan.changed(), Foreign: in.Foreign, Record: payload}, nil
}

// report counts what plan does, as a person counts it: each path it
// restores (or creates), and each path it deletes, everything beneath a
// deleted directory included, so the undo of a step that added a
// directory of 3 files deletes 4 paths, as its redo restores 4. It reads
// the removed directories, so it is called before the plan is applied.
func (e *Engine) report(plan *rewindPlan) (record.Report, error) {
	r := record.Report{Skipped: append([]string{}, plan.skipped...)}
	restored := map[string]bool{}
	for _, s := range plan.creates {
		restored[s.Path] = true
	}
	for _, s := range plan.chmods {
		restored[s.Path] = true
	}
	r.Restored = len(restored)
	removed := map[string]bool{}
	for _, p := range plan.removes {
		removed[p] = true
	}
	dir := map[string]bool{}
	for _, pe := range plan.entries {
		dir[pe.path] = pe.cur.Exists && pe.cur.State.Kind == record.KindDir
	}
	for _, p := range plan.removes {
		if !restored[p] {
			r.Deleted++
		}
		if !dir[p] {
			continue
		}
		err := e.walk(p, func(q string) {
			if !restored[q] && !removed[q] {
				r.Deleted++
			}
		})
		if err != nil {
			return record.Report{}, err
		}
	}
	return r, nil
}

// rollBack tries to put back the before-rewind state after a failed apply.
// If that fails too, the intent stays, further changes are refused, and the
// next Open finishes the rewind.
func (e *Engine) rollBack(cp record.Seq, cause error) error {
	back, err := e.plan(cp-1, ^record.Seq(0))
	if err == nil {
		err = e.applyPlan(back, noProgress{})
	}
	if err == nil {
		err = durable.Remove(e.opts.StoreDir, intentName)
	}
	if err != nil {
		return e.fail(fmt.Errorf("rewind: a rewind failed half-way (%v) and could not be rolled back (%v); remount to finish it", cause, err))
	}
	return fmt.Errorf("%w (%w)", &record.RefusedError{Refusal: record.RefusedWorkspace,
		Msg: "rewind: the workspace could not be changed, so the rewind was rolled back and nothing changed"}, cause)
}

// captureForRewind stores the before-state of everything plan changes
// (whole subtrees of what it removes) as one durable checkpoint.
func (e *Engine) captureForRewind(ctx context.Context, plan *rewindPlan) (record.Seq, error) {
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
	files := make([]record.FileState, 0, len(paths))
	for _, p := range paths {
		st, err := e.readState(p, false, false, false)
		if err != nil {
			return 0, err
		}
		files = append(files, st)
	}
	ev, err := e.log.Append(ctx, record.TypeCheckpoint, record.Checkpoint{Tool: "rewind", Files: files, Rewind: true})
	if err != nil {
		return 0, err
	}
	if err := e.state.AddRewindCheckpoint(ev.Seq, files); err != nil {
		return 0, e.fail(err)
	}
	if err := e.Sync(); err != nil {
		return 0, err
	}
	return ev.Seq, nil
}

// applyPlan carries plan out and makes it durable.
func (e *Engine) applyPlan(plan *rewindPlan, pr Progress) error {
	if err := plan.check(); err != nil {
		return err
	}
	var bytes int64
	for _, st := range plan.creates {
		if st.Kind == record.KindFile {
			bytes += st.Bytes
		}
	}
	pr.Begin("rewind", int64(len(plan.removes)+len(plan.creates)+len(plan.chmods)), bytes)
	dirs := map[string]bool{}
	touch := func(p string) {
		d, _ := index.SplitPath(p)
		dirs[d] = true
	}
	for _, p := range plan.removes {
		if err := e.ws.remove(p); err != nil {
			return fmt.Errorf("rewind: remove %q: %w", p, err)
		}
		touch(p)
		pr.Add(1, 0)
	}
	for i, st := range plan.creates {
		if i == len(plan.creates)/2 {
			crashPoint("rewind:half")
		}
		if err := e.create(st); err != nil {
			return err
		}
		touch(st.Path)
		if st.Kind == record.KindFile {
			pr.Add(1, st.Bytes)
		} else {
			pr.Add(1, 0)
		}
	}
	for _, st := range plan.chmods {
		if err := e.restoreMeta(st); err != nil {
			return err
		}
		touch(st.Path)
		if st.Kind == record.KindDir {
			dirs[st.Path] = true
		}
		pr.Add(1, 0)
	}
	for d := range dirs {
		if err := e.ws.syncDir(d); err != nil && !isMissing(err) {
			return fmt.Errorf("rewind: fsync %q: %w", d, err)
		}
	}
	return nil
}

// create makes st at its path: a directory, a file from its blob, or a
// symlink. Files and symlinks replace what is there atomically.
func (e *Engine) create(st record.FileState) error {
	switch st.Kind {
	case record.KindDir:
		err := e.ws.mkdir(st.Path)
		if err != nil && !errors.Is(err, os.ErrExist) {
			return fmt.Errorf("rewind: mkdir %q: %w", st.Path, err)
		}
	case record.KindFile:
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
		finish := func(dirfd, fd int) error { return finishFile(fd, confined(st, dirfd)) }
		if err := e.ws.writeFile(st.Path, content, finish); err != nil {
			return fmt.Errorf("rewind: restore %q: %w", st.Path, err)
		}
	case record.KindSymlink:
		finish := func(dirfd int, tmp string) error { return finishSymlink(dirfd, tmp, st) }
		if err := e.ws.symlink(st.Path, st.Target, finish); err != nil {
			return fmt.Errorf("rewind: symlink %q: %w", st.Path, err)
		}
	}
	return nil
}
