package daemon

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/moby/sys/mountinfo"
	"golang.org/x/sys/unix"

	"github.com/zerofs/zerofs/control"
	zfs "github.com/zerofs/zerofs/fs"
	"github.com/zerofs/zerofs/internal/proc"
)

// umountTimeout bounds the wait for the daemon: it flushes and unmounts,
// retrying while the mount is busy, then detaches.
var umountTimeout = 30 * time.Second

// exitTimeout bounds the wait for the daemon to exit once its mount is
// gone: it closes the store, after its last replication attempt (which
// finalReplicationTimeout bounds) when it replicates.
var exitTimeout = finalReplicationTimeout + 30*time.Second

// probeTimeout bounds how long a FUSE mount may take to answer statfs
// before it counts as hung (neither alive nor dead).
var probeTimeout = 10 * time.Second

// UnmountOptions is how Unmount goes about it.
type UnmountOptions struct {
	// Stderr takes what the user is told along the way (a dead mount
	// detached, a daemon that exited without unmounting).
	Stderr io.Writer
	// Exited, when set, is called once a live daemon st has unmounted and
	// exited (since: when it was asked to); an error it returns ends
	// Unmount with that error (the replication that daemon left behind).
	Exited func(st control.StatusReport, since time.Time) error
	// Lazy unmounts a live mount that processes hold (Holder) anyway: its
	// daemon detaches it and ends its connection, and they are left in a
	// dead mount. Without it such a mount is refused (*BusyError) and
	// nothing changes.
	Lazy bool
	// Left, when set, is told which of the holders of a mount that Lazy
	// took off still run (they stand in a dead mount now).
	Left func(mp string, left []Holder)
}

// Unmount takes every zerofs mount at mp off: it asks a live daemon to
// unmount and waits until it has exited and its mount is gone, and
// detaches a dead mount (its daemon killed). It succeeds only once no
// zerofs mount, live or dead, is left at mp; a mount there that is not
// zerofs's is an error, and is left alone. A process whose working
// directory is inside mp would hold it busy itself: Unmount moves this
// one to "/" first.
func Unmount(mp string, opts UnmountOptions) error {
	if opts.Stderr == nil {
		opts.Stderr = io.Discard
	}
	leaveMount(mp)
	// Mounts may be stacked at mp (a dead one over a live one, or the
	// reverse): take them off from the top, each the way it needs, and
	// stop at the first that is not zerofs's. Each decision is about the
	// mount a descriptor holds (its mount id from /proc/self/fdinfo), never
	// about whatever the path names a moment later, and a daemon is
	// signalled only while it is the process its status names (pid and
	// start time), through a pidfd.
	did := false
	for range 16 {
		ms, err := fuseMountsAt(mp)
		if err != nil {
			return err
		}
		if len(ms) == 0 {
			break
		}
		top, err := openTop(mp)
		if err != nil {
			return err
		}
		ours, fuse := false, false
		var entry mountEntry
		for _, m := range ms {
			if m.id == top.id {
				fuse, ours, entry = true, m.fstype == zerofsType, m
			}
		}
		if !fuse {
			top.close()
			continue // the table changed under us: look again
		}
		st, answered, alive, err := top.inspect(ours)
		if err != nil {
			top.close()
			return err
		}
		switch {
		case answered:
			// The held descriptor would keep the mount busy: the daemon's
			// unmount must not wait on us.
			top.close()
			// The daemon would detach a busy mount lazily and end its
			// connection, leaving its holders in a dead mount: only when
			// asked. (A process that enters the mount after this look is
			// not seen: then the daemon does so unasked.)
			held, err := holdersOf(entry)
			if err != nil {
				return err
			}
			if len(held) > 0 && !opts.Lazy {
				return &BusyError{Mountpoint: mp, Holders: held}
			}
			since := time.Now()
			err = unmountLive(opts.Stderr, mp, entry, st)
			if err != nil {
				return err
			}
			if len(held) > 0 && opts.Left != nil {
				var left []Holder
				for _, h := range held {
					if h.Running() {
						left = append(left, h)
					}
				}
				opts.Left(mp, left)
			}
			if opts.Exited != nil {
				if err := opts.Exited(st, since); err != nil {
					return err
				}
			}
			did = true
			continue
		case alive || !ours:
			top.close()
			if !did {
				return fmt.Errorf("%s is not a zerofs mount", mp)
			}
			return nil // another filesystem's mount, under ours: not ours to take
		}
		err = top.detach(mp)
		top.close()
		if err != nil {
			return fmt.Errorf("%s: its daemon is gone and detaching the dead mount failed: %w", mp, err)
		}
		fmt.Fprintf(opts.Stderr, "zerofs: the daemon of the mount at %s was gone; detached the dead mount\n", mp)
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

// heldMount is the mount a lookup of its mount point reached, held by an
// O_PATH descriptor of its root: id is that mount's id, whatever is
// mounted or unmounted at the path afterwards.
type heldMount struct {
	fd int
	id int
}

// openTop opens mp as a lookup reaches it now (the topmost mount there)
// and reads which mount that is from /proc/self/fdinfo (which never asks
// the filesystem, so a dead mount answers too).
func openTop(mp string) (heldMount, error) {
	fd, err := unix.Open(mp, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return heldMount{fd: -1}, fmt.Errorf("open %s: %w", mp, err)
	}
	b, err := os.ReadFile("/proc/self/fdinfo/" + strconv.Itoa(fd))
	if err != nil {
		unix.Close(fd)
		return heldMount{fd: -1}, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "mnt_id:"); ok {
			id, err := strconv.Atoi(strings.TrimSpace(v))
			if err == nil {
				return heldMount{fd: fd, id: id}, nil
			}
		}
	}
	unix.Close(fd)
	return heldMount{fd: -1}, fmt.Errorf("%s: no mnt_id in /proc/self/fdinfo", mp)
}

func (m heldMount) close() {
	if m.fd >= 0 {
		unix.Close(m.fd)
	}
}

// inspect asks the held mount who serves it: a zerofs daemon answers its
// control directory's status with its identity (answered), and that
// process must still be the one that started then. Otherwise alive says
// whether the mount answers at all (fstatfs: a dead FUSE mount says
// ENOTCONN). On a live zerofs mount the status read is retried for a while
// before it counts as unanswered: on a loaded machine a new daemon can be
// slow to answer, and mistaking it for another filesystem's mount (or a
// dead one) is what this must never do.
func (m heldMount) inspect(zerofs bool) (st control.StatusReport, answered, alive bool, err error) {
	deadline := time.Now().Add(probeTimeout)
	for {
		st, ok := m.status()
		if ok && proc.Same(st.PID, st.Start) {
			return st, true, true, nil
		}
		alive, err = m.alive()
		if err != nil || !alive || !zerofs || time.Now().After(deadline) {
			if ok && alive {
				return st, false, true, fmt.Errorf("the zerofs mount names its daemon pid %d, which is not running as that daemon", st.PID)
			}
			return st, false, alive, err
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// status reads the control directory's status through the held mount.
func (m heldMount) status() (control.StatusReport, bool) {
	type result struct {
		b   []byte
		err error
	}
	done := make(chan result, 1)
	go func() {
		fd, err := unix.Openat(m.fd, control.Dir+"/"+control.Status, unix.O_RDONLY|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0)
		if err != nil {
			done <- result{nil, err}
			return
		}
		f := os.NewFile(uintptr(fd), control.Status)
		b, err := io.ReadAll(f)
		f.Close()
		done <- result{b, err}
	}()
	select {
	case r := <-done:
		if r.err != nil {
			return control.StatusReport{}, false
		}
		st, err := control.ParseStatus(r.b)
		return st, err == nil
	case <-time.After(probeTimeout):
		return control.StatusReport{}, false
	}
}

// alive asks the held mount whether it answers: fstatfs (never answered
// from the kernel's caches) succeeds on a live mount and fails with
// ENOTCONN (or ECONNABORTED, when the daemon died while the request
// waited) on a dead one. A mount that does not answer within probeTimeout
// is an error: it is neither.
func (m heldMount) alive() (bool, error) {
	done := make(chan error, 1)
	go func() {
		var st unix.Statfs_t
		done <- unix.Fstatfs(m.fd, &st)
	}()
	select {
	case err := <-done:
		if errors.Is(err, unix.ENOTCONN) || errors.Is(err, unix.ECONNABORTED) {
			return false, nil
		}
		return true, nil // answered, maybe with an error of its own
	case <-time.After(probeTimeout):
		return false, errors.New("the FUSE mount does not answer (a hung daemon?)")
	}
}

// detach lazily unmounts the held mount itself, through its descriptor's
// /proc/self/fd link (which names that mount, not whatever is at mp now);
// where that is refused (not root), through mp while mp still reaches it.
func (m heldMount) detach(mp string) error {
	if err := unix.Unmount("/proc/self/fd/"+strconv.Itoa(m.fd), unix.MNT_DETACH); err == nil {
		return nil
	}
	again, err := openTop(mp)
	if err != nil {
		return err
	}
	defer again.close()
	if again.id != m.id {
		return nil // it is no longer the one at mp: someone took it off
	}
	return zfs.Detach(mp)
}

// unmountLive asks the daemon st (serving mount id at mp) to unmount, and
// waits until it has exited and that mount is gone from the mount table,
// detaching it if the daemon exited without unmounting it (and it is
// still the one mp reaches). The
// signal goes through a pidfd opened while the pid still names that daemon
// (pid and start time): never to a process that got its pid since.
func unmountLive(stderr io.Writer, mp string, entry mountEntry, st control.StatusReport) error {
	id := entry.id
	pfd, err := unix.PidfdOpen(st.PID, 0)
	if err == nil {
		defer unix.Close(pfd)
		if proc.Same(st.PID, st.Start) {
			if err := unix.PidfdSendSignal(pfd, unix.SIGTERM, nil, 0); err != nil && err != unix.ESRCH {
				return fmt.Errorf("signal zerofs (pid %d): %w", st.PID, err)
			}
		}
	} else if err != unix.ESRCH {
		return fmt.Errorf("zerofs (pid %d): %w", st.PID, err)
	}
	deadline := time.Now().Add(umountTimeout)
	var exitBy time.Time // once the mount is gone, the daemon exits by then
	gone := false        // once gone, a mount given its id and device is another
	for {
		alive := proc.Same(st.PID, st.Start)
		present, err := mountPresent(entry)
		if err != nil {
			return err
		}
		gone = gone || !present
		present = !gone
		if alive && !present {
			if exitBy.IsZero() {
				exitBy = time.Now().Add(exitTimeout)
			}
			if time.Now().After(exitBy) {
				return fmt.Errorf("zerofs (pid %d) unmounted %s but has not exited after %v (see its daemon.log)", st.PID, mp, exitTimeout)
			}
			time.Sleep(20 * time.Millisecond)
			continue
		}
		switch {
		case !alive && !present:
			return nil
		case !alive:
			m, err := openTop(mp)
			if err != nil {
				return err
			}
			if m.id != id {
				m.close()
				return nil // gone from mp; what is there now is not ours to take
			}
			err = m.detach(mp)
			m.close()
			if err != nil {
				return fmt.Errorf("zerofs (pid %d) exited but left %s mounted, and detaching it failed: %w", st.PID, mp, err)
			}
			fmt.Fprintf(stderr, "zerofs: the daemon (pid %d) exited without unmounting; detached %s\n", st.PID, mp)
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("zerofs (pid %d) has not unmounted %s after %v (is a process still using it? see its daemon.log)", st.PID, mp, umountTimeout)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// mountEntry is one line of /proc/self/mountinfo.
type mountEntry struct {
	id, parent   int
	major, minor int // the device: with id, tells the mount from a later one given its id
	fstype       string
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
		out[i] = mountEntry{id: m.ID, parent: m.Parent, major: m.Major, minor: m.Minor, fstype: m.FSType}
	}
	return out, err
}

// mountPresent reports whether the mount still exists: the mount with its
// id and device. The kernel gives a freed mount id to the next mount, and
// a daemon may outlive its mount by its last replication attempt, while
// other mounts come and go.
func mountPresent(e mountEntry) (bool, error) {
	infos, err := mountinfo.GetMounts(func(m *mountinfo.Info) (skip, stop bool) {
		found := m.ID == e.id && m.Major == e.major && m.Minor == e.minor
		return !found, found
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
