package main

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/zerofs/zerofs/history"
	"github.com/zerofs/zerofs/hooks"
	"github.com/zerofs/zerofs/record"
)

// writeUninstall applies an uninstall's changes (or, dry, prints them),
// each file with its diff. In a mounted workspace it is a step of its own,
// "hooks uninstall AGENT", whose payload names the agent (and whether only
// the worktree hooks went): `hooks check` then no longer warns that the
// files an earlier install wrote changed.
func writeUninstall(e *env, a hooks.Agent, opts hooks.InstallOptions, changes []hooks.FileChange, dry bool) error {
	w := e.stdout
	what := "zerofs's hooks"
	if opts.Worktrees {
		what = "zerofs's worktree hooks"
	}
	var todo []hooks.FileChange
	for _, ch := range changes {
		if ch.Changed() {
			todo = append(todo, ch)
		}
	}
	if len(todo) == 0 {
		fmt.Fprintf(w, "%s: %s holds none of %s; nothing to change\n", a.Title, a.Path(opts), what)
		return nil
	}
	if !dry {
		if err := beginUninstallStep(e, a, opts.Worktrees); err != nil {
			return err
		}
	}
	for _, ch := range todo {
		if !dry {
			if err := hooks.ApplyUninstall(ch, opts); err != nil {
				return err
			}
		}
		switch {
		case ch.Remove && dry:
			fmt.Fprintf(w, "%s: would remove %s (it holds nothing but what zerofs wrote):\n", a.Title, ch.Path)
		case ch.Remove:
			fmt.Fprintf(w, "%s: removed %s (it held nothing but what zerofs wrote):\n", a.Title, ch.Path)
		case dry:
			fmt.Fprintf(w, "%s: would take %s out of %s:\n", a.Title, what, ch.Path)
		default:
			fmt.Fprintf(w, "%s: took %s out of %s:\n", a.Title, what, ch.Path)
		}
		if ch.Remove {
			writeConfigDiff(w, hooks.FileChange{Path: ch.Path, Before: ch.Before})
			continue
		}
		writeConfigDiff(w, ch)
	}
	return nil
}

// beginUninstallStep begins the step "hooks uninstall AGENT" when the
// workspace is mounted.
func beginUninstallStep(e *env, a hooks.Agent, worktreesOnly bool) error {
	ws, err := history.Find(e.cwd)
	if err != nil || !ws.Mounted {
		return nil
	}
	extra, err := json.Marshal(map[string]any{"hooksUninstall": map[string]any{"agent": a.Name, "worktreesOnly": worktreesOnly}})
	if err != nil {
		return err
	}
	return beginStep(e, ws, "hooks uninstall "+a.Name, extra)
}

// uninstallOf is the agent a `hooks uninstall` step's payload names, if ev
// is one that took all of zerofs's hooks out.
func uninstallOf(ev record.Event) (string, bool) {
	if ev.Type != record.TypeToolCall || !bytes.Contains(ev.Payload, []byte(`"hooksUninstall"`)) {
		return "", false
	}
	var p struct {
		HooksUninstall struct {
			Agent         string `json:"agent"`
			WorktreesOnly bool   `json:"worktreesOnly"`
		} `json:"hooksUninstall"`
	}
	if json.Unmarshal(ev.Payload, &p) != nil || p.HooksUninstall.Agent == "" || p.HooksUninstall.WorktreesOnly {
		return "", false
	}
	return p.HooksUninstall.Agent, true
}
