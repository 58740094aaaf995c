package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/zerofs/zerofs/eventlog"
	"github.com/zerofs/zerofs/rewind"
)

// Seq is an event sequence.
type Seq = eventlog.Seq

// errNoWorkspace: no directory from the start up to / holds a zerofs store
// or control directory. `step --hook` tests for it to stay out of the way
// of agents working outside zerofs.
var errNoWorkspace = errors.New("not in a zerofs workspace")

// workspace is a zerofs workspace found from some directory, the way git
// finds .git: the nearest ancestor with a .zero that is either a mount's
// control directory or a store on disk.
type workspace struct {
	// Root is the workspace's root as the caller sees it: the mount's root
	// when mounted, else the workspace directory itself.
	Root string
	// Mounted is true when Root/.zero is a live control directory: commands
	// then talk to the daemon through it and read @T/ views.
	Mounted bool
	// Status is the daemon's .zero/status when Mounted.
	Status mountStatus
	// Store is the store directory when not Mounted (Root/.zero).
	Store string
}

// mountStatus is .zero/status. sync and autoStep are kept raw: they are
// only shown, and showing what the daemon said is more honest than
// guessing its encoding.
type mountStatus struct {
	PID        int    `json:"pid"`
	Workspace  string `json:"workspace"`
	Mountpoint string `json:"mountpoint"`
	Store      string `json:"store"`
	Head       Seq    `json:"head"`
	Step       struct {
		Sequence Seq    `json:"sequence"`
		Label    string `json:"label"`
	} `json:"step"`
	Sync         json.RawMessage `json:"sync"`
	AutoStep     json.RawMessage `json:"autoStep"`
	PrunedBefore Seq             `json:"prunedBefore"`
}

// findWorkspace walks up from dir to the nearest workspace.
func findWorkspace(dir string) (*workspace, error) {
	start, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	for d := start; ; {
		if ws, ok := workspaceAt(d); ok {
			return ws, nil
		}
		parent := filepath.Dir(d)
		if parent == d {
			return nil, fmt.Errorf("%w (no .zero in %s or above)", errNoWorkspace, start)
		}
		d = parent
	}
}

// workspaceAt reports whether d is a workspace root, mounted or not.
func workspaceAt(d string) (*workspace, bool) {
	zero := filepath.Join(d, rewind.StoreName)
	if fi, err := os.Stat(zero); err != nil || !fi.IsDir() {
		return nil, false
	}
	if st, ok := readStatus(d); ok {
		return &workspace{Root: d, Mounted: true, Status: st}, true
	}
	if _, err := os.Stat(filepath.Join(zero, "events.jsonl")); err == nil {
		return &workspace{Root: d, Store: zero}, true
	}
	return nil, false
}

// readStatus reads a mount's control files under root. Both must answer:
// a .zero on disk has neither head nor status, so a stray file cannot pass
// for a mount.
func readStatus(root string) (mountStatus, bool) {
	var st mountStatus
	zero := filepath.Join(root, rewind.StoreName)
	if _, err := os.ReadFile(filepath.Join(zero, "head")); err != nil {
		return st, false
	}
	b, err := os.ReadFile(filepath.Join(zero, "status"))
	if err != nil || json.Unmarshal(b, &st) != nil || st.PID <= 0 {
		return st, false
	}
	return st, true
}

// relPath turns a path the user typed into a workspace path (slash
// separated, "" for the root): absolute paths must lie in the workspace;
// relative ones are taken from the current directory.
func (ws *workspace) relPath(cwd, p string) (string, error) {
	abs := p
	if !filepath.IsAbs(p) {
		abs = filepath.Join(cwd, p)
	}
	rel, err := filepath.Rel(ws.Root, filepath.Clean(abs))
	if err != nil || rel == ".." || strings.HasPrefix(rel, "../") {
		return "", fmt.Errorf("%s is outside the workspace %s", p, ws.Root)
	}
	if rel == "." {
		return "", nil
	}
	return filepath.ToSlash(rel), nil
}

// cwdRel is the current directory relative to the workspace root ("" when
// at the root or outside it).
func (ws *workspace) cwdRel(cwd string) string {
	rel, err := ws.relPath(cwd, ".")
	if err != nil {
		return ""
	}
	return rel
}
