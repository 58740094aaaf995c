package rewind

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/zerofs/zerofs/record"
)

// mergeSide is one side a merge brings in: a state it began from (Base,
// a state of this workspace), its tree now (root), and its own history
// (steps, and which step last changed each path). A fork is one (its own
// directory and store); a branch will be one too (its mount and the
// history it keeps in this store).
type mergeSide struct {
	dir  string
	tree *workspace // its tree now, every path beneath its root descriptor
	base record.Seq
	head record.Seq
	// steps are its steps since its base, oldest first; last names the
	// step that last changed each path (absent when its history does not
	// say: changed while it was not mounted).
	steps []record.StepRef
	last  map[string]record.StepRef
	// changed lists the paths the side may have changed since its base;
	// nil: every path of its tree and of the base, compared (a fork can
	// have been changed while no daemon recorded it). A branch's copy-up
	// layer knows its changed paths and gives them here.
	changed func() ([]string, error)
	// branch is the branch's record when the side is a branch (its tree
	// is then its copy-up layer's upper directory: branchNode).
	branch *record.BranchRecord
}

func (s *mergeSide) close() { s.tree.root.Close() }

// openFork opens the fork in dir as a merge side of the workspace at
// ws: its first event must record that it was forked from there.
// Its log is read from its store, or through its control directory when
// it is mounted.
func openFork(dir, ws string) (*mergeSide, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("rewind: merge: %w", err)
	}
	// Symlinks resolved, so that no name leads inside the workspace: a
	// daemon must never read its own mount.
	real, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", record.ErrNotFork, abs, err)
	}
	inside := func(p, w string) bool { return p == w || strings.HasPrefix(p, w+"/") }
	w := filepath.Clean(ws)
	rw, err := filepath.EvalSymlinks(w)
	if err != nil {
		rw = w
	}
	if inside(abs, w) || inside(real, w) || inside(real, rw) {
		return nil, fmt.Errorf("%w: %s is inside the workspace", record.ErrNotFork, abs)
	}
	fd, err := unix.Open(real, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", record.ErrNotFork, abs, err)
	}
	side := &mergeSide{dir: abs, tree: &workspace{root: os.NewFile(uintptr(fd), abs)}, last: map[string]record.StepRef{}}
	if err := side.readLog(ws); err != nil {
		side.close()
		return nil, err
	}
	return side, nil
}
