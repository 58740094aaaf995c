package daemon

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/zerofs/zerofs/control"
	zfs "github.com/zerofs/zerofs/fs"
	"github.com/zerofs/zerofs/internal/proc"
)

// A killed daemon that was waiting on its own mount (a descriptor of a
// file of it closed on the way out, a lookup through it) never finishes
// exiting: its thread waits for an answer only the dead daemon could give,
// and the mount does not answer anyone either. It is neither alive nor
// dead (ENOTCONN) until its connection is aborted through fusectl. `zerofs
// mount` does that when the mount it would replace does not answer and
// the daemon its store names is gone; a daemon that still runs is left
// alone (a slow one is not a dead one).

// hungWait is how long a mount may take to answer statfs before its
// daemon is looked for.
var hungWait = time.Second

// probeOrAbort asks the FUSE mount at p whether it is alive: statfs
// (never answered from the kernel's caches) succeeds on a live mount and
// fails with ENOTCONN (or ECONNABORTED, when the daemon died while the
// request waited) on a dead one. A zerofs mount (device minor) at p that
// does not answer within hungWait, whose daemon (named by the store's
// daemon.pid) is gone, has its connection aborted and counts as dead. One
// whose daemon runs, or names none, is waited for up to probeTimeout; a
// mount that does not answer by then is an error: it is neither, and
// nothing should be stacked on it.
func probeOrAbort(stderr io.Writer, p string, minor int, store string) (alive bool, err error) {
	done := make(chan error, 1)
	go func() {
		var st unix.Statfs_t
		done <- unix.Statfs(p, &st)
	}()
	answered := func(err error) bool {
		return !errors.Is(err, unix.ENOTCONN) && !errors.Is(err, unix.ECONNABORTED)
	}
	select {
	case err := <-done:
		return answered(err), nil
	case <-time.After(hungWait):
	}
	if pid, gone := daemonGone(p, store); gone {
		if err := zfs.AbortConnection(uint32(minor)); err != nil {
			return false, fmt.Errorf("%s: the mount of a killed zerofs (pid %d) hangs, and aborting its connection failed: %w", p, pid, err)
		}
		fmt.Fprintf(stderr, "zerofs: %s: the mount of a killed zerofs (pid %d) did not answer; aborted its connection\n", p, pid)
		select {
		case <-done:
		case <-time.After(probeTimeout):
			return false, fmt.Errorf("the FUSE mount at %s does not answer after its connection was aborted", p)
		}
		return false, nil
	}
	select {
	case err := <-done:
		return answered(err), nil
	case <-time.After(probeTimeout - hungWait):
		return false, fmt.Errorf("the FUSE mount at %s does not answer (a hung daemon?)", p)
	}
}

// daemonGone reads the store's daemon.pid beneath any mount at p (so that
// a hung mount over the store is never asked) and reports whether the
// process it names is gone (exited, a zombie, or a process that started
// since). No pid file, or one that cannot be read: not gone (unknown).
func daemonGone(p, store string) (pid int, gone bool) {
	b, err := readBeneath(p, filepath.Join(store, control.PIDFileName))
	if err != nil {
		return 0, false
	}
	pid, start, err := control.ParsePIDFile(b)
	if err != nil {
		return 0, false
	}
	return pid, !proc.Same(pid, start)
}

// readBeneath reads file name, which may lie under the mount point p:
// then through a copy of the mount p's parent is on, without the mounts
// over it (open_tree OPEN_TREE_CLONE without AT_RECURSIVE), so that no
// lookup reaches the mount at p; no symlink is followed there. Elsewhere
// it reads name as it is, but not through a symlink at its end.
func readBeneath(p, name string) ([]byte, error) {
	rel, err := filepath.Rel(p, name)
	if err != nil || rel == ".." || strings.HasPrefix(rel, "../") {
		f, err := os.OpenFile(name, os.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		return io.ReadAll(io.LimitReader(f, 4096))
	}
	parent := filepath.Dir(p)
	if parent == p {
		return nil, fmt.Errorf("%s is the root", p)
	}
	tree, err := unix.OpenTree(unix.AT_FDCWD, parent, unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("open_tree %s: %w", parent, err)
	}
	defer unix.Close(tree)
	fd, err := unix.Openat2(tree, filepath.Join(filepath.Base(p), rel), &unix.OpenHow{
		Flags:   unix.O_RDONLY | unix.O_CLOEXEC | unix.O_NONBLOCK,
		Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_XDEV,
	})
	if err != nil {
		return nil, err
	}
	f := os.NewFile(uintptr(fd), name)
	defer f.Close()
	return io.ReadAll(io.LimitReader(f, 4096))
}
