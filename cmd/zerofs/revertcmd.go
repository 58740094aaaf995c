package main

import (
	"errors"
	"fmt"

	"github.com/zerofs/zerofs/history"
	"github.com/zerofs/zerofs/internal/quote"
	"github.com/zerofs/zerofs/record"
)

var revertCmd = &command{
	name:    "revert",
	usage:   "revert [--dry-run] [--force] SEQ",
	summary: "undo the step at SEQ, keep later changes",
	about: `Puts each path the step at SEQ changed back to its state just before that
step, and keeps every later change to other paths. If a later step (or the
current one) also changed such a path, the revert changes nothing and exits
1 naming each conflicting path, unless --force: then those go back too. The
revert is recorded and can itself be undone.
`,
	flags: []flagDef{
		{name: "dry-run", help: `print what would be restored, deleted and created (with +N -M
line counts for text files), and change nothing`},
		{name: "force", help: "revert even over later changes to the step's paths"},
	},
	args: []argDef{{name: "SEQ", comp: compSeq}},
	more: `SEQ may be relative to the current step: @ is the current step, -1 (or
@-1) the one before it.
`,
	run: runRevert,
}

func runRevert(e *env, c *command, args []string) error {
	o, pos, rest, err := c.parse(args)
	if err != nil {
		return err
	}
	dry := o.Bool("dry-run")
	force := o.Bool("force")
	pos = append(pos, rest...)
	if len(pos) != 1 {
		return usagef(c, "want one SEQ")
	}
	r, err := parseRef(c, pos[0])
	if err != nil {
		return err
	}
	if !r.rel && r.seq == 0 {
		return usagef(c, "sequence 0 is the state before any step: there is no step at 0 to revert")
	}
	return withHistory(e, func(_ *history.Workspace, src history.Source) error {
		s := r.seq
		if r.rel {
			b, err := r.stepBlock(src)
			if err != nil {
				return err
			}
			s = b.Seq
		}
		rep, err := applyWith(e, src, record.Request{Revert: s, Force: force, DryRun: dry})
		var ce *record.ConflictError
		if errors.As(err, &ce) {
			if dry {
				writeWords(e.stdout, rep)
			}
			name := fmt.Sprintf("step %d", s) // a daemon that did not name it
			if rep.Step != nil {
				name = history.Name(rep.Step)
			}
			return fmt.Errorf("revert of %s conflicts with later changes to %s (--force puts them back too)", name, quote.Names(ce.Paths, ", "))
		}
		if err != nil {
			return err
		}
		return writeWords(e.stdout, rep)
	})
}
