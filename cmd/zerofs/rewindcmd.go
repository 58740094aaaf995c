package main

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/zerofs/zerofs/control"
	"github.com/zerofs/zerofs/history"
	"github.com/zerofs/zerofs/internal/quote"
	"github.com/zerofs/zerofs/record"
)

var rewindCmd = &command{
	name:    "rewind",
	usage:   "rewind [--dry-run] SEQ [-- PATH...] | rewind [--dry-run] --before-turn SEQ",
	summary: "roll back to SEQ (only PATHs, when given)",
	about: `Makes the workspace equal to its state at SEQ; with PATHs, only those paths
(a directory with everything under it), keeping everything else as it is.
The rewind is recorded, so it can itself be undone (zerofs undo or a rewind
to the sequence before it). Paths whose before-state was not kept are listed
as skipped. A rewind that overwrites changes made outside the agent's steps
names them first, on stderr.

SEQ may be a sequence (42 or @42) or relative to the current step: -1 (or
@-1) is the state before the current step, -2 the one before that.
`,
	flags: []flagDef{
		{name: "dry-run", help: `print what would be restored, deleted and created (with +N -M
line counts for text files), and change nothing`},
		{name: "before-turn", arg: "SEQ", comp: compSeq, help: `roll back to just before the turn at SEQ (a person's prompt,
as zerofs log shows it): everything done since that prompt,
by every step and command, is taken back`},
	},
	args: []argDef{{name: "SEQ", comp: compSeq}, {name: "PATH...", afterDashes: true}},
	run:  runRewind,
}

var undoCmd = &command{
	name:    "undo",
	usage:   "undo [--dry-run] [--turn]",
	summary: "roll back the last step, or a rewind or revert just made; names it",
	about: `Rewinds to just before the last step that changed something and is still
in effect, and names it: undid step 42 "Edit main.go": restored 1, deleted 0.
Right after a rewind, path rewind or revert, it takes that back instead
(undid revert 57: ...). Steps that changed nothing (an agent's read-only
tool calls) are passed over; the next undo goes one step further back.
Deleted counts every path removed, everything beneath a removed directory
included. When mounted, the daemon
picks the step under its lock, so two undos at once undo two steps.
`,
	flags: []flagDef{
		{name: "dry-run", help: `print the step and what would be restored, deleted and created
(with +N -M line counts for text files), and change nothing`},
		{name: "turn", help: `take back the whole turn of the last step instead: rewind to
just before the prompt that led to it (needs a prompt hook:
zerofs hooks install)`},
	},
	run: runUndo,
}

var redoCmd = &command{
	name:    "redo",
	usage:   "redo [--dry-run]",
	summary: "undo the last undo (undo and redo stack like an editor's)",
	about: `Undoes the last undo not yet redone: three undos then three redos return
exactly where you were. A step that changes something ends the redo chain
(nothing is lost: every state keeps its sequence, and rewind reaches it).
`,
	flags: []flagDef{{name: "dry-run", help: `print what the redo would restore, delete and create, and
change nothing`}},
	run: runRedo,
}

func runRewind(e *env, c *command, args []string) error {
	o, pos, paths, err := c.parse(args)
	if err != nil {
		return err
	}
	dry := o.Bool("dry-run")
	beforeTurn := o.String("before-turn")
	if beforeTurn != "" {
		if len(pos) > 0 || paths != nil {
			return usagef(c, "--before-turn takes the turn's SEQ and nothing else")
		}
		t, err := parseSeq(c, beforeTurn)
		if err != nil {
			return err
		}
		return rewindTurn(e, t, dry, false)
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
		req := record.Request{Target: t, DryRun: dry}
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
		return writeWords(e.stdout, rep)
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

// applyWith runs req on src: one request, whose report names what it
// acted on and the changes made outside the agent's steps that it
// overwrote, which are named on stderr (a dry run's words list those it
// would overwrite). On a terminal a progress bar runs meanwhile. A
// refused revert returns its report (with the conflicts) and a
// *record.ConflictError.
func applyWith(e *env, src history.Source, req record.Request) (control.RewindReport, error) {
	ctx := e.ctx
	var p *progress
	if !req.DryRun {
		// On a terminal, a bar on stderr while it runs: the engine's own
		// counts, here or (polled from .zero/status) in the daemon.
		p = startProgress(e, rewindVerb(req))
		ctx = p.with(ctx)
	}
	var guard *history.HookGuard // the hook files installed before it
	if ws, err := history.Find(e.cwd); err == nil {
		guard = history.GuardHooks(ws.Root)
	}
	rep, err := doRewind(ctx, src, req)
	p.Done() // cleared before anything is printed
	if err != nil {
		return rep, err
	}
	for _, line := range guard.Warnings(rep) {
		fmt.Fprintf(e.stderr, "zerofs: warning: %s\n", line)
	}
	if !req.DryRun {
		for _, line := range history.ForeignWarnings(rep.Foreign, "overwrote", map[string]bool{}) {
			fmt.Fprintf(e.stderr, "zerofs: warning: %s\n", line)
		}
	}
	return rep, nil
}

// rewindVerb names what req does, for its progress line.
func rewindVerb(req record.Request) string {
	switch {
	case req.Undo:
		return "undo"
	case req.Redo:
		return "redo"
	case req.Revert != 0:
		return "revert"
	}
	return "rewind"
}

// writeWords prints a rewind's report in its one wording
// (history.Describe), as MCP and the timeline say it too.
func writeWords(w io.Writer, rep control.RewindReport) error {
	_, err := io.WriteString(w, history.Describe(rep).String())
	return err
}

func runUndo(e *env, c *command, args []string) error {
	return undoRedo(e, c, args, record.Request{Undo: true})
}

// rewindTurn takes back a turn: the one at seq, or (last) the whole turn
// of what an undo would take back now, which the engine chooses under its
// lock. One request either way, whose report names the turn by its
// prompt.
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
		return writeWords(e.stdout, rep)
	})
}

func runRedo(e *env, c *command, args []string) error {
	return undoRedo(e, c, args, record.Request{Redo: true})
}

func undoRedo(e *env, c *command, args []string, req record.Request) error {
	o, pos, rest, err := c.parse(args)
	if err != nil {
		return err
	}
	if len(pos)+len(rest) > 0 {
		return usagef(c, "unexpected argument %q", append(pos, rest...)[0])
	}
	req.DryRun = o.Bool("dry-run")
	if req.Undo && o.Bool("turn") {
		return rewindTurn(e, 0, req.DryRun, true)
	}
	return withHistory(e, func(_ *history.Workspace, src history.Source) error {
		rep, err := applyWith(e, src, req)
		if err != nil {
			return err
		}
		return writeWords(e.stdout, rep)
	})
}
