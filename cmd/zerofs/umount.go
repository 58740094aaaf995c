package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	zfs "github.com/zerofs/zerofs/fs"
)

var umountCmd = &command{
	name:    "umount",
	usage:   "umount [MOUNTPOINT]",
	summary: "flush, unmount, wait for the daemon to exit",
	help: `Asks the daemon serving MOUNTPOINT (default: the mounted workspace around
the current directory) to unmount, and waits until it has exited and the
mount is gone. If the daemon died and left a dead mount behind, the mount is
detached.
`,
	run: runUmount,
}

// umountTimeout bounds the wait for the daemon: it flushes and unmounts,
// retrying while the mount is busy, then detaches.
var umountTimeout = 30 * time.Second

func runUmount(e *env, c *command, args []string) error {
	pos, rest, err := parseArgs(c, newFlags(c), args)
	if err != nil {
		return err
	}
	pos = append(pos, rest...)
	var mp string
	switch len(pos) {
	case 0:
		ws, err := findWorkspace(e.cwd)
		if err != nil {
			return err
		}
		if !ws.Mounted {
			return fmt.Errorf("%s is not mounted", ws.Root)
		}
		mp = ws.Status.Mountpoint
	case 1:
		mp = pos[0]
		if !filepath.IsAbs(mp) {
			mp = filepath.Join(e.cwd, mp)
		}
		mp = filepath.Clean(mp)
	default:
		return usagef(c, "want one MOUNTPOINT")
	}
	st, ok := readStatus(mp)
	if !ok {
		mounted, err := fuseMounted(mp)
		if err != nil {
			return err
		}
		if !mounted {
			return fmt.Errorf("%s is not a zerofs mount", mp)
		}
		// A FUSE mount without a daemon answering: detach it.
		if err := zfs.Detach(mp); err != nil {
			return fmt.Errorf("%s: its daemon is gone and detaching the dead mount failed: %w", mp, err)
		}
		fmt.Fprintf(e.stderr, "zerofs: the daemon of %s was gone; detached the dead mount\n", mp)
		return nil
	}
	if st.Mountpoint != "" {
		mp = st.Mountpoint
	}
	leaveMount(mp)
	if err := unix.Kill(st.PID, unix.SIGTERM); err != nil && err != unix.ESRCH {
		return fmt.Errorf("signal zerofs (pid %d): %w", st.PID, err)
	}
	deadline := time.Now().Add(umountTimeout)
	for {
		alive := pidAlive(st.PID)
		mounted, err := fuseMounted(mp)
		if err != nil {
			return err
		}
		switch {
		case !alive && !mounted:
			return nil
		case !alive:
			if err := zfs.Detach(mp); err != nil {
				return fmt.Errorf("zerofs (pid %d) exited but left %s mounted, and detaching it failed: %w", st.PID, mp, err)
			}
			fmt.Fprintf(e.stderr, "zerofs: the daemon (pid %d) exited without unmounting; detached %s\n", st.PID, mp)
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("zerofs (pid %d) has not unmounted %s after %v (is a process still using it? see its daemon.log)", st.PID, mp, umountTimeout)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// leaveMount moves this process out of mp when its working directory is
// inside it ("zerofs umount ." from the workspace): otherwise the umount
// itself keeps the mount busy and waits on a daemon that waits on it.
func leaveMount(mp string) {
	if wd, err := os.Getwd(); err == nil && (wd == mp || strings.HasPrefix(wd, mp+"/")) {
		os.Chdir("/")
	}
}
