package rewind

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/zerofs/zerofs/internal/ignore"
	"github.com/zerofs/zerofs/internal/quote"
	"github.com/zerofs/zerofs/record"
	"github.com/zerofs/zerofs/rewind/internal/index"
)

// A fork is written in three parts. Fork (here) is the one that needs the
// engine: it holds the workspace lock and reads the state at T from the
// index. ForkDir (forkdir.go) copies the same state from a directory that
// shows it (a mount's @T/), with no engine. Both hand their tree to
// copyForkTree, which lists it and writes it with a forkWriter
// (forkwriter.go): the new directory, beneath one descriptor, and its
// store. They stay in this package because they follow a rewind's own
// restore rules (copyMode, restoreXattrs, writeSparse, the ignore rules).

// ForkResult is what a fork wrote.
type ForkResult struct {
	Dir      string     `json:"dir"`
	Source   string     `json:"source"`
	Sequence record.Seq `json:"sequence"`
	Files    int        `json:"files"`
	Dirs     int        `json:"dirs"`
	Symlinks int        `json:"symlinks"`
	Bytes    int64      `json:"bytes"`
	Cloned   int        `json:"cloned"` // files reflinked (FICLONE) rather than copied
	Skipped  []string   `json:"skipped"`
}

// ErrForkTarget: the fork's directory exists already or lies inside the
// workspace (a *ForkTargetError says which).
var ErrForkTarget = errors.New("rewind: bad fork directory")

// ForkTargetError is a fork refused for its directory; errors.Is it with
// ErrForkTarget. Its message is a person's: it names the directory and
// why, with no package prefix (the CLI prints it as it is).
type ForkTargetError struct {
	Dir string
	// Workspace is set when Dir lies inside it; otherwise Dir exists.
	Workspace string
}

func (e *ForkTargetError) Error() string {
	if e.Workspace != "" {
		return fmt.Sprintf("fork into %s: it is inside the workspace %s (a fork is a new directory outside it)", quote.Name(e.Dir), quote.Name(e.Workspace))
	}
	return fmt.Sprintf("fork into %s: it exists (a fork is a new directory: name one that does not exist)", quote.Name(e.Dir))
}

// Is makes a *ForkTargetError an ErrForkTarget.
func (e *ForkTargetError) Is(target error) bool { return target == ErrForkTarget }

// Fork writes the workspace's state at t into dir, a new directory (its
// parent must exist), with a store of its own in dir/.zero whose first
// event records source (the workspace's path) and t. File contents are
// reflinked from the blob store or the workspace where the filesystem can,
// copied elsewhere. Changes wait while it runs, so the copy is one state.
func (e *Engine) Fork(ctx context.Context, t record.Seq, dir, source string) (ForkResult, error) {
	e.wsMu.Lock()
	defer e.wsMu.Unlock()
	if err := e.checkSeq(t); err != nil {
		return ForkResult{}, err
	}
	root, err := e.stateAt("", t, ^record.Seq(0))
	if err != nil {
		return ForkResult{}, err
	}
	w, err := newForkWriter(dir, source, t)
	if err != nil {
		return ForkResult{}, err
	}
	if err := copyForkTree(ctx, w, &stateFork{e: e, t: t, ignored: e.ignoreRules()}); err != nil {
		return w.abort(err)
	}
	return w.finish(ctx, copyMode(root.State), root.State, e.log.SessionID())
}

// forkSource is a tree a fork copies: the engine's state at T (stateFork)
// or a directory that shows it (dirFork).
type forkSource interface {
	// list returns the children of the directory rel (the root: ""),
	// what the ignore rules ignore left out.
	list(rel string) ([]forkItem, error)
	// copy writes the one path it listed into w.
	copy(w *forkWriter, it forkItem) error
}

// forkItem is one path a forkSource listed.
type forkItem struct {
	path  string
	dir   bool        // a directory to list in turn
	bytes int64       // a file's size, for the Progress
	ent   Entry       // stateFork's
	fi    os.FileInfo // dirFork's
}

// copyForkTree lists src's whole tree first (parents before children), so
// that the Progress hears the total before the copy begins, then writes
// it into w path by path.
func copyForkTree(ctx context.Context, w *forkWriter, src forkSource) error {
	var items []forkItem
	var bytes int64
	var list func(rel string) error
	list = func(rel string) error {
		its, err := src.list(rel)
		if err != nil {
			return err
		}
		for _, it := range its {
			items = append(items, it)
			bytes += it.bytes
			if it.dir {
				if err := list(it.path); err != nil {
					return err
				}
			}
		}
		return nil
	}
	if err := list(""); err != nil {
		return err
	}
	pr := ProgressIn(ctx)
	pr.Begin("fork", int64(len(items)), bytes)
	for _, it := range items {
		if err := src.copy(w, it); err != nil {
			return err
		}
		pr.Add(1, it.bytes)
	}
	return nil
}

// stateFork is the engine's state at t, read under the workspace lock
// (Fork holds it).
type stateFork struct {
	e       *Engine
	t       record.Seq
	ignored *ignore.Matcher
}

func (s *stateFork) list(rel string) ([]forkItem, error) {
	ents, err := s.e.readDirAt(rel, s.t, ^record.Seq(0))
	if err != nil {
		return nil, err
	}
	var its []forkItem
	for _, de := range ents {
		p := index.JoinPath(rel, de.Name)
		if s.e.ignored(s.ignored, p, de.Entry.State.Kind, -1, false) {
			continue // never forked (ignore.go)
		}
		it := forkItem{path: p, ent: de.Entry}
		st := de.Entry.State
		switch {
		case st.Skipped:
		case st.Kind == record.KindDir:
			it.dir = true
		case st.Kind == record.KindFile:
			it.bytes = st.Bytes
		}
		its = append(its, it)
	}
	return its, nil
}

func (s *stateFork) copy(w *forkWriter, it forkItem) error {
	st := it.ent.State
	switch {
	case st.Skipped:
		w.res.Skipped = append(w.res.Skipped, it.path)
	case st.Kind == record.KindDir:
		return w.mkdir(it.path, copyMode(st), st)
	case st.Kind == record.KindSymlink:
		target, err := s.e.ReadLink(it.ent)
		if err != nil {
			return err
		}
		return w.symlink(it.path, target)
	case st.Kind == record.KindFile:
		f, err := s.e.OpenContent(it.ent)
		if err != nil {
			return err
		}
		defer f.Close()
		return w.file(it.path, f, copyMode(st), st)
	}
	return nil
}
