package main

import (
	"errors"
	"fmt"
	"io"
	"path/filepath"

	"github.com/zerofs/zerofs/branch"
	"github.com/zerofs/zerofs/history"
	"github.com/zerofs/zerofs/internal/quote"
	"github.com/zerofs/zerofs/record"
)

var mergeCmd = &command{
	name:    "merge",
	usage:   "merge DIR [--dry-run] [--ours|--theirs [PATH...]]",
	summary: "bring a branch's or fork's changes since its base into the workspace as one undoable step",
	about: `Run in the workspace, with DIR a branch of it (zerofs branch) or a fork of it
(zerofs fork): brings every change DIR made since its base (a branch's
last merge, once merged) into the workspace, as one recorded rewind of
form "merge" that zerofs undo takes back whole. Each path is merged three
ways against the workspace's state the fork began from: changed only in the
fork, taken; changed only here, kept; changed on both sides, a text file is
merged line by line when the changes do not overlap (git merge-file's
rules), and its mode and each extended attribute merge on their own.
Anything else is a conflict: the merge then changes nothing and exits 1
naming each conflicting path with the step of each side that last changed
it. A rename merges as a removal and an addition. Owners and modification
times are not compared (a fork's files are yours, written when it was made),
and what the fork could not copy (another user's setuid bit or capability)
is not its change.
`,
	flags: []flagDef{
		{name: "dry-run", help: `print what would be restored, deleted and created (with +N -M
line counts for text files), and change nothing`},
		{name: "ours", help: "settle conflicts by keeping the workspace's side"},
		{name: "theirs", help: "settle conflicts by taking the branch's or fork's side"},
	},
	args: []argDef{
		{name: "DIR", comp: compDir},
		{name: "PATH...", help: `with --ours or --theirs: settle only these paths (each with
everything beneath it; one that holds no conflict is refused);
without, every conflict`},
	},
	more: `A directory that is neither a branch nor a fork of this workspace is
refused. The log names the branch or fork and the steps the merge brought
in. A branch's changed paths are those its copy-up layer holds, so a merge
costs what the branch changed; its state as merged is the base of its next
merge (git's rule).
`,
	run: runMerge,
}

func runMerge(e *env, c *command, args []string) error {
	o, pos, rest, err := c.parse(args)
	if err != nil {
		return err
	}
	dry := o.Bool("dry-run")
	ours := o.Bool("ours")
	theirs := o.Bool("theirs")
	pos = append(pos, rest...)
	if len(pos) < 1 {
		return usagef(c, "want the branch's or fork's DIR")
	}
	if ours && theirs {
		return usagef(c, "--ours and --theirs settle a conflict one way: give one")
	}
	if len(pos) > 1 && !ours && !theirs {
		return usagef(c, "paths after DIR go with --ours or --theirs")
	}
	dir := pos[0]
	if !filepath.IsAbs(dir) {
		dir = filepath.Join(e.cwd, dir)
	}
	// A branch is named as its record names it (symlinks resolved), by
	// this process: the daemon never looks at a branch's mount.
	mr := &record.MergeRequest{Dir: branch.Resolve(dir)}
	switch {
	case ours:
		mr.Settle = record.SettleOurs
	case theirs:
		mr.Settle = record.SettleTheirs
	}
	return withHistory(e, func(ws *history.Workspace, src history.Source) error {
		for _, p := range pos[1:] {
			rel, err := ws.RelPath(e.cwd, p)
			if err != nil {
				return err
			}
			if err := record.CleanPath(rel); err != nil || rel == "" {
				return fmt.Errorf("%s: not a path in the workspace", quote.Name(p))
			}
			mr.Paths = append(mr.Paths, rel)
		}
		req := record.Request{Merge: mr, DryRun: dry}
		rep, err := applyWith(e, src, req)
		var ce *record.MergeConflictError
		if errors.As(err, &ce) {
			writeMergeConflicts(e.stderr, ce.Conflicts)
			return fmt.Errorf("merge of %s: %d conflicting path(s), nothing changed (--ours or --theirs, with or without paths, settles them)",
				quote.Name(ce.Dir), len(ce.Conflicts))
		}
		if err != nil {
			return err
		}
		// The report in the one wording (history.Describe), then what the
		// merge brings in.
		if err := writeWords(e.stdout, rep); err != nil || rep.Unchanged {
			return err
		}
		rec := record.MergeRecord{Dir: mr.Dir}
		if rep.Merge != nil {
			rec = rep.Merge.Record
		}
		verb := "brought in"
		if dry {
			verb = "would bring in"
		}
		writeMerged(e.stdout, rec, verb)
		return nil
	})
}

// writeMerged lists what a merge brings in: the fork's steps, the files
// merged line by line, the conflicts settled.
func writeMerged(w io.Writer, rec record.MergeRecord, verb string) {
	for _, s := range rec.Steps {
		fmt.Fprintf(w, "  %s the %s's %s\n", verb, rec.Side(), history.Name(&s))
	}
	for _, p := range rec.Merged {
		fmt.Fprintf(w, "  merged line by line %s\n", quote.Name(p))
	}
	for _, p := range rec.Settled {
		fmt.Fprintf(w, "  settled %s: %s\n", quote.Name(p), rec.SettledAs)
	}
}

// writeMergeConflicts names each conflicting path, why, and the step of
// each side that last changed it.
func writeMergeConflicts(w io.Writer, cs []record.MergeConflict) {
	side := func(s *record.StepRef) string {
		if s == nil {
			return "not recorded"
		}
		if s.Kind == "step" && s.Label == "" {
			return fmt.Sprintf("changes at %d outside any step", s.Sequence)
		}
		return history.Name(s)
	}
	for _, c := range cs {
		fmt.Fprintf(w, "  conflict %s: %s (ours: %s; theirs: %s)\n", quote.Name(c.Path), c.Why, side(c.Ours), side(c.Theirs))
	}
}
