package main

import (
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strconv"

	"github.com/zerofs/zerofs/control"
	"github.com/zerofs/zerofs/history"
	"github.com/zerofs/zerofs/internal/quote"
	"github.com/zerofs/zerofs/record"
)

var revertCmd = &command{
	name:    "revert",
	usage:   "revert [--dry-run] [--force] SEQ",
	summary: "undo the step at SEQ, keep later changes",
	help: `Puts each path the step at SEQ changed back to its state just before that
step, and keeps every later change to other paths. If a later step (or the
current one) also changed such a path, the revert changes nothing and exits
1 naming each conflicting path, unless --force: then those go back too. The
revert is recorded and can itself be undone.

  --dry-run   print what would be restored, deleted and created (with +N -M
              line counts for text files), and change nothing
  --force     revert even over later changes to the step's paths

SEQ may be relative to the current step: @ is the current step, -1 (or
@-1) the one before it.
`,
	run: runRevert,
}

var forkCmd = &command{
	name:    "fork",
	usage:   "fork SEQ DIR",
	summary: "the state at SEQ as a new workspace DIR with its own store",
	help: `Writes the workspace as it was at SEQ into DIR (which must not exist; its
parent must), with a store of its own (DIR/.zero) whose first event, a
workspace_forked, records this workspace and SEQ; 'zerofs mount DIR' then
works. Unmounted, file contents are reflinked (FICLONE) from the store or the
workspace where the filesystem can, and copied elsewhere; mounted, they are
copied from @SEQ/ with your own permissions (a FUSE file cannot be
reflinked).
`,
	run: runFork,
}

// applyWith runs req on src: one request, whose result names the changes
// made outside the agent's steps that it overwrote: they are named on
// stderr (a dry run's preview lists those it would overwrite). A refused revert returns its report (with the
// conflicts) and a *record.ConflictError.
func applyWith(e *env, src history.Source, req record.Request) (control.RewindReport, error) {
	ctx := e.ctx
	var p *progress
	if !req.DryRun {
		// On a terminal, a bar on stderr while it runs: the engine's own
		// counts, here or (polled from .zero/status) in the daemon.
		p = startProgress(e, rewindVerb(req))
		ctx = p.with(ctx)
	}
	guard := guardHooks(e)
	rep, err := doRewind(ctx, src, req)
	p.Done() // cleared before anything is printed
	if err != nil {
		return rep, err
	}
	defer guard.warn(e.stderr, rep)
	if rep.Unchanged {
		// The engine found nothing to change and recorded nothing (no
		// event, nothing on the redo stack): say so, and succeed.
		fmt.Fprintf(e.stdout, "nothing to change: %s already as it would be\n", unchangedWhat(req))
		for _, p := range rep.Report.Skipped {
			fmt.Fprintf(e.stdout, "  skipped %s\n", quote.Name(p))
		}
		return rep, errUnchanged
	}
	if !req.DryRun { // a dry run lists them in its preview
		writeForeign(e.stderr, rep.Foreign, "overwrote", map[string]bool{})
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
	case req.Merge != nil:
		return "merge"
	}
	return "rewind"
}

// errUnchanged is applyWith's answer to a rewind that would change
// nothing: it said so on stdout and did nothing; the command succeeds.
var errUnchanged = errors.New("nothing to change")

// unchangedWhat names what a rewind that changes nothing found as it would be.
func unchangedWhat(req record.Request) string {
	switch {
	case len(req.Paths) > 0:
		return quote.Names(req.Paths, ", ") + (map[bool]string{true: " is", false: " are"})[len(req.Paths) == 1]
	case req.Revert != 0:
		return "every path the step changed is"
	case req.Merge != nil:
		return "the workspace (it holds every change of the fork) is"
	}
	return "the workspace is"
}

// writeForeign names, one line each, the paths whose present state was made
// outside the agent's steps (skipping those already named).
func writeForeign(w io.Writer, fs []record.Foreign, verb string, seen map[string]bool) {
	for _, line := range foreignWarnings(fs, verb, seen) {
		fmt.Fprintf(w, "zerofs: warning: %s\n", line)
	}
}

// writePreview prints a dry run: the report the rewind would give, then
// one line per path ("  restore  a/b.go  +12 -3"), everything beneath a
// deleted directory included.
func writePreview(w io.Writer, what string, rep control.RewindReport) error {
	r := rep.Report
	fmt.Fprintf(w, "would %s: restore %d, delete %d, skip %d\n", what, r.Restored, r.Deleted, len(r.Skipped))
	for _, c := range rep.Preview {
		p := quote.Name(c.Path)
		if c.Kind == record.KindDir {
			p += "/"
		}
		line := fmt.Sprintf("  %-8s %s", c.Action, p)
		if c.Kind == record.KindSymlink {
			line += " (symlink)"
		}
		if c.Lines != nil && (c.Lines.Added > 0 || c.Lines.Removed > 0) {
			line += fmt.Sprintf("  +%d -%d", c.Lines.Added, c.Lines.Removed)
		}
		fmt.Fprintln(w, line)
	}
	for _, p := range rep.Report.Skipped {
		fmt.Fprintf(w, "  skip     %s (its earlier state was not kept)\n", quote.Name(p))
	}
	for _, f := range rep.Foreign {
		what := "foreign "
		if f.Kept { // a person's change, left alone
			what = "kept    "
		}
		fmt.Fprintf(w, "  %s %s (changed %s by %s, pid %d)\n", what, quote.Name(f.Path), f.Why, quote.Name(f.Comm), f.PID)
	}
	for _, p := range rep.Conflicts {
		fmt.Fprintf(w, "  conflict %s\n", quote.Name(p))
	}
	return nil
}

func runRevert(e *env, c *command, args []string) error {
	fs := newFlags(c)
	dry := fs.Bool("dry-run", false, "")
	force := fs.Bool("force", false, "")
	pos, rest, err := parseArgs(c, fs, args)
	if err != nil {
		return err
	}
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
		label := stepLabel(src, s)
		rep, err := applyWith(e, src, record.Request{Revert: s, Force: *force, DryRun: *dry})
		if errors.Is(err, errUnchanged) {
			return nil
		}
		var ce *record.ConflictError
		if errors.As(err, &ce) {
			if *dry {
				writePreview(e.stdout, "revert "+label, rep)
			}
			return fmt.Errorf("revert of %s conflicts with later changes to %s (--force puts them back too)", label, quote.Names(ce.Paths, ", "))
		}
		if err != nil {
			return err
		}
		if *dry {
			return writePreview(e.stdout, "revert "+label, rep)
		}
		r := rep.Report
		forced := ""
		if len(rep.Conflicts) > 0 {
			forced = fmt.Sprintf(" (forced over later changes to %s)", quote.Names(rep.Conflicts, ", "))
		}
		fmt.Fprintf(e.stdout, "reverted %s: restored %d, deleted %d, skipped %d%s\n", label, r.Restored, r.Deleted, len(r.Skipped), forced)
		for _, p := range r.Skipped {
			fmt.Fprintf(e.stdout, "  skipped %s\n", quote.Name(p))
		}
		return nil
	})
}

// stepLabel names the block holding s: `step 4 "Edit main.go"`.
func stepLabel(src history.Source, s record.Seq) string {
	blocks, _, err := history.Blocks(src)
	if err == nil {
		for i := len(blocks) - 1; i >= 0; i-- {
			b := blocks[i]
			if b.Start <= s && s <= b.End && b.Type != history.BlockPruned {
				if b.Type == history.BlockRewind {
					return fmt.Sprintf("rewind %d", b.Seq)
				}
				return fmt.Sprintf("step %d %q", b.Seq, b.Label)
			}
		}
	}
	return "step " + strconv.FormatUint(uint64(s), 10)
}

func runFork(e *env, c *command, args []string) error {
	pos, rest, err := parseArgs(c, newFlags(c), args)
	if err != nil {
		return err
	}
	pos = append(pos, rest...)
	if len(pos) != 2 {
		return usagef(c, "want SEQ and DIR")
	}
	r, err := parseRef(c, pos[0])
	if err != nil {
		return err
	}
	dir := pos[1]
	if !filepath.IsAbs(dir) {
		dir = filepath.Join(e.cwd, dir)
	}
	return withHistory(e, func(_ *history.Workspace, src history.Source) error {
		t, err := r.state(src)
		if err != nil {
			return err
		}
		p := startProgress(e, "fork")
		res, err := history.Fork(p.with(e.ctx), src, t, dir)
		p.Done()
		if err != nil {
			return history.ExplainSeq(src, t, err)
		}
		how := "copied"
		if res.Cloned > 0 {
			how = fmt.Sprintf("%d reflinked", res.Cloned)
		}
		fmt.Fprintf(e.stdout, "forked @%d into %s: %d files (%s), %d directories, %d symlinks, %s\n",
			t, quote.Name(res.Dir), res.Files, how, res.Dirs, res.Symlinks, byteSize(res.Bytes))
		for _, p := range res.Skipped {
			fmt.Fprintf(e.stdout, "  skipped %s (its state at %d was not kept)\n", quote.Name(p), t)
		}
		return nil
	})
}

// byteSize is n bytes in a short human form.
func byteSize(n int64) string {
	switch {
	case n < 1024:
		return fmt.Sprintf("%d B", n)
	case n < 1<<20:
		return fmt.Sprintf("%.1f KiB", float64(n)/1024)
	}
	return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
}
