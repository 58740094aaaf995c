package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/zerofs/zerofs/branch"
	"github.com/zerofs/zerofs/history"
	"github.com/zerofs/zerofs/hooks"
	"github.com/zerofs/zerofs/internal/quote"
	"github.com/zerofs/zerofs/record"
)

// runBranchHook answers an agent's worktree hooks (Claude Code's
// WorktreeCreate and WorktreeRemove, which `zerofs hooks install claude
// --worktrees` writes): each worktree the agent asks for is a branch of
// the workspace. Unlike `step --hook` it fails out loud, because the
// agent's contract wants it to: a WorktreeCreate hook that exits non-zero
// fails the creation (the subagent does not start, rather than working in
// an unrecorded copy), and a WorktreeRemove hook that exits non-zero keeps
// the worktree and shows the hook's first line, which is how a branch
// holding changes not merged is refused.
func runBranchHook(e *env, agent string) error {
	if agent != "" && agent != "claude" {
		return fmt.Errorf("branch --hook: %s has no worktree hooks zerofs knows (claude has)", quote.Name(agent))
	}
	raw, err := readHook(e.stdin)
	if err != nil {
		return fmt.Errorf("branch --hook: %w", err)
	}
	req, err := hooks.ParseWorktree(raw)
	if err != nil {
		return fmt.Errorf("branch --hook: %w", err)
	}
	if req.Remove {
		return removeWorktree(e, req)
	}
	return createWorktree(e, req)
}

// createWorktree makes the branch a WorktreeCreate asks for and prints its
// directory, the one line the agent reads: beside the workspace (or in the
// user's state directory, hooks.WorktreeDirs), at the workspace as it is
// now. A branch of this workspace already there (the agent asking again
// for a worktree of the same name) is mounted again if it is not.
func createWorktree(e *env, req hooks.WorktreeRequest) error {
	dir := e.cwd
	if req.Cwd != "" {
		dir = req.Cwd
	}
	ws, err := history.Find(dir)
	if err != nil {
		return err
	}
	if !ws.Mounted {
		return fmt.Errorf("%s is not mounted, and a branch reads its base through the mount: no worktree made (zerofs mount %s)", quote.Name(ws.Root), quote.Name(ws.Root))
	}
	home, _ := os.UserHomeDir()
	opts := branch.Options{Stderr: e.stderr}
	var tried []string
	for _, d := range hooks.WorktreeDirs(ws.Root, req.Name, home) {
		if in, err := branch.Find(e.ctx, ws, d); err == nil {
			if !in.Mounted {
				if in, err = branch.Create(e.ctx, ws, d, history.Now, opts); err != nil {
					return err
				}
			}
			fmt.Fprintln(e.stdout, in.Dir)
			return nil
		}
		_, statErr := os.Stat(filepath.Dir(d))
		if err := os.MkdirAll(filepath.Dir(d), 0o755); err != nil {
			tried = append(tried, err.Error())
			continue
		}
		in, err := branch.Create(e.ctx, ws, d, history.Now, opts)
		if err != nil {
			if statErr != nil {
				os.Remove(filepath.Dir(d)) // made for this branch: nothing stays
			}
			return err
		}
		fmt.Fprintln(e.stdout, in.Dir)
		return nil
	}
	return fmt.Errorf("no directory for the branch %s: %s", quote.Name(req.Name), strings.Join(tried, "; "))
}

// removeWorktree deletes the branch a WorktreeRemove names, unless it
// holds changes no merge brought in: then it exits 1 saying how to merge
// it or drop it, and the agent keeps the worktree. A worktree that is
// gone already, or was deleted as a branch, is nothing to do.
func removeWorktree(e *env, req hooks.WorktreeRequest) error {
	if _, err := os.Lstat(req.Path); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	ws, err := branchParent(e, req.Path)
	if err != nil {
		return err
	}
	// The agent may run its hooks in the worktree itself: this process
	// must not be what holds the branch's mount.
	if wd, err := os.Getwd(); err == nil && (wd == req.Path || strings.HasPrefix(wd, req.Path+"/")) {
		os.Chdir("/")
	}
	in, err := branch.Delete(e.ctx, ws, req.Path, false, branch.Options{Stderr: e.stderr})
	var ue *branch.UnmergedError
	if errors.As(err, &ue) {
		return fmt.Errorf("kept the branch %s: it holds changes not merged into %s (%d changed paths): zerofs merge %s brings them in, zerofs branch --delete %s --force drops them",
			quote.Name(in.Dir), quote.Name(ws.Root), in.Changed, quote.Name(in.Dir), quote.Name(in.Dir))
	}
	return err
}

// branchParent is the workspace whose branch dir is. The branch's own
// daemon keeps its store in the workspace's (STORE/branches/ID/store):
// the workspace of a store in its default place (ROOT/.zero) is the first
// to ask (the branch's status may name the store through the workspace
// daemon's descriptor, /proc/PID/fd/N, a link to it); then the workspace around the hook's own directory and the one
// the worktree's directory names (ROOT-branches/NAME). Only a workspace
// whose branch records name dir counts.
func branchParent(e *env, dir string) (*history.Workspace, error) {
	var roots []string
	if bws, err := history.Find(dir); err == nil && bws.Mounted && bws.Root == filepath.Clean(dir) {
		s := bws.Status.Store
		id, branches := filepath.Dir(s), filepath.Dir(filepath.Dir(s))
		if filepath.Base(s) == record.BranchStoreName && record.CheckBranchID(filepath.Base(id)) == nil &&
			filepath.Base(branches) == record.BranchesName {
			// The workspace's store, which its branch's daemon may name
			// through the workspace daemon's descriptor (/proc/PID/fd/N).
			store := filepath.Dir(branches)
			if t, err := os.Readlink(store); err == nil && filepath.IsAbs(t) {
				store = t
			}
			if filepath.Base(store) == ".zero" {
				roots = append(roots, filepath.Dir(store))
			}
		}
	}
	roots = append(roots, e.cwd)
	if up := filepath.Dir(dir); strings.HasSuffix(up, "-branches") {
		roots = append(roots, strings.TrimSuffix(up, "-branches"))
	}
	for _, r := range roots {
		ws, err := history.Find(r)
		if err != nil {
			continue
		}
		if _, err := branch.Find(e.ctx, ws, dir); err == nil {
			return ws, nil
		}
	}
	return nil, fmt.Errorf("%s is no branch of a zerofs workspace zerofs could find: left alone (zerofs branch --list, in the workspace, lists its branches)", quote.Name(dir))
}
