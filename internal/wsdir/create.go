package wsdir

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// ErrReplaced: the directory Create made was swapped for something else
// (a symlink, another user's directory) before it could be opened.
var ErrReplaced = errors.New("wsdir: the new directory was replaced before it was opened")

// afterMkdir runs between Create's mkdir and its open: tests swap the
// directory there.
var afterMkdir = func(path string) {}

// Create makes the new directory path (mode 0700; its parent must exist)
// and returns a Dir rooted at it, whose descriptor (O_RDONLY|O_DIRECTORY)
// the caller closes with Close. Everything the caller then writes beneath
// it goes through that descriptor (Open, WithParent, and the *at calls on
// their results), never through path again: whoever owns the parent may
// rename the new directory away or put a symlink in its place at any
// moment, and nothing is written there.
//
// Between mkdir and open someone who can write the parent can swap the
// name: the open does not follow a symlink (O_NOFOLLOW), and the directory
// opened must be the one made, as far as can be told: a directory owned by
// this process's effective user, mode 0700, empty. Otherwise ErrReplaced.
// It is what fork (and a restore from a replica) write a new tree under.
func Create(path string) (Dir, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return Dir{fd: -1}, err
	}
	parent, name := filepath.Split(abs)
	if name == "" || name == "." || name == ".." {
		return Dir{fd: -1}, fmt.Errorf("wsdir: create %s: not a new directory's name", path)
	}
	pfd, err := unix.Open(parent, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return Dir{fd: -1}, &os.PathError{Op: "open", Path: parent, Err: err}
	}
	defer unix.Close(pfd)
	if err := unix.Mkdirat(pfd, name, 0o700); err != nil {
		return Dir{fd: -1}, &os.PathError{Op: "mkdir", Path: abs, Err: err}
	}
	afterMkdir(abs)
	fd, err := unix.Openat(pfd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return Dir{fd: -1}, fmt.Errorf("%w: %s: %v", ErrReplaced, abs, err)
	}
	if err := checkFresh(fd); err != nil {
		unix.Close(fd)
		return Dir{fd: -1}, fmt.Errorf("%w: %s: %v", ErrReplaced, abs, err)
	}
	return Dir{fd: fd}, nil
}

// checkFresh reports why fd is not a directory this process just made:
// it must be this process's user's, closed to group and others (mkdir's
// 0700 under any umask), and empty.
func checkFresh(fd int) error {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR || st.Uid != uint32(os.Geteuid()) || st.Mode&0o7077 != 0 {
		return fmt.Errorf("a directory of uid %d, mode %#o, is in its place", st.Uid, st.Mode&0o7777)
	}
	dup, err := unix.Dup(fd)
	if err != nil {
		return err
	}
	f := os.NewFile(uintptr(dup), "new directory")
	defer f.Close()
	names, err := f.Readdirnames(1)
	if len(names) > 0 {
		return errors.New("it is not empty")
	}
	if err != nil && err != io.EOF {
		return err
	}
	return nil
}

// Close closes a Dir made by Create.
func (d Dir) Close() error {
	if d.fd < 0 {
		return nil
	}
	return unix.Close(d.fd)
}
