package rewind

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/zerofs/zerofs/eventlog"
	"github.com/zerofs/zerofs/internal/ignore"
	"github.com/zerofs/zerofs/internal/quote"
	"github.com/zerofs/zerofs/internal/wsdir"
	"github.com/zerofs/zerofs/record"
	"github.com/zerofs/zerofs/rewind/internal/index"
)

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
	// The tree is listed first (parents before children), so that the
	// Progress hears the total before the copy begins.
	type item struct {
		p   string
		ent Entry
	}
	var items []item
	var bytes int64
	ignored := e.ignoreRules()
	var list func(rel string) error
	list = func(rel string) error {
		ents, err := e.readDirAt(rel, t, ^record.Seq(0))
		if err != nil {
			return err
		}
		for _, de := range ents {
			p := index.JoinPath(rel, de.Name)
			if e.ignored(ignored, p, de.Entry.State.Kind, -1, false) {
				continue // never forked (ignore.go)
			}
			items = append(items, item{p, de.Entry})
			st := de.Entry.State
			switch {
			case st.Skipped:
			case st.Kind == record.KindDir:
				if err := list(p); err != nil {
					return err
				}
			case st.Kind == record.KindFile:
				bytes += st.Bytes
			}
		}
		return nil
	}
	if err := list(""); err != nil {
		return w.abort(err)
	}
	pr := ProgressIn(ctx)
	pr.Begin("fork", int64(len(items)), bytes)
	for _, it := range items {
		if err := e.forkOne(w, it.p, it.ent, pr); err != nil {
			return w.abort(err)
		}
	}
	return w.finish(ctx, copyMode(root.State), root.State, e.log.SessionID())
}

// forkOne writes path p, whose state is ent, into the fork, and tells pr.
func (e *Engine) forkOne(w *forkWriter, p string, ent Entry, pr Progress) error {
	st := ent.State
	switch {
	case st.Skipped:
		w.res.Skipped = append(w.res.Skipped, p)
	case st.Kind == record.KindDir:
		if err := w.mkdir(p, copyMode(st), st); err != nil {
			return err
		}
	case st.Kind == record.KindSymlink:
		target, err := e.ReadLink(ent)
		if err != nil {
			return err
		}
		if err := w.symlink(p, target); err != nil {
			return err
		}
	case st.Kind == record.KindFile:
		f, err := e.OpenContent(ent)
		if err != nil {
			return err
		}
		err = w.file(p, f, copyMode(st), st)
		f.Close()
		if err != nil {
			return err
		}
		pr.Add(1, st.Bytes)
		return nil
	}
	pr.Add(1, 0)
	return nil
}

// ForkDir forks from a directory that shows a past state (a mount's @T/,
// read with the caller's own permissions): the same result as Fork, made
// by copying, since a FUSE file cannot be reflinked. What the .zeroignore
// beside from (the mounted workspace's, as it is now) ignores is left out.
func ForkDir(ctx context.Context, from string, t record.Seq, dir, source string) (ForkResult, error) {
	return ForkDirIgnoring(ctx, from, t, dir, source, loadIgnoreAt(filepath.Dir(filepath.Clean(from))))
}

// ForkDirIgnoring is ForkDir leaving out what rules ignore (the mount's
// own rules, from its status); nil leaves out nothing.
func ForkDirIgnoring(ctx context.Context, from string, t record.Seq, dir, source string, rules *ignore.Matcher) (ForkResult, error) {
	fi, err := os.Lstat(from)
	if err != nil {
		return ForkResult{}, fmt.Errorf("fork: %w", err)
	}
	w, err := newForkWriter(dir, source, t)
	if err != nil {
		return ForkResult{}, err
	}
	// The tree is listed first (parents before children), so that the
	// Progress hears the total before the copy begins.
	type item struct {
		p  string
		fi os.FileInfo
	}
	var items []item
	var bytes int64
	ignored := rules
	var list func(rel string) error
	list = func(rel string) error {
		ents, err := os.ReadDir(filepath.Join(from, rel))
		if err != nil {
			return fmt.Errorf("fork: %w", err)
		}
		for _, de := range ents {
			if rel == "" && record.IsReserved(de.Name()) {
				continue
			}
			p := index.JoinPath(rel, de.Name())
			fi, err := os.Lstat(filepath.Join(from, p))
			if err != nil {
				return fmt.Errorf("fork: %w", err)
			}
			if p != record.IgnoreFile && ignored.Match(p, fi.IsDir()) {
				continue // never forked (ignore.go)
			}
			items = append(items, item{p, fi})
			switch {
			case fi.IsDir():
				if err := list(p); err != nil {
					return err
				}
			case fi.Mode().IsRegular():
				bytes += fi.Size()
			}
		}
		return nil
	}
	if err := list(""); err != nil {
		return w.abort(err)
	}
	pr := ProgressIn(ctx)
	pr.Begin("fork", int64(len(items)), bytes)
	one := func(p string, fi os.FileInfo) error {
		abs := filepath.Join(from, p)
		var err error
		shown := shownState(fi)
		mode := copyMode(shown)
		switch {
		case fi.IsDir():
			if shown.Xattrs, err = viewXattrs(abs); err != nil {
				return err
			}
			if err := w.mkdir(p, mode, shown); err != nil {
				return err
			}
		case fi.Mode()&os.ModeSymlink != 0:
			target, err := os.Readlink(abs)
			if err != nil {
				return fmt.Errorf("fork: %w", err)
			}
			if err := w.symlink(p, target); err != nil {
				return err
			}
		case fi.Mode().IsRegular():
			f, err := os.Open(abs)
			if err != nil {
				return fmt.Errorf("fork: %w", err)
			}
			if shown.Xattrs, err = readXattrs(int(f.Fd())); err != nil {
				f.Close()
				return fmt.Errorf("fork: %q: %w", p, err)
			}
			err = w.file(p, f, mode, shown)
			f.Close()
			if err != nil {
				return err
			}
			pr.Add(1, fi.Size())
			return nil
		default:
			w.res.Skipped = append(w.res.Skipped, p)
		}
		pr.Add(1, 0)
		return nil
	}
	for _, it := range items {
		if err := one(it.p, it.fi); err != nil {
			return w.abort(err)
		}
	}
	rootState := shownState(fi)
	if rootState.Xattrs, err = viewXattrs(from); err != nil {
		return ForkResult{}, err
	}
	return w.finish(ctx, copyMode(rootState), rootState, "")
}

// viewXattrs reads the kept xattrs of a directory a view shows.
func viewXattrs(p string) (map[string][]byte, error) {
	fd, err := unix.Open(p, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("fork: %w", err)
	}
	defer unix.Close(fd)
	xs, err := readXattrs(fd)
	if err != nil {
		return nil, fmt.Errorf("fork: %s: %w", p, err)
	}
	return xs, nil
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
//
// Everything is written beneath one descriptor, root (wsdir.Create): the
// new directory's parent may belong to another user, who can rename the
// directory away or put a symlink to somewhere of theirs (or root's) in
// its place at any moment; the fork then goes on writing into the
// directory it made, never through the path, and nothing lands elsewhere
// (SPEC, Trust).
type forkWriter struct {
	dir  string
	root wsdir.Dir
	res  ForkResult
	dirs []dirMode
}

type dirMode struct {
	path string
	mode uint32
	// want holds the xattrs to give the directory (restoreXattrs).
	want record.FileState
}

func newForkWriter(dir, source string, t record.Seq) (*forkWriter, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("fork: %w", err)
	}
	if src, err := filepath.Abs(source); err == nil && (abs == src || strings.HasPrefix(abs, src+"/")) {
		return nil, &ForkTargetError{Dir: abs, Workspace: src}
	}
	root, err := wsdir.Create(abs)
	if err != nil {
		if errors.Is(err, os.ErrExist) {
			return nil, &ForkTargetError{Dir: abs}
		}
		return nil, fmt.Errorf("fork into %s: %w", quote.Name(abs), err)
	}
	return &forkWriter{dir: abs, root: root, res: ForkResult{Dir: abs, Source: source, Sequence: t, Skipped: []string{}}}, nil
}

func (w *forkWriter) mkdir(p string, mode uint32, want record.FileState) error {
	err := w.root.WithParent(p, func(fd int, name string) error { return unix.Mkdirat(fd, name, 0o700) })
	if err != nil {
		return fmt.Errorf("fork: mkdir %q: %w", p, err)
	}
	w.dirs = append(w.dirs, dirMode{p, mode, want})
	w.res.Dirs++
	return nil
}

func (w *forkWriter) symlink(p, target string) error {
	err := w.root.WithParent(p, func(fd int, name string) error { return unix.Symlinkat(target, fd, name) })
	if err != nil {
		return fmt.Errorf("fork: symlink %q: %w", p, err)
	}
	w.res.Symlinks++
	return nil
}

// create makes the new file p (0600, never following a symlink) beneath
// the fork's root and returns it open for writing.
func (w *forkWriter) create(p string) (*os.File, error) {
	var f *os.File
	err := w.root.WithParent(p, func(fd int, name string) error {
		nfd, err := unix.Openat(fd, name, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
		if err != nil {
			return err
		}
		f = os.NewFile(uintptr(nfd), p)
		return nil
	})
	return f, err
}

// file writes src at p: a reflink where the filesystem can (src is a
// workspace file, or a loose blob), else a copy that leaves blocks of
// zeros as holes (a sparse file stays sparse). It gets want's xattrs as a
// rewind gives them (restoreXattrs): user.*, the ACLs, and a capability
// only as root and when the fork's owner, this process, is the owner it
// was recorded with (the rule copyMode applies to a setuid bit).
func (w *forkWriter) file(p string, src Content, mode uint32, want record.FileState) error {
	dst, err := w.create(p)
	if err != nil {
		return fmt.Errorf("fork: %q: %w", p, err)
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
			n, err = writeSparse(dst, src)
		}
		if err != nil {
			dst.Close()
			return fmt.Errorf("fork: %s: %w", p, err)
		}
	}
	if err := dst.Chmod(os.FileMode(mode&0o777) | fileModeBits(mode)); err != nil {
		dst.Close()
		return fmt.Errorf("fork: %w", err)
	}
	if err := restoreXattrs(int(dst.Fd()), want); err != nil {
		dst.Close()
		return fmt.Errorf("fork: %q: %w", p, err)
	}
	if err := dst.Sync(); err != nil {
		dst.Close()
		return fmt.Errorf("fork: %w", err)
	}
	if err := dst.Close(); err != nil {
		return fmt.Errorf("fork: %w", err)
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
// (deepest first, the root last) and makes the tree durable. The store is
// written through /proc/self/fd of its own directory's descriptor, so the
// event log lands in the directory the fork made whatever its path names
// by now.
func (w *forkWriter) finish(ctx context.Context, rootMode uint32, root record.FileState, session string) (ForkResult, error) {
	if err := unix.Mkdirat(w.root.Fd(), record.StoreName, 0o700); err != nil {
		return w.abort(err)
	}
	sfd, err := w.root.Open(record.StoreName, unix.O_RDONLY|unix.O_DIRECTORY)
	if err != nil {
		return w.abort(err)
	}
	defer unix.Close(sfd)
	store := "/proc/self/fd/" + strconv.Itoa(sfd)
	gfd, err := unix.Openat(sfd, GitignoreName, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return w.abort(err)
	}
	gi := os.NewFile(uintptr(gfd), GitignoreName)
	_, err = gi.WriteString(gitignore)
	if cerr := gi.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return w.abort(err)
	}
	log, err := eventlog.Open(filepath.Join(store, record.LogName), eventlog.Options{Sync: true})
	if err != nil {
		return w.abort(err)
	}
	_, err = log.Append(ctx, record.TypeForked, record.ForkPayload{Source: w.res.Source, Sequence: w.res.Sequence, SourceSession: session})
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
	w.dirs = append(w.dirs, dirMode{"", rootMode, root})
	for _, d := range w.dirs {
		fd, err := w.root.Open(d.path, unix.O_RDONLY|unix.O_DIRECTORY)
		if err != nil {
			return w.abort(err)
		}
		err = unix.Fchmod(fd, d.mode&0o7777)
		if err == nil {
			err = restoreXattrs(fd, d.want)
		}
		if err == nil {
			err = unix.Fsync(fd)
		}
		unix.Close(fd)
		if err != nil {
			return w.abort(err)
		}
	}
	w.root.Close()
	return w.res, nil
}

// abort removes what the fork wrote, beneath its descriptor, and the
// directory itself if its name still names it.
func (w *forkWriter) abort(cause error) (ForkResult, error) {
	wsdir.RemoveBeneath(w.root.Fd())
	var st, at unix.Stat_t
	if unix.Fstat(w.root.Fd(), &st) == nil && unix.Lstat(w.dir, &at) == nil && st.Dev == at.Dev && st.Ino == at.Ino {
		unix.Rmdir(w.dir)
	}
	w.root.Close()
	return ForkResult{}, fmt.Errorf("fork into %s: %w", quote.Name(w.dir), cause)
}
