package main

import (
	"fmt"
	"path/filepath"

	"github.com/zerofs/zerofs/history"
	"github.com/zerofs/zerofs/internal/quote"
)

var forkCmd = &command{
	name:    "fork",
	usage:   "fork SEQ DIR",
	summary: "the state at SEQ as a new workspace DIR with its own store",
	about: `Writes the workspace as it was at SEQ into DIR (which must not exist; its
parent must), with a store of its own (DIR/.zero) whose first event, a
workspace_forked, records this workspace and SEQ; 'zerofs mount DIR' then
works. Unmounted, file contents are reflinked (FICLONE) from the store or the
workspace where the filesystem can, and copied elsewhere; mounted, they are
copied from @SEQ/ with your own permissions (a FUSE file cannot be
reflinked).
`,
	args: []argDef{{name: "SEQ", comp: compSeq}, {name: "DIR", comp: compDir}},
	run:  runFork,
}

func runFork(e *env, c *command, args []string) error {
	_, pos, rest, err := c.parse(args)
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
