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
	"github.com/zerofs/zerofs/internal/quote"
	"github.com/zerofs/zerofs/internal/wsdir"
	"github.com/zerofs/zerofs/record"
)

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
