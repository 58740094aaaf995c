package main

import (
	"errors"
	"fmt"

	"github.com/zerofs/zerofs/rewind"
)

var rewindCmd = &command{
	name:    "rewind",
	usage:   "rewind SEQ",
	summary: "roll back to SEQ (via .zero/rewind when mounted)",
	help: `Makes the workspace equal to its state at SEQ. The rewind is recorded, so it
can itself be undone (zerofs redo). Paths whose before-state was not kept are
listed as skipped.
`,
	run: runRewind,
}

var undoCmd = &command{
	name:    "undo",
	usage:   "undo",
	summary: "roll back the last step",
	help: `Rewinds to just before the last step that changed something. Steps that
changed nothing (an agent's read-only tool calls) are passed over, and after
an undo the next undo goes one step further back.
`,
	run: runUndo,
}

var redoCmd = &command{
	name:    "redo",
	usage:   "redo",
	summary: "undo the last rewind",
	help: `Rewinds to just before the last rewind (its own checkpoint keeps what it
replaced). Refused when something changed since that rewind.
`,
	run: runRedo,
}

func runRewind(e *env, c *command, args []string) error {
	pos, rest, err := parseArgs(c, newFlags(c), args)
	if err != nil {
		return err
	}
	pos = append(pos, rest...)
	if len(pos) != 1 {
		return usagef(c, "want one SEQ")
	}
	t, err := parseSeq(c, pos[0])
	if err != nil {
		return err
	}
	return withHistory(e, c, func(h history) error {
		return doRewind(e, h, t)
	})
}

// withHistory runs fn on the history of the workspace around the current
// directory, checking that the command took no arguments when c has none.
func withHistory(e *env, c *command, fn func(h history) error) error {
	_, h, err := openWorkspaceHistory(e)
	if err != nil {
		return err
	}
	ferr := fn(h)
	cerr := h.Close()
	if ferr != nil {
		return ferr
	}
	return cerr
}

// doRewind rewinds and reports: "rewound to 42: restored 3, deleted 1,
// skipped 0", then one line per skipped path.
func doRewind(e *env, h history, t Seq) error {
	res, err := h.Rewind(e.ctx, t)
	if errors.Is(err, rewind.ErrNoSuchSeq) {
		return seqError(h, t)
	}
	if err != nil {
		return err
	}
	r := res.Report
	fmt.Fprintf(e.stdout, "rewound to %d: restored %d, deleted %d, skipped %d\n", t, r.Restored, r.Deleted, len(r.Skipped))
	for _, p := range r.Skipped {
		fmt.Fprintf(e.stdout, "  skipped %s\n", p)
	}
	return nil
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
	return rewindToTarget(e, c, args, undoTarget, "nothing to undo")
}

// rewindToTarget runs undo and redo: target picks the sequence from the
// history's blocks, and none is the failure when there is nothing to pick.
func rewindToTarget(e *env, c *command, args []string, target func([]*block) (Seq, bool), none string) error {
	if err := noArgs(c, args); err != nil {
		return err
	}
	return withHistory(e, c, func(h history) error {
		blocks, _, err := readBlocks(h)
		if err != nil {
			return err
		}
		t, ok := target(blocks)
		if !ok {
			return errors.New(none)
		}
		return doRewind(e, h, t)
	})
}

// undoTarget is where undo rewinds to: just before the newest step that
// changed something and is still in effect. A rewind to T puts the
// workspace back at T, so the steps after T are not in effect any more and
// the search goes on from T: repeated undos walk back one step at a time.
func undoTarget(blocks []*block) (Seq, bool) {
	limit := now
	for i := len(blocks) - 1; i >= 0; i-- {
		b := blocks[i]
		if b.Start > limit {
			continue
		}
		switch b.Type {
		case blockRewind:
			if b.Rewind != nil {
				limit = b.Rewind.TargetSequence
			}
		case blockStep:
			if b.changes() {
				return b.Start - 1, true
			}
		}
	}
	return 0, false
}

func runRedo(e *env, c *command, args []string) error {
	return rewindToTarget(e, c, args, redoTarget, "nothing to redo")
}

// redoTarget undoes the newest rewind, if nothing changed after it: the
// rewind's checkpoint holds everything it replaced, so the state just
// before that checkpoint is the state before the rewind.
func redoTarget(blocks []*block) (Seq, bool) {
	for i := len(blocks) - 1; i >= 0; i-- {
		b := blocks[i]
		switch b.Type {
		case blockRewind:
			if b.Rewind == nil || b.Rewind.CheckpointSequence == 0 {
				return 0, false
			}
			return b.Rewind.CheckpointSequence - 1, true
		case blockStep:
			if b.changes() {
				return 0, false
			}
		}
	}
	return 0, false
}
