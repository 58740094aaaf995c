package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/moby/sys/mountinfo"
	"golang.org/x/sys/unix"

	"github.com/zerofs/zerofs/control"
	zfs "github.com/zerofs/zerofs/fs"
	"github.com/zerofs/zerofs/history"
)

var umountCmd = &command{
	name:    "umount",
	usage:   "umount [MOUNTPOINT]",
	summary: "flush, unmount, wait for the daemon to exit",
	help: `Asks the daemon serving MOUNTPOINT (default: the mounted workspace around
the current directory) to unmount, and waits until it has exited and its
mount is gone. A dead mount (its daemon killed) at MOUNTPOINT is detached,
and a live zerofs mount under it, or over it, is unmounted too: umount
succeeds only once no zerofs mount, live or dead, is left there.
`,
	run: runUmount,
}

// umountTimeout bounds the wait for the daemon: it flushes and unmounts,
// retrying while the mount is busy, then detaches.
var umountTimeout = 30 * time.Second

// probeTimeout bounds how long a FUSE mount may take to answer statfs
// before it counts as hung (neither alive nor dead).
var probeTimeout = 10 * time.Second

func runUmount(e *env, c *command, args []string) error {
	pos, rest, err := parseArgs(c, newFlags(c), args)
	if err != nil {
		return err
	}
	pos = append(pos, rest...)
	var mp string
	switch len(pos) {
	case 0:
		ws, err := history.Find(e.cwd)
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
	leaveMount(mp)
	// Mounts may be stacked at mp (a dead one over a live one, or the
	// reverse): take them off from the top, each the way it needs, and
	// stop at the first that is not zerofs's.
	did := false
	for range 16 {
		ms, err := fuseMountsAt(mp)
		if err != nil {
			return err
		}
		if len(ms) == 0 {
			break
		}
		top := topmost(ms)
		if st, ok := history.ReadStatus(mp); ok {
			if err := unmountLive(e, mp, top, st); err != nil {
				return err
			}
			did = true
			continue
		}
		switch alive, err := probeMount(mp); {
		case err != nil:
			return err
		case alive || top.fstype != zerofsType:
			if !did {
				return fmt.Errorf("%s is not a zerofs mount", mp)
			}
			return nil // another filesystem's mount, under ours: not ours to take
		}
		if err := zfs.Detach(mp); err != nil {
			return fmt.Errorf("%s: its daemon is gone and detaching the dead mount failed: %w", mp, err)
		}
		fmt.Fprintf(e.stderr, "zerofs: the daemon of the mount at %s was gone; detached the dead mount\n", mp)
		did = true
	}
	if !did {
		return fmt.Errorf("%s is not a zerofs mount", mp)
	}
	if ms, err := fuseMountsAt(mp); err != nil {
		return err
	} else if len(ms) > 0 && topmost(ms).fstype == zerofsType {
		return fmt.Errorf("%s is still mounted", mp)
	}
	return nil
}

// unmountLive asks the daemon st (serving mount m at mp) to unmount, and
// waits until it has exited and m is gone from the mount table, detaching m
// if the daemon exited without unmounting it.
func unmountLive(e *env, mp string, m mountEntry, st control.StatusReport) error {
	if err := unix.Kill(st.PID, unix.SIGTERM); err != nil && err != unix.ESRCH {
		return fmt.Errorf("signal zerofs (pid %d): %w", st.PID, err)
	}
	deadline := time.Now().Add(umountTimeout)
	for {
		alive := history.ProcessAlive(st.PID)
		present, err := mountPresent(m.id)
		if err != nil {
			return err
		}
		switch {
		case !alive && !present:
			return nil
		case !alive:
			if top, err := fuseMountsAt(mp); err == nil && len(top) > 0 && topmost(top).id == m.id {
				if err := zfs.Detach(mp); err != nil {
					return fmt.Errorf("zerofs (pid %d) exited but left %s mounted, and detaching it failed: %w", st.PID, mp, err)
				}
				fmt.Fprintf(e.stderr, "zerofs: the daemon (pid %d) exited without unmounting; detached %s\n", st.PID, mp)
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("zerofs (pid %d) has not unmounted %s after %v (is a process still using it? see its daemon.log)", st.PID, mp, umountTimeout)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// probeMount asks the FUSE mount at p whether it is alive: statfs (never
// answered from the kernel's caches) succeeds on a live mount and fails
// with ENOTCONN (or ECONNABORTED, when the daemon died while the request
// waited) on a dead one. A mount that does not answer within probeTimeout
// is an error: it is neither, and nothing should be stacked on it.
func probeMount(p string) (alive bool, err error) {
	done := make(chan error, 1)
	go func() {
		var st unix.Statfs_t
		done <- unix.Statfs(p, &st)
	}()
	select {
	case err := <-done:
		switch {
		case err == nil:
			return true, nil
		case errors.Is(err, unix.ENOTCONN), errors.Is(err, unix.ECONNABORTED):
			return false, nil
		}
		return true, nil // it answered, with an error of its own
	case <-time.After(probeTimeout):
		return false, fmt.Errorf("the FUSE mount at %s does not answer (a hung daemon?)", p)
	}
}

// mountEntry is one line of /proc/self/mountinfo.
type mountEntry struct {
	id, parent int
	fstype     string
}

// zerofsType is the filesystem type of zerofs's mounts in mountinfo.
const zerofsType = "fuse.zerofs"

// fuseMountsAt lists the FUSE mounts whose mount point is dir, in mount
// order (from /proc/self/mountinfo, which never blocks on a dead daemon).
func fuseMountsAt(dir string) ([]mountEntry, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	infos, err := mountinfo.GetMounts(func(m *mountinfo.Info) (skip, stop bool) {
		return m.Mountpoint != abs || (m.FSType != "fuse" && !strings.HasPrefix(m.FSType, "fuse.")), false
	})
	out := make([]mountEntry, len(infos))
	for i, m := range infos {
		out[i] = mountEntry{id: m.ID, parent: m.Parent, fstype: m.FSType}
	}
	return out, err
}

// mountPresent reports whether the mount with this id still exists.
func mountPresent(id int) (bool, error) {
	infos, err := mountinfo.GetMounts(func(m *mountinfo.Info) (skip, stop bool) {
		return m.ID != id, m.ID == id
	})
	return len(infos) > 0, err
}

// topmost is the mount of ms (all at one mount point) that no other of ms
// is mounted over: the one a path lookup reaches.
func topmost(ms []mountEntry) mountEntry {
	under := map[int]bool{}
	for _, m := range ms {
		under[m.parent] = true
	}
	for i := len(ms) - 1; i >= 0; i-- {
		if !under[ms[i].id] {
			return ms[i]
		}
	}
	return ms[len(ms)-1]
}

// leaveMount moves this process out of mp when its working directory is
// inside it ("zerofs umount ." from the workspace): otherwise the umount
// itself keeps the mount busy and waits on a daemon that waits on it.
func leaveMount(mp string) {
	if wd, err := os.Getwd(); err == nil && (wd == mp || strings.HasPrefix(wd, mp+"/")) {
		os.Chdir("/")
	}
}
