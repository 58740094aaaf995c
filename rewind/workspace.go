package rewind

import (
	"errors"
	"fmt"
	"io"
	"os"

	"golang.org/x/sys/unix"

	"github.com/zerofs/zerofs/internal/wsdir"
	"github.com/zerofs/zerofs/record"
	"github.com/zerofs/zerofs/rewind/internal/index"
)

// workspace reaches the workspace's files only through the root's directory
// descriptor, resolved by wsdir: confined beneath the root, refusing every
// symlink on the way, crossing mount points below the root, and in chunks,
// so no path reaches PATH_MAX. The final component is then used with *at
// calls that do not follow it. Nothing here can be led outside the
// workspace by a planted symlink.
type workspace struct {
	root *os.File
}

// dir is the root's resolver.
func (w *workspace) dir() wsdir.Dir { return wsdir.New(int(w.root.Fd())) }

// withParent opens p's parent directory and calls fn with it and p's name.
// A parent that is a symlink fails with ELOOP, one that is not a directory
// with ENOTDIR.
func (w *workspace) withParent(p string, fn func(dirfd int, name string) error) error {
	if p == "" {
		return fmt.Errorf("%w: the workspace root itself", record.ErrUnsafePath)
	}
	return unsafePath(w.dir().WithParent(p, fn))
}

// open opens workspace path p with flags, never through a symlink.
func (w *workspace) open(p string, flags int) (*os.File, error) {
	fd, err := w.dir().Open(p, flags)
	if err != nil {
		return nil, unsafePath(err)
	}
	name := p
	if name == "" {
		name = "."
	}
	return os.NewFile(uintptr(fd), name), nil
}

// unsafePath adds ErrUnsafePath to wsdir's refusal of an unclean path.
func unsafePath(err error) error {
	if errors.Is(err, wsdir.ErrUnclean) {
		return fmt.Errorf("%w: %w", record.ErrUnsafePath, err)
	}
	return err
}

// lstat stats p without following a final symlink. The root ("") is
// stat'ed through its own descriptor.
func (w *workspace) lstat(p string) (unix.Stat_t, error) {
	var st unix.Stat_t
	if p == "" {
		err := unix.Fstat(int(w.root.Fd()), &st)
		return st, err
	}
	err := w.withParent(p, func(fd int, name string) error {
		return unix.Fstatat(fd, name, &st, unix.AT_SYMLINK_NOFOLLOW)
	})
	return st, err
}

// isMissing reports whether err means "nothing there": the path, or a
// parent, does not exist, is not a directory, or is a symlink we refuse to
// cross (a path beyond a symlink does not exist inside the workspace).
// Nothing else is: a path on a filesystem mounted below the root exists.
func isMissing(err error) bool {
	return errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENOTDIR) || errors.Is(err, unix.ELOOP)
}

// openFile opens regular file p read-only, never following a symlink.
func (w *workspace) openFile(p string) (*os.File, error) {
	return w.open(p, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK)
}

// openDirRead opens directory p for reading its entries.
func (w *workspace) openDirRead(p string) (*os.File, error) {
	return w.open(p, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW)
}

// readDirNames lists directory p's names (without "." and "..").
func (w *workspace) readDirNames(p string) ([]string, error) {
	f, err := w.openDirRead(p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return f.Readdirnames(-1)
}

// readlink reads symlink p's target.
func (w *workspace) readlink(p string) (string, error) {
	var target string
	err := w.withParent(p, func(fd int, name string) error {
		buf := make([]byte, 4096)
		for {
			n, err := unix.Readlinkat(fd, name, buf)
			if err != nil {
				return err
			}
			if n < len(buf) {
				target = string(buf[:n])
				return nil
			}
			buf = make([]byte, 2*len(buf))
		}
	})
	return target, err
}

// remove deletes p: a file or symlink, or a directory with everything under
// it (children first). Missing is not an error.
func (w *workspace) remove(p string) error {
	st, err := w.lstat(p)
	if isMissing(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if st.Mode&unix.S_IFMT == unix.S_IFDIR {
		names, err := w.readDirNames(p)
		if err != nil {
			return err
		}
		for _, n := range names {
			if err := w.remove(index.JoinPath(p, n)); err != nil {
				return err
			}
		}
		return w.withParent(p, func(fd int, name string) error {
			return unix.Unlinkat(fd, name, unix.AT_REMOVEDIR)
		})
	}
	return w.withParent(p, func(fd int, name string) error {
		return unix.Unlinkat(fd, name, 0)
	})
}

// mkdir creates directory p with mode 0700 (the final mode is set once its
// children are in place, in case it forbids writing).
func (w *workspace) mkdir(p string) error {
	return w.withParent(p, func(fd int, name string) error {
		return unix.Mkdirat(fd, name, 0o700)
	})
}

// chmod sets p's permission bits, never following a symlink.
func (w *workspace) chmod(p string, mode uint32) error {
	if p == "" {
		return unix.Fchmod(int(w.root.Fd()), mode&0o7777)
	}
	return w.withParent(p, func(fd int, name string) error {
		nfd, err := unix.Openat(fd, name, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			return err
		}
		defer unix.Close(nfd)
		var st unix.Stat_t
		if err := unix.Fstat(nfd, &st); err != nil {
			return err
		}
		if st.Mode&unix.S_IFMT == unix.S_IFLNK {
			return nil // symlinks have no mode of their own on Linux
		}
		// An O_PATH descriptor cannot be fchmod'ed; its /proc link can.
		return unix.Chmod(fmt.Sprintf("/proc/self/fd/%d", nfd), mode&0o7777)
	})
}

// withNode calls fn with an O_PATH descriptor of p itself (a symlink is
// not followed).
func (w *workspace) withNode(p string, fn func(fd int) error) error {
	f, err := w.open(p, unix.O_PATH|unix.O_NOFOLLOW)
	if err != nil {
		return err
	}
	defer f.Close()
	return fn(int(f.Fd()))
}

// writeFile replaces p with the content from r, atomically: a temporary
// file beside it (0600 until finish gives it its owner, mode and times),
// written sparsely (blocks of zeros stay holes), fsynced, renamed over p.
func (w *workspace) writeFile(p string, r io.Reader, finish func(dirfd, fd int) error) error {
	return w.withParent(p, func(fd int, name string) error {
		tmp := tempName(name)
		nfd, err := unix.Openat(fd, tmp, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
		if err != nil {
			return err
		}
		f := os.NewFile(uintptr(nfd), tmp)
		_, err = writeSparse(f, r)
		if err == nil {
			err = finish(fd, nfd)
		}
		if err == nil {
			err = f.Sync()
		}
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err == nil {
			err = unix.Renameat(fd, tmp, fd, name)
		}
		if err != nil {
			unix.Unlinkat(fd, tmp, 0)
		}
		return err
	})
}

// symlink replaces p with a symlink to target, atomically; finish gives
// it its owner and times under its temporary name.
func (w *workspace) symlink(p, target string, finish func(dirfd int, tmp string) error) error {
	return w.withParent(p, func(fd int, name string) error {
		tmp := tempName(name)
		if err := unix.Symlinkat(target, fd, tmp); err != nil {
			return err
		}
		err := finish(fd, tmp)
		if err == nil {
			err = unix.Renameat(fd, tmp, fd, name)
		}
		if err != nil {
			unix.Unlinkat(fd, tmp, 0)
			return err
		}
		return nil
	})
}

// syncDir fsyncs directory p.
func (w *workspace) syncDir(p string) error {
	f, err := w.openDirRead(p)
	if err != nil {
		return err
	}
	defer f.Close()
	return f.Sync()
}
