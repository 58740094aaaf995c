package main

import (
	"errors"
	"fmt"
	"time"

	"github.com/zerofs/zerofs/control"
	"github.com/zerofs/zerofs/eventlog"
	"github.com/zerofs/zerofs/history"
	"github.com/zerofs/zerofs/rewind"
)

var gcCmd = &command{
	name:    "gc",
	usage:   "gc [--before SEQ | --keep DURATION | --keep-steps N] [--thin-after DURATION]",
	summary: "forget states older than SEQ (or than DURATION); thin old history to one state a day",
	help: `Forgets the states before SEQ: @T with T < SEQ no longer exists, and the
blobs only they needed are removed, with blobs no event refers to. Appends
a history_pruned event.

  --before SEQ       the first state to keep
  --keep DURATION    keep every state that was current at some time in the
                     last DURATION (e.g. 72h): the cut is the state that was
                     current DURATION ago
  --keep-steps N     keep the last N steps: the cut is where the Nth last
                     step began
  --thin-after DURATION
                     history older than DURATION (e.g. 168h) keeps one
                     state a day: the state each UTC day's first step began
                     from, the start of history and the state current
                     DURATION ago stay; every state in between goes (@T
                     there no longer exists, a rewind there is refused), and
                     so do the blobs only those states needed. Appends a
                     history_thinned event naming each interval that went.
                     Combines with a cut (the thin applies to what is left)
  (none)          keep all history; remove only blobs no event refers to
`,
	run: runGC,
}

func runGC(e *env, c *command, args []string) error {
	fs := newFlags(c)
	before := fs.String("before", "", "")
	keep := fs.Duration("keep", 0, "")
	keepSteps := fs.Int("keep-steps", 0, "")
	thinAfter := fs.Duration("thin-after", 0, "")
	pos, rest, err := parseArgs(c, fs, args)
	if err != nil {
		return err
	}
	if len(pos)+len(rest) > 0 {
		return usagef(c, "unexpected argument %q", append(pos, rest...)[0])
	}
	set := 0
	for _, on := range []bool{*before != "", *keep != 0, *keepSteps != 0} {
		if on {
			set++
		}
	}
	if set > 1 {
		return usagef(c, "--before, --keep and --keep-steps exclude each other")
	}
	if *keepSteps < 0 {
		return usagef(c, "--keep-steps must be positive")
	}
	if *keep < 0 {
		return usagef(c, "--keep must be positive")
	}
	if *thinAfter < 0 {
		return usagef(c, "--thin-after must be positive")
	}
	var cut Seq
	if *before != "" {
		if cut, err = parseSeq(c, *before); err != nil {
			return err
		}
	}
	return withHistory(e, func(_ *history.Workspace, h history.Source) error {
		var err error
		switch {
		case *keep > 0:
			if cut, err = history.KeepCut(h, time.Now().Add(-*keep)); err != nil {
				return err
			}
		case *keepSteps > 0:
			if cut, err = keepStepsCut(h, *keepSteps); err != nil {
				return err
			}
		case *before == "":
			if cut, err = h.PrunedBefore(); err != nil {
				return err
			}
		}
		req := control.GCRequest{Before: cut}
		if *thinAfter > 0 {
			if req.ThinBefore, err = history.KeepCut(h, time.Now().Add(-*thinAfter)); err != nil {
				return err
			}
		}
		res, err := h.GC(e.ctx, req)
		if errors.Is(err, rewind.ErrNoSuchSeq) {
			return history.ExplainSeq(h, cut, err)
		}
		if err != nil {
			return err
		}
		if *thinAfter > 0 {
			printThinGC(e, res, req.ThinBefore)
			return nil
		}
		if res.Seq == 0 {
			fmt.Fprintf(e.stdout, "history already starts at %d: removed %d unneeded blobs, freed %s\n",
				res.Before, res.BlobsRemoved, humanBytes(res.BytesFreed))
			return nil
		}
		fmt.Fprintf(e.stdout, "pruned history before %d: removed %d blobs, freed %s; the states of %d steps went\n",
			res.Before, res.BlobsRemoved, humanBytes(res.BytesFreed), res.Steps)
		return nil
	})
}

// keepStepsCut is where the nth last step began (the start of history when
// there are fewer steps, so nothing goes).
func keepStepsCut(h history.Source, n int) (Seq, error) {
	var starts []Seq
	for ev, err := range h.Events() {
		if err != nil {
			return 0, err
		}
		if ev.Type == eventlog.TypeToolCall {
			starts = append(starts, ev.Seq)
		}
	}
	if len(starts) < n {
		return h.PrunedBefore()
	}
	return starts[len(starts)-n], nil
}

// printThinGC reports a gc that was asked to thin: the cut (if it moved),
// exactly which states the thin gave up, and what was freed.
func printThinGC(e *env, res control.GCReport, thinBefore Seq) {
	w := e.stdout
	if res.Seq != 0 {
		fmt.Fprintf(w, "pruned history before %d; the states of %d steps went\n", res.Before, res.Steps)
	}
	tp := res.Thinned
	if tp == nil {
		fmt.Fprintf(w, "history before %d already keeps at most one state a day: nothing thinned\n", max(thinBefore, res.Before))
	} else {
		fmt.Fprintf(w, "thinned history before %d to one state a day: %d intervals went (the states of %d steps, %d before-states)\n",
			tp.Before, len(tp.Intervals), tp.Steps, tp.Records)
		for _, iv := range tp.Intervals {
			fmt.Fprintf(w, "  gone: @%d..@%d (kept @%d and @%d): %d steps, %d before-states\n",
				iv.After+1, iv.Before-1, iv.After, iv.Before, iv.Steps, iv.Records)
		}
	}
	fmt.Fprintf(w, "removed %d blobs, freed %s\n", res.BlobsRemoved, humanBytes(res.BytesFreed))
}
