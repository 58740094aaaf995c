package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	udiff "github.com/aymanbagabas/go-udiff"

	"github.com/zerofs/zerofs/history"
	"github.com/zerofs/zerofs/hooks"
	"github.com/zerofs/zerofs/internal/quote"
	"github.com/zerofs/zerofs/record"
)

var hooksCmd = &command{
	name:    "hooks",
	usage:   "hooks install|uninstall AGENT [--user|--project] [--dry-run] [--no-prompt] [--worktrees] | hooks check",
	summary: "write an agent's hook configuration; check what reached the log",
	about: `  hooks install AGENT   merge zerofs's hooks into the configuration of AGENT
                        (` + strings.Join(hooks.AgentNames(), ", ") + `):
                        a hook before each tool call begins a step, one
                        after it records its result, and a hook at each
                        prompt begins a turn. Installing again
                        changes nothing; the agent's other settings and hooks
                        are kept. It prints each file it writes with a diff,
                        then what the agent still needs before the hooks
                        record anything (Codex's and Gemini CLI's trust). In
                        a mounted workspace the install is a step of its own.
                        OpenCode gets a small plugin file instead (named in
                        the project's opencode.json, kept outside it).
  hooks uninstall AGENT take zerofs's hooks out of AGENT's configuration
                        again, keeping everything else; a file left holding
                        nothing but what an install wrote is removed (and its
                        directory, left empty). With --worktrees, only the
                        worktree hooks
  hooks check           for each agent, where its hooks are installed, what
                        it still needs before they record, whether a file a
                        recorded install wrote is gone or changed, and the
                        last step, result and turn it recorded in this
                        workspace

The flags are hooks install's (--user, --project, --dry-run and --worktrees
also hooks uninstall's):
`,
	flags: []flagDef{
		{name: "user", help: "the user's configuration, for every project"},
		{name: "project", help: `this project's configuration (the default): the
workspace around the current directory, or the
current directory outside one`},
		{name: "dry-run", help: "print what would change and write nothing"},
		{name: "no-prompt", help: `record turns without the prompt's text and results
without the error's first line`},
		{name: "zerofs", arg: "PATH", help: "the zerofs the hooks run (default: this binary)"},
		{name: "worktrees", help: `also the agent's worktree hooks (Claude Code's
WorktreeCreate and WorktreeRemove): each worktree it
makes for a subagent (isolation: worktree),
EnterWorktree or claude --worktree is a zerofs branch
of the workspace (zerofs branch --hook); a project's
install only`},
	},
	args: []argDef{{name: "install|uninstall|check", comp: compWords}, {name: "AGENT", comp: compAgent}},
	run:  runHooks,
}

func runHooks(e *env, c *command, args []string) error {
	if len(args) == 0 {
		return usagef(c, "want install AGENT, uninstall AGENT or check")
	}
	switch args[0] {
	case "install":
		return runHooksInstall(e, c, args[1:])
	case "uninstall":
		return runHooksUninstall(e, c, args[1:])
	case "check":
		if len(args) > 1 {
			return usagef(c, "check takes no arguments")
		}
		return runHooksCheck(e)
	case "-h", "-help", "--help":
		return errHelp
	}
	return usagef(c, "unknown hooks command %q: want install, uninstall or check", args[0])
}

func runHooksInstall(e *env, c *command, args []string) error {
	o, pos, rest, err := c.parse(args)
	if err != nil {
		return err
	}
	user := o.Bool("user")
	project := o.Bool("project")
	dry := o.Bool("dry-run")
	noPrompt := o.Bool("no-prompt")
	bin := o.String("zerofs")
	worktrees := o.Bool("worktrees")
	pos = append(pos, rest...)
	agent, err := hooksAgent(c, pos, user, project, worktrees)
	if err != nil {
		return err
	}
	if worktrees && user {
		// With them, Claude Code makes no git worktree of its own anywhere
		// they apply: outside a mounted zerofs workspace it could make none.
		return usagef(c, "--worktrees goes with a project's install: the worktree hooks take the place of Claude Code's own git worktrees wherever they apply, and a branch needs a mounted zerofs workspace")
	}
	opts, err := installOptions(e, user, noPrompt, bin)
	if err != nil {
		return err
	}
	opts.Worktrees = worktrees
	changes, err := hooks.PlanAll(agent, opts)
	if err != nil {
		return err
	}
	return writeInstall(e, agent, opts, changes, dry)
}

func runHooksUninstall(e *env, c *command, args []string) error {
	o, pos, rest, err := c.parse(args)
	if err != nil {
		return err
	}
	user := o.Bool("user")
	project := o.Bool("project")
	dry := o.Bool("dry-run")
	worktrees := o.Bool("worktrees")
	if o.Bool("no-prompt") || o.String("zerofs") != "" {
		return usagef(c, "--no-prompt and --zerofs go with install")
	}
	pos = append(pos, rest...)
	agent, err := hooksAgent(c, pos, user, project, worktrees)
	if err != nil {
		return err
	}
	opts, err := installOptions(e, user, false, "zerofs")
	if err != nil {
		return err
	}
	opts.Worktrees = worktrees
	changes, err := hooks.PlanUninstall(agent, opts)
	if err != nil {
		return err
	}
	return writeUninstall(e, agent, opts, changes, dry)
}

// installOptions works out where an install goes and which zerofs its
// hooks run.
func installOptions(e *env, user, noPrompt bool, bin string) (hooks.InstallOptions, error) {
	opts := hooks.InstallOptions{Scope: hooks.ScopeProject, NoPrompt: noPrompt, Zerofs: bin}
	home, err := os.UserHomeDir()
	if err != nil {
		return opts, fmt.Errorf("hooks install: no home directory: %v", err)
	}
	opts.Home = home
	if user {
		opts.Scope = hooks.ScopeUser
	}
	opts.Project = e.cwd
	if ws, err := history.Find(e.cwd); err == nil {
		opts.Project = ws.Root
	}
	if opts.Zerofs == "" {
		exe, err := os.Executable()
		if err != nil {
			return opts, fmt.Errorf("hooks install: cannot tell where this zerofs is (give --zerofs PATH): %v", err)
		}
		if p, err := filepath.EvalSymlinks(exe); err == nil {
			exe = p
		}
		opts.Zerofs = exe
	} else if !filepath.IsAbs(opts.Zerofs) && strings.Contains(opts.Zerofs, "/") {
		opts.Zerofs = filepath.Join(e.cwd, opts.Zerofs)
	}
	return opts, nil
}

// writeConfigDiff prints what an install changes in a file, as a diff.
func writeConfigDiff(w io.Writer, ch hooks.FileChange) {
	from := "a/" + filepath.Base(ch.Path)
	if ch.Before == nil {
		from = "/dev/null"
	}
	diff, err := udiff.ToUnified(from, "b/"+filepath.Base(ch.Path), string(ch.Before), udiff.Lines(string(ch.Before), string(ch.After)), 3)
	if err != nil {
		fmt.Fprintf(w, "%s", ch.After)
		return
	}
	fmt.Fprint(w, diff)
}

// runHooksCheck says, for each agent, where its hooks are installed and
// the last step and turn it recorded in this workspace.
func runHooksCheck(e *env) error {
	opts, err := installOptions(e, false, false, "zerofs")
	if err != nil {
		return err
	}
	last := map[string]string{}
	installs := map[string]installRecord{}
	ws, werr := history.Find(e.cwd)
	if werr == nil {
		last, installs, err = lastByAgent(e, ws)
		if err != nil {
			return err
		}
	}
	w := e.stdout
	for _, a := range hooks.Agents {
		var where []string
		var scopes []hooks.Scope
		for _, scope := range []hooks.Scope{hooks.ScopeProject, hooks.ScopeUser} {
			o := opts
			o.Scope = scope
			p := a.Path(o)
			ok, err := hooks.Installed(a, p)
			switch {
			case ok && !hooks.ResultsInstalled(a, p):
				where = append(where, fmt.Sprintf("%s (%s; without the after-tool hooks that record results: install again)", scope, p))
				scopes = append(scopes, scope)
			case ok:
				wt := ""
				if w, _ := hooks.WorktreesInstalled(a, p); w {
					wt = "; with the worktree hooks: its worktrees are zerofs branches"
				}
				where = append(where, fmt.Sprintf("%s (%s%s)", scope, p, wt))
				scopes = append(scopes, scope)
			case err != nil && !errors.Is(err, os.ErrNotExist):
				where = append(where, fmt.Sprintf("%s: unreadable (%v)", scope, err))
			}
		}
		state := "not installed"
		if len(where) > 0 {
			state = "installed: " + strings.Join(where, ", ")
		}
		fmt.Fprintf(w, "%-9s %s\n", a.Name, state)
		if rec, ok := installs[a.Name]; ok {
			checkInstalledFiles(w, ws, a, rec)
		}
		writeCheckNeeds(w, a, opts, scopes)
		switch {
		case werr != nil:
		case last[a.Name] != "":
			fmt.Fprintf(w, "          %s\n", last[a.Name])
		case len(where) > 0:
			fmt.Fprintf(w, "          nothing recorded yet in %s: run the agent there, then check again\n", ws.Root)
		}
	}
	if werr != nil {
		fmt.Fprintf(w, "not in a zerofs workspace (%v): nothing recorded to check\n", werr)
	}
	return nil
}

// lastByAgent reads the workspace's log for each agent's last recorded
// step and turn, and its last recorded `hooks install`.
func lastByAgent(e *env, ws *history.Workspace) (map[string]string, map[string]installRecord, error) {
	out := map[string]string{}
	installs := map[string]installRecord{}
	err := withHistory(e, func(_ *history.Workspace, src history.Source) error {
		steps, turns, results := map[string]string{}, map[string]string{}, map[string]string{}
		for ev, err := range src.Events() {
			if err != nil {
				return err
			}
			if agent, rec, ok := installOf(ev); ok {
				installs[agent] = rec
				continue
			}
			if agent, ok := uninstallOf(ev); ok {
				delete(installs, agent)
				continue
			}
			if ev.Type == record.TypeToolResult {
				if a, s := resultLine(ev); a != "" {
					results[a] = s
				}
				continue
			}
			if ev.Type != record.TypeToolCall && ev.Type != record.TypeTurn {
				continue
			}
			var p struct {
				Name  string `json:"name"`
				Agent string `json:"agent"`
			}
			if json.Unmarshal(ev.Payload, &p) != nil || p.Agent == "" {
				continue
			}
			when := ev.CreatedAt.Local().Format("2006-01-02 15:04:05")
			if ev.Type == record.TypeTurn {
				turns[p.Agent] = fmt.Sprintf("last turn %d at %s", ev.Seq, when)
			} else {
				steps[p.Agent] = fmt.Sprintf("last step %d at %s: %s", ev.Seq, when, quote.Name(p.Name))
			}
		}
		for _, a := range hooks.Agents {
			parts := []string{}
			if s := steps[a.Name]; s != "" {
				parts = append(parts, s)
			}
			if r := results[a.Name]; r != "" {
				parts = append(parts, r)
			}
			if t := turns[a.Name]; t != "" {
				parts = append(parts, t)
			}
			out[a.Name] = strings.Join(parts, "; ")
		}
		return nil
	})
	return out, installs, err
}

// hooksAgent checks what install and uninstall both take: one known AGENT,
// at most one of --user and --project, --worktrees only for an agent that
// has worktree hooks.
func hooksAgent(c *command, pos []string, user, project, worktrees bool) (hooks.Agent, error) {
	if len(pos) != 1 {
		return hooks.Agent{}, usagef(c, "want one AGENT (%s)", strings.Join(hooks.AgentNames(), ", "))
	}
	agent, ok := hooks.Lookup(pos[0])
	if !ok {
		return hooks.Agent{}, usagef(c, "unknown agent %q: want one of %s", pos[0], strings.Join(hooks.AgentNames(), ", "))
	}
	if user && project {
		return hooks.Agent{}, usagef(c, "--user and --project exclude each other")
	}
	if worktrees && len(agent.WorktreeEvents) == 0 {
		return hooks.Agent{}, usagef(c, "--worktrees: %s has no worktree hooks (claude has)", agent.Name)
	}
	return agent, nil
}
