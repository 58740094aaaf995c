package rewind

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/zerofs/zerofs/eventlog"
	"github.com/zerofs/zerofs/rewind/internal/index"
)

// TypeForked is the first event of a fork's store: where its first state
// came from. Payload: ForkPayload.
const TypeForked = "workspace_forked"

// ForkPayload is the payload of a workspace_forked event.
type ForkPayload struct {
	// Source is the workspace forked from, Sequence the state of it that
	// the fork began as.
	Source   string `json:"source"`
	Sequence Seq    `json:"sequence"`
	// SourceSession is the source log's session id, when known.
	SourceSession string `json:"sourceSession,omitempty"`
}

// ForkResult is what a fork wrote.
type ForkResult struct {
	Dir      string   `json:"dir"`
	Source   string   `json:"source"`
	Sequence Seq      `json:"sequence"`
	Files    int      `json:"files"`
	Dirs     int      `json:"dirs"`
	Symlinks int      `json:"symlinks"`
	Bytes    int64    `json:"bytes"`
	Cloned   int      `json:"cloned"` // files reflinked (FICLONE) rather than copied
	Skipped  []string `json:"skipped"`
}

// ErrForkTarget: the fork's directory exists already or lies inside the
// workspace.
var ErrForkTarget = errors.New("rewind: bad fork directory")

// Fork writes the workspace's state at t into dir, a new directory (its
// parent must exist), with a store of its own in dir/.zero whose first
// event records source (the workspace's path) and t. File contents are
// reflinked from the blob store or the workspace where the filesystem can,
// copied elsewhere. Changes wait while it runs, so the copy is one state.
func (e *Engine) Fork(ctx context.Context, t Seq, dir, source string) (ForkResult, error) {
	e.wsMu.Lock()
	defer e.wsMu.Unlock()
	if err := e.checkSeq(t); err != nil {
		return ForkResult{}, err
	}
	root, err := e.stateAt("", t, ^Seq(0))
	if err != nil {
		return ForkResult{}, err
	}
	w, err := newForkWriter(dir, source, t)
	if err != nil {
		return ForkResult{}, err
	}
	var walk func(rel string) error
	walk = func(rel string) error {
		ents, err := e.readDirAt(rel, t, ^Seq(0))
		if err != nil {
			return err
		}
		for _, de := range ents {
			p := index.JoinPath(rel, de.Name)
			st := de.Entry.State
			switch {
			case st.Skipped:
				w.res.Skipped = append(w.res.Skipped, p)
			case st.Kind == KindDir:
				if err := w.mkdir(p, copyMode(st)); err != nil {
					return err
				}
				if err := walk(p); err != nil {
					return err
				}
			case st.Kind == KindSymlink:
				target, err := e.ReadLink(de.Entry)
				if err != nil {
					return err
				}
				if err := w.symlink(p, target); err != nil {
					return err
				}
			case st.Kind == KindFile:
				f, err := e.OpenContent(de.Entry)
				if err != nil {
					return err
				}
				err = w.file(p, f, copyMode(st))
				f.Close()
				if err != nil {
					return err
				}
			}
		}
		return nil
	}
	if err := walk(""); err != nil {
		return w.abort(err)
	}
	return w.finish(ctx, copyMode(root.State), e.log.SessionID())
}

// ForkDir forks from a directory that shows a past state (a mount's @T/,
// read with the caller's own permissions): the same result as Fork, made
// by copying, since a FUSE file cannot be reflinked.
func ForkDir(ctx context.Context, from string, t Seq, dir, source string) (ForkResult, error) {
	fi, err := os.Lstat(from)
	if err != nil {
		return ForkResult{}, fmt.Errorf("rewind: fork: %w", err)
	}
	w, err := newForkWriter(dir, source, t)
	if err != nil {
		return ForkResult{}, err
	}
	var walk func(rel string) error
	walk = func(rel string) error {
		ents, err := os.ReadDir(filepath.Join(from, rel))
		if err != nil {
			return fmt.Errorf("rewind: fork: %w", err)
		}
		for _, de := range ents {
			if rel == "" && IsReserved(de.Name()) {
				continue
			}
			p := index.JoinPath(rel, de.Name())
			abs := filepath.Join(from, p)
			fi, err := os.Lstat(abs)
			if err != nil {
				return fmt.Errorf("rewind: fork: %w", err)
			}
			mode := copyMode(shownState(fi))
			switch {
			case fi.IsDir():
				if err := w.mkdir(p, mode); err != nil {
					return err
				}
				if err := walk(p); err != nil {
					return err
				}
			case fi.Mode()&os.ModeSymlink != 0:
				target, err := os.Readlink(abs)
				if err != nil {
					return fmt.Errorf("rewind: fork: %w", err)
				}
				if err := w.symlink(p, target); err != nil {
					return err
				}
			case fi.Mode().IsRegular():
				f, err := os.Open(abs)
				if err != nil {
					return fmt.Errorf("rewind: fork: %w", err)
				}
				err = w.file(p, f, mode)
				f.Close()
				if err != nil {
					return err
				}
			default:
				w.res.Skipped = append(w.res.Skipped, p)
			}
		}
		return nil
	}
	if err := walk(""); err != nil {
		return w.abort(err)
	}
	return w.finish(ctx, copyMode(shownState(fi)), "")
}

// modeBits is the setuid, setgid and sticky bits of m as permission bits.
func modeBits(m os.FileMode) uint32 {
	var x uint32
	if m&os.ModeSetuid != 0 {
		x |= unix.S_ISUID
	}
	if m&os.ModeSetgid != 0 {
		x |= unix.S_ISGID
	}
	if m&os.ModeSticky != 0 {
		x |= unix.S_ISVTX
	}
	return x
}

// forkWriter writes a fork's tree under its new directory. Directories are
// made 0700 and get their mode at the end, deepest first, so one that
// forbids writing still gets its children.
type forkWriter struct {
	dir  string
	res  ForkResult
	dirs []dirMode
}

type dirMode struct {
	path string
	mode uint32
}

func newForkWriter(dir, source string, t Seq) (*forkWriter, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("rewind: fork: %w", err)
	}
	if src, err := filepath.Abs(source); err == nil && (abs == src || strings.HasPrefix(abs, src+"/")) {
		return nil, fmt.Errorf("%w: %s is inside the workspace %s", ErrForkTarget, abs, src)
	}
	if err := os.Mkdir(abs, 0o700); err != nil {
		if errors.Is(err, os.ErrExist) {
			return nil, fmt.Errorf("%w: %s exists", ErrForkTarget, abs)
		}
		return nil, fmt.Errorf("rewind: fork: %w", err)
	}
	return &forkWriter{dir: abs, res: ForkResult{Dir: abs, Source: source, Sequence: t, Skipped: []string{}}}, nil
}

func (w *forkWriter) path(p string) string { return filepath.Join(w.dir, filepath.FromSlash(p)) }

func (w *forkWriter) mkdir(p string, mode uint32) error {
	if err := os.Mkdir(w.path(p), 0o700); err != nil {
		return fmt.Errorf("rewind: fork: %w", err)
	}
	w.dirs = append(w.dirs, dirMode{p, mode})
	w.res.Dirs++
	return nil
}

func (w *forkWriter) symlink(p, target string) error {
	if err := os.Symlink(target, w.path(p)); err != nil {
		return fmt.Errorf("rewind: fork: %w", err)
	}
	w.res.Symlinks++
	return nil
}

// file writes src at p: a reflink where the filesystem can (src is a
// workspace file, or a loose blob), else a copy (which Go makes with
// copy_file_range where it can).
func (w *forkWriter) file(p string, src Content, mode uint32) error {
	dst, err := os.OpenFile(w.path(p), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fmt.Errorf("rewind: fork: %w", err)
	}
	var n int64
	if sf, ok := src.(*os.File); ok && unix.IoctlFileClone(int(dst.Fd()), int(sf.Fd())) == nil {
		w.res.Cloned++
		if fi, err := dst.Stat(); err == nil {
			n = fi.Size()
		}
	} else {
		var err error
		if sf, ok := src.(*os.File); ok {
			_, err = sf.Seek(0, io.SeekStart)
		}
		if err == nil {
			n, err = io.Copy(dst, src)
		}
		if err != nil {
			dst.Close()
			return fmt.Errorf("rewind: fork %s: %w", p, err)
		}
	}
	if err := dst.Chmod(os.FileMode(mode&0o777) | fileModeBits(mode)); err != nil {
		dst.Close()
		return fmt.Errorf("rewind: fork: %w", err)
	}
	if err := dst.Sync(); err != nil {
		dst.Close()
		return fmt.Errorf("rewind: fork: %w", err)
	}
	if err := dst.Close(); err != nil {
		return fmt.Errorf("rewind: fork: %w", err)
	}
	w.res.Files++
	w.res.Bytes += n
	return nil
}

// fileModeBits turns setuid, setgid and sticky permission bits into an
// os.FileMode.
func fileModeBits(mode uint32) os.FileMode {
	var m os.FileMode
	if mode&unix.S_ISUID != 0 {
		m |= os.ModeSetuid
	}
	if mode&unix.S_ISGID != 0 {
		m |= os.ModeSetgid
	}
	if mode&unix.S_ISVTX != 0 {
		m |= os.ModeSticky
	}
	return m
}

// finish writes the fork's store, then gives the directories their modes
// (deepest first, the root last) and makes the tree durable.
func (w *forkWriter) finish(ctx context.Context, rootMode uint32, session string) (ForkResult, error) {
	store := filepath.Join(w.dir, StoreName)
	if err := os.Mkdir(store, 0o700); err != nil {
		return w.abort(err)
	}
	if err := os.WriteFile(filepath.Join(store, ".gitignore"), []byte("*\n"), 0o600); err != nil {
		return w.abort(err)
	}
	log, err := eventlog.Open(filepath.Join(store, "events.jsonl"), eventlog.Options{Sync: true})
	if err != nil {
		return w.abort(err)
	}
	_, err = log.Append(ctx, TypeForked, ForkPayload{Source: w.res.Source, Sequence: w.res.Sequence, SourceSession: session})
	if err == nil {
		err = log.Sync()
	}
	if cerr := log.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return w.abort(err)
	}
	sort.SliceStable(w.dirs, func(i, j int) bool { return depth(w.dirs[i].path) > depth(w.dirs[j].path) })
	w.dirs = append(w.dirs, dirMode{"", rootMode})
	for _, d := range w.dirs {
		if err := os.Chmod(w.path(d.path), os.FileMode(d.mode&0o777)|fileModeBits(d.mode)); err != nil {
			return w.abort(err)
		}
		if f, err := os.Open(w.path(d.path)); err == nil {
			err = f.Sync()
			f.Close()
			if err != nil {
				return w.abort(err)
			}
		}
	}
	return w.res, nil
}

// abort removes the half-written fork.
func (w *forkWriter) abort(cause error) (ForkResult, error) {
	filepath.WalkDir(w.dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			os.Chmod(p, 0o700)
		}
		return nil
	})
	os.RemoveAll(w.dir)
	return ForkResult{}, fmt.Errorf("rewind: fork into %s: %w", w.dir, cause)
}
