package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"

	"github.com/zerofs/zerofs/branch"
	"github.com/zerofs/zerofs/history"
	"github.com/zerofs/zerofs/internal/quote"
	"github.com/zerofs/zerofs/record"
)

var branchCmd = &command{
	name:    "branch",
	usage:   "branch DIR... [--at SEQ] [--allow-other] | branch --list [--json] | branch --delete DIR [--force] | branch --hook [--agent AGENT]",
	summary: "mount DIR as a writable branch of the workspace at SEQ (default now), in O(1)",
	about: `Run in the mounted workspace (as root: a branch is an overlayfs mount).
Each DIR (absolute or relative to the current directory, outside the
workspace, missing or empty) becomes a mounted, writable branch of the
workspace as it was at SEQ (default: now), in time that does not grow with
the workspace: its base is read through @SEQ/, and the first write to a
path copies that path. A branch is a zerofs workspace of its own (steps,
@T/, rewind, undo, log, hooks). Writes in it never reach the workspace, and
the workspace's later changes never reach its base. 'zerofs merge DIR'
brings its changes in. Its copy-up layer and history live in the
workspace's store (STORE/branches/), and gc keeps every branch's base.
`,
	flags: []flagDef{
		{name: "at", arg: "SEQ", comp: compSeq, help: "the branch's base (default: now)"},
		{name: "allow-other", help: "let other users use the branch (their permissions apply)"},
		{name: "list", help: `each branch: its directory, base, mounted or not, and how
many paths it changed`},
		{name: "json", help: "with --list: as JSON"},
		{name: "delete", arg: "DIR", comp: compDir, help: `unmount the branch and remove it (its changes and history);
refused while it holds changes no merge brought in, unless --force`},
		{name: "force", help: "with --delete: delete a branch holding unmerged changes"},
		{name: "hook", help: `answer an agent's worktree hook from its JSON on stdin
(Claude Code's WorktreeCreate and WorktreeRemove, which
'zerofs hooks install claude --worktrees' writes): a
WorktreeCreate makes a branch of the workspace its cwd is
in, at WORKSPACE-branches/NAME beside it (else in
~/.local/state/zerofs/branches/), and prints its directory;
a WorktreeRemove deletes the branch, or exits 1 naming how
to merge or drop it while it holds changes not merged (the
agent then keeps the worktree). Unlike 'step --hook' it
fails out loud, as the agent's contract asks: an unmounted
workspace fails the creation.`},
		{name: "agent", arg: "AGENT", comp: compAgent, help: "with --hook: the agent whose hook it is (claude)"},
	},
	args: []argDef{{name: "DIR...", comp: compDir}},
	more: `A DIR that is a branch already is mounted again (after 'zerofs umount' of
the workspace, which unmounts its branches first, or after its daemon was
killed).
`,
	run: runBranch,
}

func runBranch(e *env, c *command, args []string) error {
	o, pos, rest, err := c.parse(args)
	if err != nil {
		return err
	}
	at, list, asJSON := o.String("at"), o.Bool("list"), o.Bool("json")
	del, force, allowOther := o.String("delete"), o.Bool("force"), o.Bool("allow-other")
	hook, agent := o.Bool("hook"), o.String("agent")
	pos = append(pos, rest...)
	if del == "--force" && len(pos) == 1 {
		// `--delete --force DIR`: the parser gave --force to --delete as
		// its DIR.
		del, force, pos = pos[0], true, nil
	}
	if hook {
		if len(pos) > 0 || at != "" || list || asJSON || del != "" || force || allowOther {
			return usagef(c, "--hook goes alone (with --agent): it reads the hook's JSON from stdin")
		}
		return runBranchHook(e, agent)
	}
	if agent != "" {
		return usagef(c, "--agent goes with --hook")
	}
	abs := func(p string) string {
		if !filepath.IsAbs(p) {
			p = filepath.Join(e.cwd, p)
		}
		return filepath.Clean(p)
	}
	switch {
	case list && (del != "" || len(pos) > 0 || at != ""):
		return usagef(c, "--list goes alone")
	case del != "" && (len(pos) > 0 || at != ""):
		return usagef(c, "--delete takes one DIR")
	case force && del == "":
		return usagef(c, "--force goes with --delete")
	case asJSON && !list:
		return usagef(c, "--json goes with --list")
	case !list && del == "" && len(pos) == 0:
		return usagef(c, "want DIR, --list or --delete DIR")
	}
	ws, err := history.Find(e.cwd)
	if err != nil {
		return err
	}
	opts := branch.Options{AllowOther: allowOther, Stderr: e.stderr}
	switch {
	case list:
		infos, err := branch.List(e.ctx, ws)
		if err != nil {
			return err
		}
		if asJSON {
			if infos == nil {
				infos = []branch.Info{}
			}
			b, _ := json.MarshalIndent(infos, "", "  ")
			fmt.Fprintf(e.stdout, "%s\n", b)
			return nil
		}
		for _, in := range infos {
			fmt.Fprintln(e.stdout, branchLine(in))
		}
		return nil
	case del != "":
		in, err := branch.Delete(e.ctx, ws, abs(del), force, opts)
		if errors.Is(err, record.ErrNotBranch) {
			return fmt.Errorf("%s is not a branch of this workspace", quote.Name(abs(del)))
		}
		if err != nil {
			return err
		}
		fmt.Fprintf(e.stdout, "deleted branch %s (at %d, %d changed paths)\n", quote.Name(in.Dir), in.Base, in.Changed)
		return nil
	}
	seq := history.Now
	if at != "" {
		r, err := parseRef(c, at)
		if err != nil {
			return err
		}
		if err := withHistory(e, func(_ *history.Workspace, src history.Source) error {
			seq, err = r.state(src)
			return err
		}); err != nil {
			return err
		}
	}
	for _, d := range pos {
		in, err := branch.Create(e.ctx, ws, abs(d), seq, opts)
		if err != nil {
			return err
		}
		fmt.Fprintf(e.stdout, "branch %s at %d\n", quote.Name(in.Dir), in.Base)
	}
	return nil
}

// branchLine is one branch in --list.
func branchLine(in branch.Info) string {
	state := "mounted"
	if !in.Mounted {
		state = "not mounted"
	}
	merged := ""
	switch {
	case in.Merged != 0 && in.Unmerged:
		merged = fmt.Sprintf(", merged at %d, changed since", in.Merged)
	case in.Merged != 0:
		merged = fmt.Sprintf(", merged at %d", in.Merged)
	}
	return fmt.Sprintf("%s  at %d  %s  %d changed paths%s", quote.Name(in.Dir), in.Base, state, in.Changed, merged)
}
