package hooks

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// Claude Code's hooks around a worktree's life (2.1.x): with either one
// configured, Claude Code makes no git worktree of its own for `claude
// --worktree`, EnterWorktree or a subagent's `isolation: "worktree"`, and
// asks the hook instead.
//
// WorktreeCreate's JSON is the common fields (session_id, transcript_path,
// cwd: the directory the agent works in) and `name`, the worktree's name
// (Claude Code's own, "agent-a51dc467bf860b5bc" for a subagent, or the one
// the person or model gave). The hook makes the worktree and prints its
// absolute path as the last line on stdout; a non-zero exit fails the
// creation (Claude Code shows the hook's output), and a path that is not a
// directory, or holds a "." or ".." component, is refused.
//
// WorktreeRemove's JSON has `worktree_path`, the path the create hook
// printed (its cwd may be that worktree). A non-zero exit keeps the
// worktree, and Claude Code logs "WorktreeRemove hook exited N (first line
// of output)". Claude Code 2.1.328 removes a worktree a hook made only when
// told to (ExitWorktree "remove", its exit dialog, deleting a job): a
// subagent's worktree is kept, and its path comes back in the agent's
// result for the main agent to merge.
const (
	EventWorktreeCreate = "WorktreeCreate"
	EventWorktreeRemove = "WorktreeRemove"
)

// A WorktreeRequest is what a WorktreeCreate or WorktreeRemove hook asks.
type WorktreeRequest struct {
	// Remove: WorktreeRemove; else WorktreeCreate.
	Remove bool
	// Name is the worktree's name (WorktreeCreate): one or more segments
	// of letters, digits, '.', '_' and '-', joined by '/', at most 64
	// bytes, as Claude Code itself checks a name.
	Name string
	// Path is the worktree to remove (WorktreeRemove): absolute and clean.
	Path string
	// Cwd is where the agent works: absolute and clean, or "" when the
	// payload names none.
	Cwd     string
	Session string
}

// ErrNotWorktreeHook: a payload that is no WorktreeCreate or
// WorktreeRemove.
var ErrNotWorktreeHook = errors.New("hooks: not a WorktreeCreate or WorktreeRemove hook")

// ParseWorktree reads a WorktreeCreate or WorktreeRemove hook's JSON. The
// payload is untrusted: a name or path that could lead outside where it
// should (a ".." component, a relative path, a control character) is an
// error, never cleaned into something else.
func ParseWorktree(raw []byte) (WorktreeRequest, error) {
	var p struct {
		Event   string `json:"hook_event_name"`
		Name    string `json:"name"`
		Path    string `json:"worktree_path"`
		Cwd     string `json:"cwd"`
		Session string `json:"session_id"`
	}
	if err := json.Unmarshal(raw, &p); err != nil {
		return WorktreeRequest{}, fmt.Errorf("%w: %v", ErrNotWorktreeHook, err)
	}
	r := WorktreeRequest{Session: p.Session}
	if p.Cwd != "" {
		if !cleanAbs(p.Cwd) {
			return r, fmt.Errorf("hooks: the hook's cwd %q is not a clean absolute path", p.Cwd)
		}
		r.Cwd = p.Cwd
	}
	switch p.Event {
	case EventWorktreeCreate:
		if err := checkWorktreeName(p.Name); err != nil {
			return r, err
		}
		r.Name = p.Name
	case EventWorktreeRemove:
		r.Remove = true
		if !cleanAbs(p.Path) {
			return r, fmt.Errorf("hooks: worktree_path %q is not a clean absolute path", p.Path)
		}
		r.Path = p.Path
	default:
		return r, fmt.Errorf("%w: hook_event_name %q", ErrNotWorktreeHook, p.Event)
	}
	return r, nil
}

// cleanAbs reports whether p is an absolute path already in its clean
// form, holding no control character.
func cleanAbs(p string) bool {
	return filepath.IsAbs(p) && filepath.Clean(p) == p && !strings.ContainsFunc(p, func(r rune) bool { return r < 0x20 || r == 0x7f })
}

// checkWorktreeName applies Claude Code's own rule for a worktree's name.
func checkWorktreeName(name string) error {
	if name == "" || len(name) > 64 {
		return fmt.Errorf("hooks: worktree name %q: want 1 to 64 bytes", name)
	}
	for _, seg := range strings.Split(name, "/") {
		if seg == "" || seg == "." || seg == ".." || strings.Trim(seg, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-") != "" {
			return fmt.Errorf("hooks: worktree name %q: want segments of letters, digits, '.', '_' and '-', joined by '/'", name)
		}
	}
	return nil
}

// WorktreeDirs are where a branch for the worktree name of the workspace
// at root goes, in the order to try: beside the workspace, in
// ROOT-branches/ (as `git worktree add ../repo-name` would put it), else,
// when that directory cannot be made (a parent the user may not write),
// in the user's state directory ($XDG_STATE_HOME, or ~/.local/state),
// under zerofs/branches/BASE-HASH/, HASH naming the workspace's path. A
// name's '/' becomes '-': each branch is one directory of its own.
func WorktreeDirs(root, name, home string) []string {
	flat := strings.ReplaceAll(name, "/", "-")
	dirs := []string{filepath.Join(filepath.Dir(root), filepath.Base(root)+"-branches", flat)}
	state := ""
	if x := os.Getenv("XDG_STATE_HOME"); x != "" && filepath.IsAbs(x) {
		state = x
	} else if home != "" {
		state = filepath.Join(home, ".local", "state")
	}
	if state != "" {
		sum := sha256.Sum256([]byte(root))
		dirs = append(dirs, filepath.Join(state, "zerofs", "branches", filepath.Base(root)+"-"+hex.EncodeToString(sum[:4]), flat))
	}
	return dirs
}
