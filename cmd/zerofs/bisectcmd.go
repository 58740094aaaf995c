package main

import (
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/zerofs/zerofs/bisect"
	"github.com/zerofs/zerofs/history"
	"github.com/zerofs/zerofs/internal/quote"
	"github.com/zerofs/zerofs/record"
)

var bisectCmd = &command{
	name:    "bisect",
	usage:   "bisect [--turns] [--good SEQ] [--bad SEQ] [--timeout D] -- CMD [ARG...]",
	summary: "find the step after which CMD fails (like git bisect run)",
	about: `Runs CMD against past states of the workspace and names the first step
after which it fails, as 'git bisect run' names a commit: CMD's exit status
0 means good, 125 skip (the state cannot be tested), anything else below
128 bad; 128 and above (a signal) stops the search. CMD runs in a scratch
copy of each state (in $TMPDIR, written from the history and moved from
state to state by the paths that differ), in the directory you ran bisect
from, never in the workspace: the workspace, its head and its log are left
as they are, and nothing is recorded.

It prints each probe (the state, its step, the verdict and how long CMD
took), then the first bad step with its turn, the paths it changed (as log
--stat) and CMD's last lines of output there, and the command that undoes
it ('zerofs revert SEQ'). The last line is
  first bad step SEQ "LABEL"      (first bad turn SEQ "PROMPT" with --turns)
It exits 0 when it names one; 1 when CMD does not fail at the newest (--bad)
state, fails at the oldest (--good) one too, or only skipped states (or
states gc thinned away) are left. With N steps between the two states it
needs at most ceil(log2(N+1))+1 runs of CMD. On an unmounted workspace it
holds the store (as every command does) until it ends.
`,
	flags: []flagDef{
		{name: "turns", help: "test turn boundaries only: name the first bad turn"},
		{name: "good", arg: "SEQ", comp: compSeq, help: `a state where CMD passes (default: the oldest state kept,
narrowed by an ok result the history recorded for the same
command, which is checked before it is trusted)`},
		{name: "bad", arg: "SEQ", comp: compSeq, help: "a state where CMD fails (default: now)"},
		{name: "timeout", arg: "D", def: time.Duration(0), comp: compNone, help: "kill CMD after D (e.g. 2m) and count the state as bad"},
	},
	args: []argDef{
		{name: "CMD", comp: compCommand, afterDashes: true},
		{name: "ARG...", afterDashes: true},
	},
	more: `SEQ is a state, as for rewind and diff: 42 (or @42), or -1 (the state before
the current step).
`,
	run: runBisect,
}

func runBisect(e *env, c *command, args []string) error {
	o, pos, argv, err := c.parse(args)
	if err != nil {
		return err
	}
	turns := o.Bool("turns")
	good := o.String("good")
	bad := o.String("bad")
	timeout := o.Duration("timeout")
	if len(pos) > 0 {
		return usagef(c, "unexpected argument %q: the command goes after --", pos[0])
	}
	if len(argv) == 0 {
		return usagef(c, "want a command after --")
	}
	if timeout < 0 {
		return usagef(c, "--timeout %v is negative", timeout)
	}
	var goodRef, badRef *ref
	for _, x := range []struct {
		s   string
		out **ref
	}{{good, &goodRef}, {bad, &badRef}} {
		if x.s == "" {
			continue
		}
		r, err := parseRef(c, x.s)
		if err != nil {
			return err
		}
		*x.out = &r
	}
	return withHistory(e, func(ws *history.Workspace, src history.Source) error {
		opts := bisect.Options{Argv: argv, Turns: turns, Timeout: timeout}
		var err error
		if goodRef != nil {
			if opts.Good, err = goodRef.state(src); err != nil {
				return err
			}
		}
		if badRef != nil {
			if opts.Bad, err = badRef.state(src); err != nil {
				return err
			}
		}
		if rel, err := ws.RelPath(e.cwd, "."); err == nil {
			opts.Dir = rel
		}
		return bisectPrint(e, src, opts)
	})
}

// bisectPrint runs the search and prints it.
func bisectPrint(e *env, src history.Source, opts bisect.Options) error {
	w := e.stdout
	cmdline := quote.Line(strings.Join(opts.Argv, " "))
	what := "step"
	if opts.Turns {
		what = "turn"
	}
	progress := isTerminal(e.stderr) && !e.quiet
	clear := func() {
		if progress {
			fmt.Fprint(e.stderr, "\r\x1b[K")
		}
	}
	opts.Probing = func(state record.Seq, _ *bisect.Candidate, n, left int) {
		if progress {
			fmt.Fprintf(e.stderr, "\r\x1b[Kbisect: running %s at state %d (probe %d, at most %d more)…", cmdline, state, n+1, left)
		}
	}
	opts.Probed = func(p bisect.Probe) {
		clear()
		fmt.Fprintln(w, probeLine(p))
	}
	// Ctrl-C stops the probe running (its process group hears it from the
	// terminal) and the search: the scratch copy is removed on the way out.
	ctx, stop := signal.NotifyContext(e.ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	rep, err := bisect.Run(ctx, src, opts)
	clear()
	var se *bisect.SearchError
	switch {
	case errors.As(err, &se) && errors.Is(err, bisect.ErrNotBad):
		return fmt.Errorf("%s does not fail at the bad state %d (exit 0): nothing to look for", cmdline, se.Report.Bad)
	case errors.As(err, &se) && errors.Is(err, bisect.ErrBadAtOldest):
		return fmt.Errorf("%s fails at the good state %d too: no %s between %d and %d broke it", cmdline, se.Report.Good, what, se.Report.Good, se.Report.Bad)
	case errors.As(err, &se) && errors.Is(err, bisect.ErrOnlySkipped):
		fmt.Fprintf(w, "only skipped states are left: the first bad %s is one of\n", what)
		for _, c := range se.Candidates {
			fmt.Fprintf(w, "  %s %d %s\n", what, c.Seq, strconv.Quote(c.Label))
		}
		return fmt.Errorf("no state that could tell them apart could be tested (%s exited 125, or gc thinned it away)", cmdline)
	case err != nil:
		return err
	}
	fb := rep.FirstBad
	fmt.Fprintln(w)
	turn := ""
	if fb.Turn != 0 && !opts.Turns {
		turn = fmt.Sprintf(" (turn %d)", fb.Turn)
	}
	fmt.Fprintf(w, "first bad %s %d %s%s, after %d probes over %d %ss in %s\n", what, fb.Seq, strconv.Quote(fb.Label), turn,
		len(rep.Probes), rep.Steps, what, history.Duration(rep.Took))
	if b := fb.Block(); b != nil {
		pruned, _ := src.PrunedBefore()
		cs, err := history.Changes(src, b, pruned)
		if err == nil {
			paint := func(_, s string) string { return s }
			for _, ch := range cs {
				fmt.Fprintf(w, "    %s\n", formatChange(ch, paint))
			}
		}
	}
	if len(rep.Tail) > 0 {
		fmt.Fprintf(w, "%s's last lines there:\n", cmdline)
		for _, l := range rep.Tail {
			fmt.Fprintf(w, "    %s\n", quote.Line(strings.ReplaceAll(l, "\t", "    ")))
		}
	}
	if opts.Turns {
		fmt.Fprintf(w, "to take it back: zerofs undo --turn (when it is the last) or zerofs rewind --before-turn %d\n", fb.Seq)
	} else {
		fmt.Fprintf(w, "to undo it and keep every later change: zerofs revert %d\n", fb.Seq)
	}
	fmt.Fprintf(w, "first bad %s %d %s\n", what, fb.Seq, strconv.Quote(fb.Label))
	return nil
}

// probeLine is one probe, as bisect prints it:
// "state 57  step 57 "Edit parse.go"  bad (exit 1)  1.2 s".
func probeLine(p bisect.Probe) string {
	what := "the oldest state"
	if c := p.Candidate; c != nil {
		what = fmt.Sprintf("after %s %d %s", c.Kind, c.Seq, strconv.Quote(history.CutLine(c.Label, 60)))
	}
	verdict := string(p.Verdict)
	switch {
	case p.Verdict == bisect.Skip && p.ExitCode < 0:
		verdict = "skip (thinned by gc)"
	case p.Verdict == bisect.Bad, p.Verdict == bisect.Skip:
		verdict += fmt.Sprintf(" (exit %d)", p.ExitCode)
	case p.Verdict == bisect.Timeout:
		verdict = "bad (timed out)"
	}
	return fmt.Sprintf("state %-6d %-50s %-16s %s", p.State, what, verdict, history.Duration(p.Took.Round(time.Millisecond)))
}
