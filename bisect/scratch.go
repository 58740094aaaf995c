package bisect

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"github.com/zerofs/zerofs/history"
	"github.com/zerofs/zerofs/record"
)

// scratch is the directory the probes run in: a fork of one state of the
// workspace, moved from state to state by rewriting the paths that differ.
type scratch struct {
	src  history.Source
	plan *plan
	dir  string // the workspace's copy (a fork: it holds a .zero of its own)
	at   Seq    // the state it holds
	// rewritten counts the paths written or removed by moves, for the
	// caller to tell a move from a fresh fork.
	rewritten int
	forks     int
}

// newScratch forks the state t into a new directory under parent.
func newScratch(ctx context.Context, src history.Source, p *plan, parent string, t Seq) (*scratch, error) {
	top, err := os.MkdirTemp(parent, "zerofs-bisect-")
	if err != nil {
		return nil, err
	}
	s := &scratch{src: src, plan: p, dir: filepath.Join(top, "ws")}
	if err := s.fork(ctx, t); err != nil {
		os.RemoveAll(top)
		return nil, err
	}
	return s, nil
}

// fork writes the state t afresh.
func (s *scratch) fork(ctx context.Context, t Seq) error {
	if err := os.RemoveAll(s.dir); err != nil {
		return err
	}
	if _, err := history.Fork(ctx, s.src, t, s.dir); err != nil {
		return fmt.Errorf("bisect: write the state at %d: %w", t, err)
	}
	s.at = t
	s.forks++
	return nil
}

// remove removes the scratch directory.
func (s *scratch) remove() error { return os.RemoveAll(filepath.Dir(s.dir)) }

// moveTo makes the scratch directory hold the state t: the paths the
// checkpoints between its state and t captured are written as they were at
// t. Across a directory's rename record (which names no path beneath the
// directory) it forks t afresh.
func (s *scratch) moveTo(ctx context.Context, t Seq) error {
	if t == s.at {
		return nil
	}
	seen := map[string]bool{}
	var paths []string
	for _, c := range s.plan.between(s.at, t) {
		if c.rename {
			return s.fork(ctx, t)
		}
		for _, p := range c.paths {
			if !seen[p] {
				seen[p] = true
				paths = append(paths, p)
			}
		}
	}
	// Parents before children: a directory's entries are settled before
	// what is beneath them is written.
	slices.SortFunc(paths, func(a, b string) int { return strings.Compare(depthKey(a), depthKey(b)) })
	for _, p := range paths {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := s.sync(p, t, false); err != nil {
			return fmt.Errorf("bisect: write %s as at %d: %w", p, t, err)
		}
	}
	s.at = t
	return nil
}

// depthKey sorts paths by depth, then by name.
func depthKey(p string) string {
	return fmt.Sprintf("%04d/%s", strings.Count(p, "/"), p)
}

// sync makes the scratch path p what it was at t. A directory keeps what
// is beneath it, but for names that appear or go (written or removed
// whole); with deep, everything beneath is written too.
func (s *scratch) sync(p string, t Seq, deep bool) error {
	n, err := s.src.Stat(p, t)
	if err != nil && !errors.Is(err, record.ErrNoSuchPath) && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	local := s.local(p)
	fi, lerr := os.Lstat(local)
	if err != nil || !n.Exists {
		if lerr == nil {
			s.rewritten++
			return os.RemoveAll(local)
		}
		return nil
	}
	if n.Skipped {
		return nil // its before-state was not kept: leave what is there
	}
	if lerr == nil && (n.Kind != record.KindDir || !fi.IsDir()) {
		if err := os.RemoveAll(local); err != nil {
			return err
		}
		lerr = fs.ErrNotExist
	}
	if p != "" {
		if _, err := os.Lstat(filepath.Dir(local)); err != nil {
			// Its parent is not there yet (it appeared after this state's
			// neighbour): write the parent, whole.
			return s.sync(path.Dir(p), t, true)
		}
	}
	s.rewritten++
	switch n.Kind {
	case record.KindSymlink:
		return os.Symlink(n.Target, local)
	case record.KindFile:
		b, err := s.src.Content(p, t)
		if err != nil {
			return err
		}
		if err := os.WriteFile(local, b, 0o600); err != nil {
			return err
		}
		return os.Chmod(local, fs.FileMode(n.Mode&0o777))
	case record.KindDir:
		created := lerr != nil
		if created {
			if err := os.Mkdir(local, 0o700); err != nil {
				return err
			}
		}
		names, err := s.src.List(p, t)
		if err != nil {
			return err
		}
		want := map[string]bool{}
		for _, name := range names {
			want[name] = true
			child := path.Join(p, name)
			_, cerr := os.Lstat(s.local(child))
			if created || deep || cerr != nil {
				if err := s.sync(child, t, deep || created || cerr != nil); err != nil {
					return err
				}
			}
		}
		ents, err := os.ReadDir(local)
		if err != nil {
			return err
		}
		for _, e := range ents {
			if p == "" && e.Name() == record.StoreName {
				continue // the fork's own store
			}
			if !want[e.Name()] {
				if err := os.RemoveAll(filepath.Join(local, e.Name())); err != nil {
					return err
				}
			}
		}
		return os.Chmod(local, fs.FileMode(n.Mode&0o7777)|0o700)
	}
	return nil
}

// local is the scratch copy of workspace path p.
func (s *scratch) local(p string) string {
	if p == "" {
		return s.dir
	}
	return filepath.Join(s.dir, filepath.FromSlash(p))
}
