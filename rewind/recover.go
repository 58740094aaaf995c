package rewind

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"os"
	"path/filepath"

	"github.com/zerofs/zerofs/internal/durable"
	"github.com/zerofs/zerofs/internal/ignore"
	"github.com/zerofs/zerofs/record"
	"github.com/zerofs/zerofs/rewind/internal/index"
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
	Target     record.Seq       `json:"target"`
	Checkpoint record.Seq       `json:"checkpoint"`
	Narrow     bool             `json:"narrow,omitempty"`
	Paths      []string         `json:"paths,omitempty"`
	Roots      []string         `json:"roots,omitempty"`
	RevertOf   record.Seq       `json:"revertOf,omitempty"`
	Force      bool             `json:"force,omitempty"`
	Foreign    []record.Foreign `json:"foreign,omitempty"`
	Form       string           `json:"form,omitempty"`
	Step       *record.StepRef  `json:"step,omitempty"`
	// Ignore are the ignore patterns the rewind was planned with
	// (ignore.go): finishing it plans with them again.
	Ignore []string `json:"ignore,omitempty"`
	// Targets are a merge's new states, path by path (content stored
	// before the intent); Merge what it brings in.
	Targets []record.FileState  `json:"targets,omitempty"`
	Merge   *record.MergeRecord `json:"merge,omitempty"`
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
	e.recovering = in.Checkpoint
	e.ign.plan = ignore.New(in.Ignore...)
	defer func() { e.recovering, e.ign.plan = 0, nil }()
	if err := e.sweepTemp(in); err != nil {
		return err
	}
	var plan *rewindPlan
	if in.Form == record.FormMerge {
		if plan, err = e.planTargets(in.Targets); err != nil {
			return err
		}
		if err := e.applyPlan(plan, noProgress{}); err != nil {
			return err
		}
		plan = reportTargets(in.Targets)
		report, err := e.report(plan)
		if err != nil {
			return err
		}
		_, err = e.finishRewind(ctx, in, plan, report)
		return err
	}
	if in.Narrow {
		for _, p := range in.Paths {
			if err := record.CleanPath(p); err != nil {
				return &record.DamageError{File: intentName, Reason: fmt.Sprintf("names path %q: %v", p, err)}
			}
		}
		plan, err = e.planPaths(in.Target, in.Checkpoint, in.Paths)
	} else {
		plan, err = e.plan(in.Target, in.Checkpoint)
	}
	if err != nil {
		return err
	}
	if err := e.applyPlan(plan, noProgress{}); err != nil {
		return err
	}
	// The report is what the whole rewind changed, not only what was left
	// to do after the crash.
	plan = e.planFromCheckpoint(in)
	report, err := e.report(plan)
	if err != nil {
		return err
	}
	_, err = e.finishRewind(ctx, in, plan, report)
	return err
}

// CheckIntentFile checks the intent record in store, if there is one, the
// way Open does: against the log, given its head, the start of history and
// its events from a sequence on. It returns a *DamageError naming the
// record, or nil (also when there is no record).
func CheckIntentFile(store string, head, pruned record.Seq, events func(from record.Seq) iter.Seq2[record.Event, error]) error {
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
func checkIntent(file string, data []byte, head, pruned record.Seq, events func(from record.Seq) iter.Seq2[record.Event, error]) (in intent, recorded bool, err error) {
	bad := func(format string, args ...any) (intent, bool, error) {
		return in, false, &record.DamageError{File: file, Reason: fmt.Sprintf(format, args...)}
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
	switch in.Form {
	case "":
		return in, false, &record.BaselineError{File: file, What: "an intent record with no form"}
	case record.FormRewind, record.FormPaths, record.FormRevert, record.FormUndo, record.FormRedo, record.FormTurn:
	case record.FormMerge:
		if in.Merge == nil || len(in.Targets) == 0 {
			return bad("names a merge without its states")
		}
		if err := checkTargets(in.Targets); err != nil {
			return bad("merge: %v", err)
		}
	default:
		return bad("names an unknown form %q", in.Form)
	}
	if in.Step != nil && in.Step.Sequence >= in.Checkpoint {
		return bad("names step %d, not before its checkpoint %d", in.Step.Sequence, in.Checkpoint)
	}
	for ev, err := range events(in.Checkpoint) {
		if err != nil {
			return in, false, err
		}
		switch {
		case ev.Seq == in.Checkpoint:
			var cp record.Checkpoint
			if ev.Type != record.TypeCheckpoint || json.Unmarshal(ev.Payload, &cp) != nil || cp.Tool != "rewind" {
				return bad("names sequence %d, which is not a rewind's checkpoint", in.Checkpoint)
			}
		case ev.Seq == in.Checkpoint+1 && ev.Type == record.TypeRewind:
			var rp record.RewindPayload
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
	for _, p := range e.index.ChangedBetween(in.Target, in.Checkpoint+1) {
		if p == "" {
			continue
		}
		dir, name := index.SplitPath(p)
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
			p := index.JoinPath(dir, n)
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
	for _, path := range e.index.ChangedBetween(in.Checkpoint-1, in.Checkpoint+1) {
		tgt, err := e.stateAt(path, in.Target, in.Checkpoint)
		if err != nil {
			continue
		}
		before, ok := e.index.At(path, in.Checkpoint-1, in.Checkpoint+1)
		if !ok {
			continue
		}
		switch {
		case !tgt.Exists && !before.State.Absent:
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
