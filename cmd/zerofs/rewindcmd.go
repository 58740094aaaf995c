package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"

	"github.com/zerofs/zerofs/control"
	"github.com/zerofs/zerofs/history"
	"github.com/zerofs/zerofs/internal/quote"
	"github.com/zerofs/zerofs/record"
)

var rewindCmd = &command{
	name:    "rewind",
	usage:   "rewind [--dry-run] SEQ [-- PATH...] | rewind [--dry-run] --before-turn SEQ",
	summary: "roll back to SEQ (only PATHs, when given)",
	help: `Makes the workspace equal to its state at SEQ; with PATHs, only those paths
(a directory with everything under it), keeping everything else as it is.
The rewind is recorded, so it can itself be undone (zerofs undo or a rewind
to the sequence before it). Paths whose before-state was not kept are listed
as skipped. A rewind that overwrites changes made outside the agent's steps
names them first, on stderr.

SEQ may be a sequence (42 or @42) or relative to the current step: -1 (or
@-1) is the state before the current step, -2 the one before that.

  --dry-run   print what would be restored, deleted and created (with +N -M
              line counts for text files), and change nothing
  --before-turn SEQ
              roll back to just before the turn at SEQ (a person's prompt,
              as zerofs log shows it): everything done since that prompt,
              by every step and command, is taken back
`,
	run: runRewind,
}

var undoCmd = &command{
	name:    "undo",
	usage:   "undo [--dry-run] [--turn]",
	summary: "roll back the last step; names the step undone",
	help: `Rewinds to just before the last step that changed something and is still
in effect, and names it: undid step 42 "Edit main.go": restored 1, deleted 0.
Steps that changed nothing (an agent's read-only tool calls) are passed
over; the next undo goes one step further back. When mounted, the daemon
picks the step under its lock, so two undos at once undo two steps.

  --dry-run   print the step and what would be restored, deleted and created
              (with +N -M line counts for text files), and change nothing
  --turn      take back the whole turn of the last step instead: rewind to
              just before the prompt that led to it (needs a prompt hook:
              zerofs hooks install)
`,
	run: runUndo,
}

var redoCmd = &command{
	name:    "redo",
	usage:   "redo [--dry-run]",
	summary: "undo the last undo (undo and redo stack like an editor's)",
	help: `Undoes the last undo not yet redone: three undos then three redos return
exactly where you were. A step that changes something ends the redo chain
(nothing is lost: every state keeps its sequence, and rewind reaches it).

  --dry-run   print what the redo would restore, delete and create, and
              change nothing
`,
	run: runRedo,
}

func runRewind(e *env, c *command, args []string) error {
	fs := newFlags(c)
	dry := fs.Bool("dry-run", false, "")
	beforeTurn := fs.String("before-turn", "", "")
	pos, paths, err := parseArgs(c, fs, args)
	if err != nil {
		return err
	}
	if *beforeTurn != "" {
		if len(pos) > 0 || paths != nil {
			return usagef(c, "--before-turn takes the turn's SEQ and nothing else")
		}
		t, err := parseSeq(c, *beforeTurn)
		if err != nil {
			return err
		}
		return rewindTurn(e, t, *dry, false)
	}
	if len(pos) != 1 {
		return usagef(c, "want one SEQ (and PATHs after --)")
	}
	r, err := parseRef(c, pos[0])
	if err != nil {
		return err
	}
	if paths != nil && len(paths) == 0 {
		return usagef(c, "want PATHs after --")
	}
	return withHistory(e, func(ws *history.Workspace, src history.Source) error {
		t, err := r.state(src)
		if err != nil {
			return err
		}
		req := record.Request{Target: t, DryRun: *dry}
		for _, p := range paths {
			rel, err := ws.RelPath(e.cwd, p)
			if err != nil {
				return err
			}
			if err := record.CleanPath(rel); err != nil {
				return fmt.Errorf("%s: not a path zerofs versions (%v)", quote.Name(p), err)
			}
			req.Paths = append(req.Paths, rel)
		}
		rep, err := applyWith(e, src, req)
		if errors.Is(err, errUnchanged) {
			return nil
		}
		var re *record.RefusedError
		if errors.As(err, &re) && re.Refusal == record.RefusedNoSuchPath {
			// Name the paths as they were typed (relative to this
			// directory), not as the workspace names them.
			typed := map[string]string{}
			for i, rel := range req.Paths {
				typed[rel] = paths[i]
			}
			for i, m := range re.Missing {
				if p, ok := typed[m]; ok {
					re.Missing[i] = p
				}
			}
		}
		if err != nil {
			return err
		}
		if *dry {
			what := fmt.Sprintf("rewind to %d", t)
			if len(rep.Paths) > 0 {
				what = fmt.Sprintf("rewind %s to %d", quote.Names(rep.Paths, ", "), t)
			}
			return writePreview(e.stdout, what, rep)
		}
		return writeRewind(e.stdout, rep)
	})
}

// doRewind runs req and explains a sequence that is not in the history.
func doRewind(ctx context.Context, src history.Source, req record.Request) (control.RewindReport, error) {
	rep, err := src.Rewind(ctx, req)
	if errors.Is(err, record.ErrNoSuchSeq) && !req.Undo && !req.Redo && req.Turn == 0 {
		t := req.Target
		if req.Revert != 0 {
			t = req.Revert
		}
		return rep, history.ExplainSeq(src, t, err)
	}
	return rep, err
}

// writeRewind reports a rewind: "rewound to 42: restored 3, deleted 1,
// skipped 0", or for an undo or redo the step it undid or brought back,
// then one line per skipped path.
func writeRewind(w io.Writer, rep control.RewindReport) error {
	r := rep.Report
	var err error
	switch {
	case rep.Undid != nil:
		_, err = fmt.Fprintf(w, "undid %s: restored %d, deleted %d%s\n", stepName(*rep.Undid), r.Restored, r.Deleted, skippedCount(r))
	case rep.Redid != nil:
		_, err = fmt.Fprintf(w, "redid %s: restored %d, deleted %d%s\n", stepName(*rep.Redid), r.Restored, r.Deleted, skippedCount(r))
	case len(rep.Paths) > 0:
		_, err = fmt.Fprintf(w, "rewound %s to %d: restored %d, deleted %d, skipped %d\n", quote.Names(rep.Paths, ", "), rep.TargetSequence, r.Restored, r.Deleted, len(r.Skipped))
	default:
		_, err = fmt.Fprintf(w, "rewound to %d: restored %d, deleted %d, skipped %d\n", rep.TargetSequence, r.Restored, r.Deleted, len(r.Skipped))
	}
	for _, p := range r.Skipped {
		if err == nil {
			_, err = fmt.Fprintf(w, "  skipped %s\n", quote.Name(p))
		}
	}
	return err
}

// stepName is what an undo or redo acted on: `step 42 "Edit main.go"`,
// or a rewind taken back: `rewind 57`, `revert 60`, `path rewind 61`.
func stepName(s record.StepRef) string {
	if s.Kind == "turn" {
		return fmt.Sprintf("turn %d", s.Sequence)
	}
	if s.Kind == "rewind" {
		switch s.Label {
		case record.FormPaths:
			return fmt.Sprintf("path rewind %d", s.Sequence)
		case record.FormRevert, record.FormUndo, record.FormRedo, record.FormTurn, record.FormMerge:
			return fmt.Sprintf("%s %d", s.Label, s.Sequence)
		}
		return fmt.Sprintf("rewind %d", s.Sequence)
	}
	return fmt.Sprintf("step %d %q", s.Sequence, s.Label)
}

func skippedCount(r record.Report) string {
	if len(r.Skipped) == 0 {
		return ""
	}
	return fmt.Sprintf(", skipped %d", len(r.Skipped))
}

func noArgs(c *command, args []string) error {
	pos, rest, err := parseArgs(c, newFlags(c), args)
	if err != nil {
		return err
	}
	if len(pos)+len(rest) > 0 {
		return usagef(c, "unexpected argument %q", append(pos, rest...)[0])
	}
	return nil
}

func runUndo(e *env, c *command, args []string) error {
	for i, a := range args {
		if a == "--turn" || a == "-turn" {
			rest := append(append([]string{}, args[:i]...), args[i+1:]...)
			fs := newFlags(c)
			dry := fs.Bool("dry-run", false, "")
			pos, after, err := parseArgs(c, fs, rest)
			if err != nil {
				return err
			}
			if len(pos)+len(after) > 0 {
				return usagef(c, "unexpected argument %q", append(pos, after...)[0])
			}
			return rewindTurn(e, 0, *dry, true)
		}
	}
	return undoRedo(e, c, args, record.Request{Undo: true})
}

// rewindTurn takes back a turn: the one at seq, or (last) the whole turn
// of what an undo would take back now, which the engine chooses under its
// lock. One request either way; the turn it names is then looked up for
// its prompt, only to say which it was.
func rewindTurn(e *env, seq record.Seq, dry, last bool) error {
	req := record.Request{Turn: seq, DryRun: dry}
	if last {
		req = record.Request{Undo: true, WholeTurn: true, DryRun: dry}
	}
	return withHistory(e, func(_ *history.Workspace, src history.Source) error {
		rep, err := applyWith(e, src, req)
		var re *record.RefusedError
		if !last && errors.As(err, &re) && re.Refusal == record.RefusedNoSuchSeq && re.Seq == seq {
			return &history.TurnError{Seq: seq}
		}
		if err != nil {
			return err
		}
		name := "a turn"
		if rep.Undid != nil {
			name = fmt.Sprintf("turn %d", rep.Undid.Sequence)
			if _, turns, err := history.BlocksAndTurns(src); err == nil {
				if t, err := history.FindTurn(turns, rep.Undid.Sequence); err == nil {
					name = turnName(t)
				}
			}
		}
		if dry {
			return writePreview(e.stdout, fmt.Sprintf("take back %s (rewind to %d)", name, rep.TargetSequence), rep)
		}
		r := rep.Report
		if _, err := fmt.Fprintf(e.stdout, "took back %s: rewound to %d, restored %d, deleted %d%s\n",
			name, rep.TargetSequence, r.Restored, r.Deleted, skippedCount(r)); err != nil {
			return err
		}
		for _, p := range r.Skipped {
			fmt.Fprintf(e.stdout, "  skipped %s\n", p)
		}
		return nil
	})
}

// turnName is `turn 42 "Rename hello..."`.
func turnName(t history.Turn) string {
	if t.Prompt == "" {
		return fmt.Sprintf("turn %d", t.Seq)
	}
	return fmt.Sprintf("turn %d %s", t.Seq, strconv.Quote(cutLine(t.Prompt, 60)))
}

func runRedo(e *env, c *command, args []string) error {
	return undoRedo(e, c, args, record.Request{Redo: true})
}

func undoRedo(e *env, c *command, args []string, req record.Request) error {
	fs := newFlags(c)
	dry := fs.Bool("dry-run", false, "")
	pos, rest, err := parseArgs(c, fs, args)
	if err != nil {
		return err
	}
	if len(pos)+len(rest) > 0 {
		return usagef(c, "unexpected argument %q", append(pos, rest...)[0])
	}
	req.DryRun = *dry
	return withHistory(e, func(_ *history.Workspace, src history.Source) error {
		rep, err := applyWith(e, src, req)
		if err != nil {
			return err
		}
		if *dry {
			what := fmt.Sprintf("%s (rewind to %d)", c.name, rep.TargetSequence)
			switch {
			case rep.Undid != nil:
				what = fmt.Sprintf("undo %s (rewind to %d)", stepName(*rep.Undid), rep.TargetSequence)
			case rep.Redid != nil:
				what = fmt.Sprintf("redo %s (rewind to %d)", stepName(*rep.Redid), rep.TargetSequence)
			}
			return writePreview(e.stdout, what, rep)
		}
		return writeRewind(e.stdout, rep)
	})
}
