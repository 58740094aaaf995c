package daemon

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"

	zfs "github.com/zerofs/zerofs/fs"
	"github.com/zerofs/zerofs/record"
	"github.com/zerofs/zerofs/rewind"
)

// daemonLogName is the daemon's log in its store.
const daemonLogName = "daemon.log"

// openStoreDir opens the store directory of a mount (making it if
// missing): the default store (.zero) beneath the workspace's descriptor,
// never through a symlink (the workspace's owner may plant one); a store
// named with --store as named.
func openStoreDir(opts zfs.Options, store string) (*os.File, error) {
	if opts.StoreDir != "" {
		if err := os.MkdirAll(store, 0o700); err != nil {
			return nil, err
		}
		return os.OpenFile(store, os.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	}
	ws, err := os.OpenFile(opts.Workspace, os.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	defer ws.Close()
	d, err := zfs.OpenStoreBeneath(ws, record.StoreName)
	if err != nil {
		return nil, fmt.Errorf("store %s: %w", store, err)
	}
	return d, nil
}

// openDaemonLog opens daemon.log in the store dir for appending (and
// reading back what the daemon's helpers said), beneath the store's
// descriptor and never through a symlink: it must be a regular file of
// the user's own with no other name, or the mount is refused rather than
// write where someone else chose. name is its path, for errors.
func openDaemonLog(dir *os.File, name string) (*os.File, error) {
	fd, err := unix.Openat(int(dir.Fd()), daemonLogName, unix.O_RDWR|unix.O_APPEND|unix.O_CREAT|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0o600)
	if errors.Is(err, unix.ELOOP) {
		return nil, fmt.Errorf("%w: %s is a symlink (nothing in a store is reached through one)", rewind.ErrUntrustedStore, name)
	}
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", name, err)
	}
	var st unix.Stat_t
	if err = unix.Fstat(fd, &st); err == nil {
		switch {
		case st.Mode&unix.S_IFMT != unix.S_IFREG:
			err = fmt.Errorf("%w: %s is not a regular file", rewind.ErrUntrustedStore, name)
		case st.Uid != uint32(os.Geteuid()):
			err = fmt.Errorf("%w: %s belongs to uid %d, not to uid %d who opens it", rewind.ErrUntrustedStore, name, st.Uid, os.Geteuid())
		case st.Nlink != 1:
			err = fmt.Errorf("%w: %s has %d names (a hard link to a file elsewhere?)", rewind.ErrUntrustedStore, name, st.Nlink)
		default:
			// Blocking again: the daemon writes its log through it.
			err = unix.SetNonblock(fd, false)
		}
	}
	if err != nil {
		unix.Close(fd)
		return nil, err
	}
	return os.NewFile(uintptr(fd), name), nil
}

// LogPath is where the daemon's log can be read now: STORE/daemon.log, or,
// while the mount (at mountpoint, served by daemon pid; 0 when unmounted)
// hides the store beneath it (an in-place mount), the daemon's own
// descriptor of that file, /proc/PID/fd/2 (hidden is then true): the
// daemon's stderr is its log when `zerofs mount` started it, and only its
// user and root may open it. "" when there is no log to point at (a
// foreground daemon logs to its terminal).
func LogPath(store, mountpoint string, pid int) (path string, hidden bool) {
	log := filepath.Join(store, daemonLogName)
	under := mountpoint != "" && (store == mountpoint || strings.HasPrefix(store, mountpoint+"/"))
	if pid <= 0 || !under {
		if _, err := os.Lstat(log); err != nil {
			return "", false
		}
		return log, false
	}
	fd := fmt.Sprintf("/proc/%d/fd/2", pid)
	if target, err := os.Readlink(fd); err != nil || target != log {
		return "", true
	}
	return fd, true
}
