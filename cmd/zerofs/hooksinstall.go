package main

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/zerofs/zerofs/history"
	"github.com/zerofs/zerofs/hooks"
)

// installLabel is the label of the step a hooks install in a mounted
// workspace begins, so that its change is a step of its own, named for
// what it is, rather than part of whatever came before.
func installLabel(a hooks.Agent) string { return "hooks install " + a.Name }

// writeInstall applies an install's changes (or, dry, prints them), each
// file with its diff, then what the agent still needs before it records
// anything.
func writeInstall(e *env, a hooks.Agent, opts hooks.InstallOptions, changes []hooks.FileChange, dry bool) error {
	w := e.stdout
	var todo []hooks.FileChange
	for _, ch := range changes {
		if ch.Changed() {
			todo = append(todo, ch)
		}
	}
	if len(todo) == 0 {
		fmt.Fprintf(w, "%s: %s already has zerofs's hooks; nothing to change\n", a.Title, a.Path(opts))
		writeNeeds(e, a, opts)
		return nil
	}
	if !dry {
		if err := beginInstallStep(e, a, todo); err != nil {
			return err
		}
	}
	for _, ch := range todo {
		switch {
		case dry && ch.Remove:
			fmt.Fprintf(w, "%s: would remove %s (an earlier install's):\n", a.Title, ch.Path)
		case dry:
			fmt.Fprintf(w, "%s: would write %s:\n", a.Title, ch.Path)
		default:
			if err := hooks.Apply(ch); err != nil {
				return err
			}
			switch {
			case ch.Remove:
				fmt.Fprintf(w, "%s: removed %s (an earlier install's):\n", a.Title, ch.Path)
			case ch.Before == nil:
				fmt.Fprintf(w, "%s: created %s:\n", a.Title, ch.Path)
			default:
				fmt.Fprintf(w, "%s: updated %s:\n", a.Title, ch.Path)
			}
		}
		if ch.Remove {
			writeConfigDiff(w, hooks.FileChange{Path: ch.Path, Before: ch.Before, After: nil})
			continue
		}
		writeConfigDiff(w, ch)
	}
	if !dry {
		fmt.Fprintf(w, "%s\n", a.Limits)
		if opts.Worktrees {
			fmt.Fprintf(w, "Each worktree %s makes (a subagent's isolation: worktree, EnterWorktree, claude --worktree) is a zerofs branch beside the workspace (WORKSPACE-branches/NAME): zerofs merge PATH brings its work in, zerofs branch --delete PATH drops it. The workspace must be mounted.\n", a.Title)
		}
	}
	writeNeeds(e, a, opts)
	return nil
}

// installedFile is a file a hooks install wrote in the workspace, as its
// step's payload keeps it: "hooksInstall": {"agent", "files": [{"path",
// "sha256"}]}.
type installedFile struct {
	Path   string `json:"path"`
	SHA256 string `json:"sha256"`
}

// beginInstallStep begins the step "hooks install AGENT" when the install
// writes into a mounted workspace. Its payload names the agent and the
// files (relative to the workspace), which `hooks check` reads back.
func beginInstallStep(e *env, a hooks.Agent, changes []hooks.FileChange) error {
	ws, err := history.Find(e.cwd)
	if err != nil || !ws.Mounted {
		return nil
	}
	var files []installedFile
	for _, ch := range changes {
		rel, err := filepath.Rel(ws.Root, ch.Path)
		if err == nil && !ch.Remove && rel != "." && !strings.HasPrefix(rel, "../") && rel != ".." {
			sum := sha256.Sum256(ch.After)
			files = append(files, installedFile{Path: rel, SHA256: hex.EncodeToString(sum[:])})
		}
	}
	if len(files) == 0 {
		return nil
	}
	extra, err := json.Marshal(map[string]any{"hooksInstall": map[string]any{"agent": a.Name, "files": files}})
	if err != nil {
		return err
	}
	return beginStep(e, ws, installLabel(a), extra)
}

// writeNeeds prints what the agent still needs before its hooks record
// anything, as far as zerofs can tell.
func writeNeeds(e *env, a hooks.Agent, opts hooks.InstallOptions) {
	needs := hooks.Needs(a, opts)
	always := hooks.Always(a)
	if len(needs)+len(always) == 0 {
		return
	}
	if len(needs) > 0 {
		fmt.Fprintf(e.stdout, "%s records nothing yet:\n", a.Title)
	} else {
		fmt.Fprintf(e.stdout, "For %s to record anything:\n", a.Title)
	}
	for _, n := range append(needs, always...) {
		fmt.Fprintf(e.stdout, "  - %s\n", n)
	}
}
