package main

import (
	"errors"
	"fmt"
	"time"

	"github.com/zerofs/zerofs/control"
	"github.com/zerofs/zerofs/history"
	"github.com/zerofs/zerofs/record"
)

var gcCmd = &command{
	name:    "gc",
	usage:   "gc [--dry-run] [--before SEQ | --keep DURATION | --keep-steps N] [--thin-after DURATION]",
	summary: "forget states older than SEQ or DURATION; thin old history",
	about: `Forgets the states before SEQ: @T with T < SEQ no longer exists, and the
blobs only they needed are removed, with blobs no event refers to. Appends
a history_pruned event. With no flag it keeps all history and removes only
blobs no event refers to.
`,
	flags: []flagDef{
		{name: "dry-run", help: `say what the gc would forget and free, and change
nothing (for --thin-after, see zerofs status)`},
		{name: "before", arg: "SEQ", comp: compSeq, help: "the first state to keep"},
		{name: "keep", arg: "DURATION", def: time.Duration(0), comp: compNone,
			help: `keep every state that was current at some time in the
last DURATION (e.g. 3d, 12h): the cut is the state that
was current DURATION ago`},
		{name: "keep-steps", arg: "N", def: 0, comp: compNone, help: `keep the last N steps: the cut is where the Nth last
step began`},
		{name: "thin-after", arg: "DURATION", def: time.Duration(0), comp: compNone,
			help: `history older than DURATION (e.g. 7d) keeps one
state a day: the state each UTC day's first step began
from, the start of history and the state current
DURATION ago stay; every state in between goes (@T
there no longer exists, a rewind there is refused), and
so do the blobs only those states needed. Appends a
history_thinned event naming each interval that went.
Combines with a cut (the thin applies to what is left)`},
	},
	run: runGC,
}

func runGC(e *env, c *command, args []string) error {
	o, pos, rest, err := c.parse(args)
	if err != nil {
		return err
	}
	before := o.String("before")
	dry := o.Bool("dry-run")
	keep := o.Duration("keep")
	keepSteps := o.Int("keep-steps")
	thinAfter := o.Duration("thin-after")
	if len(pos)+len(rest) > 0 {
		return usagef(c, "unexpected argument %q", append(pos, rest...)[0])
	}
	set := 0
	for _, on := range []bool{before != "", keep != 0, keepSteps != 0} {
		if on {
			set++
		}
	}
	if set > 1 {
		return usagef(c, "--before, --keep and --keep-steps exclude each other")
	}
	if keepSteps < 0 {
		return usagef(c, "--keep-steps must be positive")
	}
	if keep < 0 {
		return usagef(c, "--keep must be positive")
	}
	if thinAfter < 0 {
		return usagef(c, "--thin-after must be positive")
	}
	if dry && thinAfter > 0 {
		return usagef(c, "--dry-run does not preview --thin-after: zerofs status --thin-after %s says what it would thin and free", formatDuration(thinAfter))
	}
	var cut record.Seq
	if before != "" {
		if cut, err = parseSeq(c, before); err != nil {
			return err
		}
	}
	return withHistory(e, func(ws *history.Workspace, h history.Source) error {
		var err error
		switch {
		case keep > 0:
			if cut, err = history.KeepCut(h, time.Now().Add(-keep)); err != nil {
				return err
			}
		case keepSteps > 0:
			if cut, err = keepStepsCut(h, keepSteps); err != nil {
				return err
			}
		case before == "":
			if cut, err = h.PrunedBefore(); err != nil {
				return err
			}
		}
		if dry {
			return previewGC(e, ws, h, cut)
		}
		req := record.GCRequest{Before: cut}
		if thinAfter > 0 {
			if req.ThinBefore, err = history.KeepCut(h, time.Now().Add(-thinAfter)); err != nil {
				return err
			}
		}
		p := startProgress(e, "gc")
		res, err := h.GC(p.with(e.ctx), req)
		p.Done()
		if errors.Is(err, record.ErrNoSuchSeq) {
			return history.ExplainSeq(h, cut, err)
		}
		if err != nil {
			return err
		}
		if res.Before < cut {
			// gc keeps every branch's base (branch.go in rewind).
			fmt.Fprintf(e.stdout, "kept the history from %d on: a branch's base (zerofs branch --list; --delete one to let it go)\n", res.Before)
		}
		if thinAfter > 0 {
			printThinGC(e, res, req.ThinBefore)
			return nil
		}
		if res.Seq == 0 {
			fmt.Fprintf(e.stdout, "history already starts at %d: removed %s, %s\n",
				res.Before, plural(res.BlobsRemoved, "unneeded blob"), freedWords(res.BytesFreed))
			return nil
		}
		fmt.Fprintf(e.stdout, "pruned history before %d: removed %s, %s; the states of %s went\n",
			res.Before, plural(res.BlobsRemoved, "blob"), freedWords(res.BytesFreed), plural(res.Steps, "step"))
		return nil
	})
}

// keepStepsCut is where the nth last step began (the start of history when
// there are fewer steps, so nothing goes).
func keepStepsCut(h history.Source, n int) (record.Seq, error) {
	var starts []record.Seq
	for ev, err := range h.Events() {
		if err != nil {
			return 0, err
		}
		if ev.Type == record.TypeToolCall {
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
func printThinGC(e *env, res control.GCReport, thinBefore record.Seq) {
	w := e.stdout
	if res.Seq != 0 {
		fmt.Fprintf(w, "pruned history before %d; the states of %s went\n", res.Before, plural(res.Steps, "step"))
	}
	tp := res.Thinned
	if tp == nil {
		fmt.Fprintf(w, "history before %d already keeps at most one state a day: nothing thinned\n", max(thinBefore, res.Before))
	} else {
		fmt.Fprintf(w, "thinned history before %d to one state a day: %s went (the states of %s, %s)\n",
			tp.Before, plural(len(tp.Intervals), "interval"), plural(tp.Steps, "step"), plural(tp.Records, "before-state"))
		for _, iv := range tp.Intervals {
			fmt.Fprintf(w, "  gone: @%d..@%d (kept @%d and @%d): %s, %s\n",
				iv.After+1, iv.Before-1, iv.After, iv.Before, plural(iv.Steps, "step"), plural(iv.Records, "before-state"))
		}
	}
	fmt.Fprintf(w, "removed %s, %s\n", plural(res.BlobsRemoved, "blob"), freedWords(res.BytesFreed))
}

// freedWords says what a gc freed. Repacking the blobs kept can make the
// store a little larger than it was (a pack's index and header): that is
// said as such, never as a negative size freed.
func freedWords(n int64) string {
	if n < 0 {
		return fmt.Sprintf("freed nothing (repacking what is kept took %s more)", humanBytes(-n))
	}
	return "freed " + humanBytes(n)
}

// previewGC is gc --dry-run: what a cut at cut would forget and free.
func previewGC(e *env, ws *history.Workspace, h history.Source, cut record.Seq) error {
	store, err := ws.StoreDir()
	if err != nil {
		return err
	}
	if head, err := h.Head(); err == nil && cut > head {
		return history.ExplainSeq(h, cut, record.ErrNoSuchSeq)
	}
	p, err := history.PreviewGC(store, cut)
	if err != nil {
		return err
	}
	pruned, err := h.PrunedBefore()
	if err != nil {
		return err
	}
	if p.Before <= pruned {
		fmt.Fprintf(e.stdout, "would forget nothing (history starts at %d); would remove %s, free up to %s\n",
			pruned, plural(len(p.Freed.Removed), "unneeded blob"), humanBytes(max(p.Freed.BytesFreed, 0)))
		return nil
	}
	fmt.Fprintf(e.stdout, "would prune history before %d: the states of %s would go; would remove %s, free up to %s\n",
		p.Before, plural(p.Steps, "step"), plural(len(p.Freed.Removed), "blob"), humanBytes(max(p.Freed.BytesFreed, 0)))
	return nil
}
