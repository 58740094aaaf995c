package fs

import (
	"os"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// Filesystems whose close(2) never reports an error: they have no flush
// operation, so closing a descriptor (what a FLUSH does, on a dup of the
// backing one) can only succeed. A writer of a file on one of them needs no
// FLUSH at its close either (FOPEN_NOFLUSH).
var flushlessFS = map[int64]bool{
	unix.EXT4_SUPER_MAGIC:  true, // also ext2 and ext3
	unix.XFS_SUPER_MAGIC:   true,
	unix.BTRFS_SUPER_MAGIC: true,
	unix.TMPFS_MAGIC:       true,
	unix.F2FS_SUPER_MAGIC:  true,
	0xca451a4e:             true, // bcachefs
}

// noFlush reports whether handles of n need no FLUSH at their close: its
// file (open at fd) is on a filesystem whose close never fails. Readers
// never need one (Open); for writers the first open of the node looks at
// the filesystem (one fstatfs), every later one costs nothing. Where a
// close can fail (NFS, a FUSE filesystem below the workspace), a writer's
// FLUSH reports it (wsFile.Flush).
func (n *wsNode) noFlush(fd int) bool {
	n.ioMu.Lock()
	defer n.ioMu.Unlock()
	if !n.flushDecided {
		var st unix.Statfs_t
		n.flushless = unix.Fstatfs(fd, &st) == nil && flushlessFS[int64(st.Type)]
		n.flushDecided = true
	}
	return n.flushless
}

// flushMapped writes back the pages of the mount's files that a shared
// writable mapping dirtied, before a step, a turn or a rewind begins: the
// kernel keeps them until writeback, msync, munmap or a fork of the writer,
// and they would reach the daemon after the boundary, captured as the next
// step's before-state (@T missing a change made before T). syncfs of the
// mount sends them as WRITEs, which other request threads serve and capture
// in the step they were made in; the caller holds no engine lock. The
// daemon holds the root directory's descriptor only for the call, and a
// directory's close sends no FLUSH (its RELEASEDIR is not waited for). One
// window remains: a SIGKILL while this thread waits for its own OPENDIR to
// be answered leaves that thread waiting on the dead daemon, as a FLUSH
// would, until the connection is aborted (fusectl).
//
// syncfs starts the writeback but does not wait for FUSE's WRITEs to be
// answered (the kernel no longer waits on a FUSE server's writeback in a
// sync), so it then waits, at most flushWait, until the connection has no
// more requests waiting than before the syncfs (fusectl's "waiting"): the
// WRITEs were served, and captured in the step they belong to.
//
// A mount whose opens use passthrough does not need it: a mapping of a
// passthrough file maps the backing file's own pages, which the new step's
// capture of a file held open for writing (held.go) reads as they are, so
// the daemon makes no request of its own mount there.
func (f *fsys) flushMapped() {
	if !f.noOpen && f.passthrough.Load() {
		return
	}
	fd, err := unix.Open(f.mountpoint, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		f.log.Warn("zerofs: cannot flush mapped pages before a step", "err", err)
		return
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	w0, counted := -1, false
	if unix.Fstat(fd, &st) == nil {
		w0, counted = fuseWaiting(st.Dev)
	}
	if err := unix.Syncfs(fd); err != nil {
		f.log.Warn("zerofs: cannot flush mapped pages before a step", "err", err)
		return
	}
	for deadline := time.Now().Add(flushWait); counted && time.Now().Before(deadline); {
		w, ok := fuseWaiting(st.Dev)
		if !ok || w <= w0 {
			return
		}
		time.Sleep(100 * time.Microsecond)
	}
}

// flushWait bounds flushMapped's wait for the WRITEs a syncfs queued.
const flushWait = 200 * time.Millisecond

// fuseWaiting is the number of requests waiting for an answer on the FUSE
// connection of device dev (fusectl's "waiting"); ok is false when fusectl
// does not say.
func fuseWaiting(dev uint64) (int, bool) {
	b, err := os.ReadFile("/sys/fs/fuse/connections/" + strconv.FormatUint(uint64(unix.Minor(dev)), 10) + "/waiting")
	if err != nil {
		return 0, false
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(b)))
	return n, err == nil
}

// noFlushStatx is noFlush for a file whose statx (with its mount id) the
// caller has: a file on the workspace root's own mount is on the root's
// filesystem, looked at once per mount.
func (n *wsNode) noFlushStatx(fd int, st *unix.Statx_t) bool {
	if st.Mask&unix.STATX_MNT_ID == 0 || st.Mnt_id != n.fs.wsMnt {
		return n.noFlush(fd)
	}
	f := n.fs
	f.rootFlush.Do(func() {
		var sfs unix.Statfs_t
		f.rootFlushless = unix.Fstatfs(f.ws.fd, &sfs) == nil && flushlessFS[int64(sfs.Type)]
	})
	n.ioMu.Lock()
	defer n.ioMu.Unlock()
	if !n.flushDecided {
		n.flushless, n.flushDecided = f.rootFlushless, true
	}
	return n.flushless
}
