package replicate

import (
	"fmt"
	"io"
	"os"
	"sort"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/zerofs/zerofs/internal/wsdir"
	"github.com/zerofs/zerofs/record"
	"github.com/zerofs/zerofs/rewind"
)

// treeWriter writes a base's tree beneath one directory descriptor (SPEC,
// Trust: the target's parent may belong to someone who swaps the name for
// a symlink at any moment; nothing is ever written through the path).
// Directories are made 0700 and get their mode last, deepest first, so one
// that forbids writing still gets its children. Owners are restored when
// the process may (as root), modification times always.
type treeWriter struct {
	root wsdir.Dir
	dirs []BaseEntry
	res  *RestoreResult
}

func (w *treeWriter) write(e BaseEntry, content io.Reader) error {
	p := e.name()
	switch e.Kind {
	case "dir":
		if err := w.root.WithParent(p, func(fd int, name string) error { return unix.Mkdirat(fd, name, 0o700) }); err != nil {
			return fmt.Errorf("replicate: restore: mkdir %q: %w", p, err)
		}
		w.dirs = append(w.dirs, e)
		w.res.Dirs++
	case "symlink":
		err := w.root.WithParent(p, func(fd int, name string) error {
			if err := unix.Symlinkat(e.target(), fd, name); err != nil {
				return err
			}
			return w.meta(fd, name, e, true)
		})
		if err != nil {
			return fmt.Errorf("replicate: restore: symlink %q: %w", p, err)
		}
		w.res.Symlinks++
	case "file":
		err := w.root.WithParent(p, func(dfd int, name string) error {
			fd, err := unix.Openat(dfd, name, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
			if err != nil {
				return err
			}
			f := os.NewFile(uintptr(fd), p)
			n, err := io.Copy(f, content)
			if err == nil {
				err = w.meta(dfd, name, e, false)
			}
			if err == nil {
				err = w.xattrs(fd, e)
			}
			if err == nil {
				err = f.Sync()
			}
			if cerr := f.Close(); err == nil {
				err = cerr
			}
			w.res.Bytes += n
			return err
		})
		if err != nil {
			return fmt.Errorf("replicate: restore: %q: %w", p, err)
		}
		w.res.Files++
	}
	return nil
}

// meta gives name in dfd e's owner (as root), mode and modification time.
func (w *treeWriter) meta(dfd int, name string, e BaseEntry, link bool) error {
	if e.UID != nil && e.GID != nil && os.Geteuid() == 0 {
		if err := unix.Fchownat(dfd, name, int(*e.UID), int(*e.GID), unix.AT_SYMLINK_NOFOLLOW); err != nil {
			return err
		}
	}
	if !link {
		// After the chown, which clears setuid and setgid bits.
		if err := unix.Fchmodat(dfd, name, e.Mode&0o7777, 0); err != nil {
			return err
		}
	}
	if e.MTime != nil {
		ts := []unix.Timespec{{Nsec: unix.UTIME_OMIT}, unix.NsecToTimespec(e.MTime.UnixNano())}
		if err := unix.UtimesNanoAt(dfd, name, ts, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			return err
		}
	}
	return nil
}

// xattrs gives the file or directory open at fd e's xattrs (after its
// owner and mode: a chown clears a capability), as a rewind would.
func (w *treeWriter) xattrs(fd int, e BaseEntry) error {
	if e.Xattrs == nil {
		return nil
	}
	return rewind.RestoreXattrs(fd, record.FileState{Path: e.name(), Kind: e.Kind, Mode: e.Mode, UID: e.UID, GID: e.GID, Xattrs: e.Xattrs})
}

// finish gives the directories (the root last) their owners, modes and
// times, deepest first, and makes each durable.
func (w *treeWriter) finish(root BaseEntry) error {
	sort.SliceStable(w.dirs, func(i, j int) bool {
		return strings.Count(w.dirs[i].name(), "/") > strings.Count(w.dirs[j].name(), "/")
	})
	for _, d := range append(w.dirs, root) {
		p := d.name()
		fd, err := w.root.Open(p, unix.O_RDONLY|unix.O_DIRECTORY)
		if err == nil {
			err = w.meta(fd, ".", d, false)
			if err == nil {
				err = w.xattrs(fd, d)
			}
			if err == nil {
				err = unix.Fsync(fd)
			}
			unix.Close(fd)
		}
		if err != nil {
			return fmt.Errorf("replicate: restore: directory %q: %w", p, err)
		}
	}
	return nil
}
