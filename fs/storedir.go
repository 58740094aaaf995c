package fs

import (
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// OpenStoreBeneath opens (making it, 0700, if missing) the store directory
// name beneath the directory dir, without following a symlink: a store
// whose name leads elsewhere is refused (ELOOP, ENOTDIR), not used.
func OpenStoreBeneath(dir *os.File, name string) (*os.File, error) {
	if err := unix.Mkdirat(int(dir.Fd()), name, 0o700); err != nil && !errors.Is(err, unix.EEXIST) {
		return nil, err
	}
	fd, err := unix.Openat(int(dir.Fd()), name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if errors.Is(err, unix.ELOOP) || errors.Is(err, unix.ENOTDIR) {
		return nil, fmt.Errorf("%s is a symlink or not a directory (a store is never reached through a symlink): %w", name, err)
	}
	if err != nil {
		return nil, err
	}
	return os.NewFile(uintptr(fd), name), nil
}
