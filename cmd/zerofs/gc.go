package main

import (
	"errors"
	"fmt"
	"time"

	"github.com/zerofs/zerofs/rewind"
)

var gcCmd = &command{
	name:    "gc",
	usage:   "gc [--before SEQ | --keep DURATION]",
	summary: "forget states older than SEQ (or than DURATION)",
	help: `Forgets the states before SEQ: @T with T < SEQ no longer exists, and the
blobs only they needed are removed, with blobs no event refers to. Appends
a history_pruned event.

  --before SEQ       the first state to keep
  --keep DURATION    keep every state that was current at some time in the
                     last DURATION (e.g. 72h): the cut is the state that was
                     current DURATION ago
  (neither)          keep all history; remove only blobs no event refers to
`,
	run: runGC,
}

func runGC(e *env, c *command, args []string) error {
	fs := newFlags(c)
	before := fs.String("before", "", "")
	keep := fs.Duration("keep", 0, "")
	pos, rest, err := parseArgs(c, fs, args)
	if err != nil {
		return err
	}
	if len(pos)+len(rest) > 0 {
		return usagef(c, "unexpected argument %q", append(pos, rest...)[0])
	}
	if *before != "" && *keep != 0 {
		return usagef(c, "--before and --keep exclude each other")
	}
	if *keep < 0 {
		return usagef(c, "--keep must be positive")
	}
	var cut Seq
	if *before != "" {
		if cut, err = parseSeq(c, *before); err != nil {
			return err
		}
	}
	return withHistory(e, c, func(h history) error {
		var err error
		switch {
		case *keep > 0:
			if cut, err = keepCut(h, time.Now().Add(-*keep)); err != nil {
				return err
			}
		case *before == "":
			if cut, err = h.PrunedBefore(); err != nil {
				return err
			}
		}
		res, err := h.GC(e.ctx, cut)
		if errors.Is(err, rewind.ErrNoSuchSeq) {
			return seqError(h, cut)
		}
		if err != nil {
			return err
		}
		fmt.Fprintf(e.stdout, "pruned history before %d: removed %d blobs, freed %s\n",
			res.Before, res.BlobsRemoved, humanBytes(res.BytesFreed))
		return nil
	})
}

// keepCut is the oldest state still current at or after cutoff: the state
// at T lasts from event T until event T+1, so it is the one just before
// the first event younger than cutoff (head when there is none).
func keepCut(h history, cutoff time.Time) (Seq, error) {
	for ev, err := range h.Events() {
		if err != nil {
			return 0, err
		}
		if ev.CreatedAt.After(cutoff) {
			return ev.Seq - 1, nil
		}
	}
	return h.Head()
}
