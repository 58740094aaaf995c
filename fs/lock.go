package fs

import (
	"fmt"
	"sync"
	"syscall"
	"time"

	fusefs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"
)

// File locks: fcntl(2) record locks (F_GETLK, F_SETLK, F_SETLKW, and the
// F_OFD_ forms) and flock(2), between every process that uses the mount,
// with the kernel's own semantics.
//
// The mount asks the kernel to send lock requests (fuse.MountOptions
// EnableLocks) rather than keep them in the kernel's FUSE inode, so that
// they reach one place for the workspace, the views and the control files
// alike. Each request names the FUSE node, the file handle and the lock
// owner: for a POSIX lock the owner is the calling process (its file
// table), for an OFD lock it is the open file, for flock the open file.
//
// lockTable keeps, per node, an anonymous in-memory file (memfd) standing
// for the file's lock state, and per lock owner one open file description
// of it (a "desc"). Every lock is an OFD lock, or a flock, taken on the
// owner's desc, so the kernel does the range arithmetic, merging, upgrades
// and conflicts, exactly as for a local file:
//
//   - POSIX locks of one process never conflict with each other (all its
//     requests land on one desc), whichever descriptor it locks through;
//     another process conflicts. This is what SQLite counts on when one
//     process holds several connections to a database.
//   - POSIX locks drop when their process closes any descriptor of the file:
//     the kernel sends FLUSH with the closing process's lock owner on every
//     close(2), and the desc of that owner is closed.
//   - OFD locks and flock locks belong to the open file (the FUSE handle)
//     and drop at its RELEASE, after its last descriptor is closed.
//
// Blocking requests (F_SETLKW, flock without LOCK_NB) wait here by retrying
// the non-blocking form, so that a signal to the waiting process (the
// kernel's INTERRUPT, which cancels the request) ends the wait with EINTR.
//
// Limits: F_GETLK reports no pid for a conflicting lock (l_pid 0); F_SETLKW
// does no deadlock detection (no EDEADLK); the locks are not visible to
// processes that lock the backing files outside the mount.
type lockTable struct {
	mu    sync.Mutex           // guards nodes and every desc's fd
	nodes map[uint64]*lockNode // by FUSE node id
}

// lockNode is the lock state of one FUSE node (one file of the mount).
type lockNode struct {
	inode int // memfd standing for the file
	descs map[lockKey]*lockDesc
}

// lockKey names a desc: the lock owner of POSIX and OFD locks, or the file
// handle of flock locks (flock's owner is the open file).
type lockKey struct {
	owner uint64
	flock bool
	fh    uint64 // for flock only
}

// lockDesc is one open file description of the node's memfd, holding the
// locks of one owner.
type lockDesc struct {
	fd  int
	fhs map[uint64]bool // the handles the owner has locked through
}

// lockWait bounds the retry interval of a blocking lock request.
const lockWait = 10 * time.Millisecond

func newLockTable() *lockTable {
	return &lockTable{nodes: make(map[uint64]*lockNode)}
}

// descLocked returns the desc for key on node id, opening it (and the node's
// memfd) if needed.
func (t *lockTable) descLocked(id uint64, key lockKey, fh uint64) (*lockDesc, error) {
	n := t.nodes[id]
	if n == nil {
		fd, err := unix.MemfdCreate(fmt.Sprintf("zerofs-lock-%d", id), unix.MFD_CLOEXEC)
		if err != nil {
			return nil, err
		}
		n = &lockNode{inode: fd, descs: make(map[lockKey]*lockDesc)}
		t.nodes[id] = n
	}
	d := n.descs[key]
	if d == nil {
		fd, err := unix.Open(fmt.Sprintf("/proc/self/fd/%d", n.inode), unix.O_RDWR|unix.O_CLOEXEC, 0)
		if err != nil {
			t.dropNodeLocked(id, n)
			return nil, err
		}
		d = &lockDesc{fd: fd, fhs: make(map[uint64]bool)}
		n.descs[key] = d
	}
	d.fhs[fh] = true
	return d, nil
}

// dropNodeLocked forgets node id once no desc is left on it.
func (t *lockTable) dropNodeLocked(id uint64, n *lockNode) {
	if len(n.descs) == 0 {
		unix.Close(n.inode)
		delete(t.nodes, id)
	}
}

// getlk answers F_GETLK (and F_OFD_GETLK) for owner: the first lock of
// another owner that conflicts with lk, or F_UNLCK.
func (t *lockTable) getlk(in *fuse.LkIn, out *fuse.LkOut) syscall.Errno {
	t.mu.Lock()
	defer t.mu.Unlock()
	key := lockKey{owner: in.Owner}
	var fd int
	if n := t.nodes[in.NodeId]; n != nil && n.descs[key] != nil {
		fd = n.descs[key].fd
	} else {
		// No locks of this owner: ask through a desc of its own, kept
		// until the owner's next flush like any other.
		d, err := t.descLocked(in.NodeId, key, in.Fh)
		if err != nil {
			return sysErrno(err)
		}
		fd = d.fd
	}
	var flk syscall.Flock_t
	in.Lk.ToFlockT(&flk)
	if err := syscall.FcntlFlock(uintptr(fd), unix.F_OFD_GETLK, &flk); err != nil {
		return sysErrno(err)
	}
	flk.Pid = 0 // an OFD lock has no pid (-1); we do not know the process
	out.Lk = fuse.FileLock{}
	out.Lk.FromFlockT(&flk)
	return 0
}

// setlk answers F_SETLK, F_SETLKW and flock. A blocking request retries
// until it gets the lock or cancel is closed (EINTR).
func (t *lockTable) setlk(cancel <-chan struct{}, in *fuse.LkIn, block bool) syscall.Errno {
	flock := in.LkFlags&fuse.LK_FLOCK != 0
	key := lockKey{owner: in.Owner}
	var op int
	if flock {
		key = lockKey{flock: true, fh: in.Fh}
		switch in.Lk.Typ {
		case syscall.F_RDLCK:
			op = unix.LOCK_SH
		case syscall.F_WRLCK:
			op = unix.LOCK_EX
		case syscall.F_UNLCK:
			op = unix.LOCK_UN
		default:
			return syscall.EINVAL
		}
	}
	try := func() error {
		t.mu.Lock()
		defer t.mu.Unlock()
		if in.Lk.Typ == syscall.F_UNLCK {
			// Nothing to unlock without a desc; do not make one.
			n := t.nodes[in.NodeId]
			if n == nil || n.descs[key] == nil {
				return nil
			}
		}
		d, err := t.descLocked(in.NodeId, key, in.Fh)
		if err != nil {
			return err
		}
		if flock {
			return unix.Flock(d.fd, op|unix.LOCK_NB)
		}
		var flk syscall.Flock_t
		in.Lk.ToFlockT(&flk)
		flk.Pid = 0
		return syscall.FcntlFlock(uintptr(d.fd), unix.F_OFD_SETLK, &flk)
	}
	wait := time.Millisecond
	for {
		err := try()
		// flock says EWOULDBLOCK, fcntl EAGAIN or EACCES: all one on Linux
		// but EACCES.
		busy := err == unix.EAGAIN || err == unix.EACCES
		if !busy || !block {
			return sysErrno(err)
		}
		select {
		case <-cancel:
			return syscall.EINTR
		case <-time.After(wait):
		}
		wait = min(2*wait, lockWait)
	}
}

// flush drops the POSIX locks of owner on node id: its process closed a
// descriptor of the file.
func (t *lockTable) flush(id, owner uint64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := t.nodes[id]
	if n == nil {
		return
	}
	key := lockKey{owner: owner}
	if d := n.descs[key]; d != nil {
		unix.Close(d.fd)
		delete(n.descs, key)
		t.dropNodeLocked(id, n)
	}
}

// release drops the flock and OFD locks of handle fh, and any desc locked
// through it: every process that locked through fh has closed its
// descriptors by now, so its POSIX locks were dropped at that flush
// already.
func (t *lockTable) release(id, fh uint64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := t.nodes[id]
	if n == nil {
		return
	}
	for key, d := range n.descs {
		if d.fhs[fh] {
			unix.Close(d.fd)
			delete(n.descs, key)
		}
	}
	t.dropNodeLocked(id, n)
}

// closeAll drops every lock (at unmount).
func (t *lockTable) closeAll() {
	t.mu.Lock()
	defer t.mu.Unlock()
	for id, n := range t.nodes {
		for key, d := range n.descs {
			unix.Close(d.fd)
			delete(n.descs, key)
		}
		t.dropNodeLocked(id, n)
	}
}

// lockingFS serves lock requests from a lockTable in front of go-fuse's
// node bridge, which sees neither the node id nor the lock owner of a
// FLUSH.
type lockingFS struct {
	fuse.RawFileSystem
	locks *lockTable
}

func (l *lockingFS) GetLk(cancel <-chan struct{}, in *fuse.LkIn, out *fuse.LkOut) fuse.Status {
	return fuse.Status(l.locks.getlk(in, out))
}

func (l *lockingFS) SetLk(cancel <-chan struct{}, in *fuse.LkIn) fuse.Status {
	return fuse.Status(l.locks.setlk(cancel, in, false))
}

func (l *lockingFS) SetLkw(cancel <-chan struct{}, in *fuse.LkIn) fuse.Status {
	return fuse.Status(l.locks.setlk(cancel, in, true))
}

func (l *lockingFS) Flush(cancel <-chan struct{}, in *fuse.FlushIn) fuse.Status {
	st := l.RawFileSystem.Flush(cancel, in)
	l.locks.flush(in.NodeId, in.LockOwner)
	return st
}

func (l *lockingFS) Release(cancel <-chan struct{}, in *fuse.ReleaseIn) {
	l.RawFileSystem.Release(cancel, in)
	l.locks.release(in.NodeId, in.Fh)
}

// mountWithLocks is fusefs.Mount with the lock table in front: it asks the
// kernel for lock requests and serves them.
func mountWithLocks(mp string, root fusefs.InodeEmbedder, opts *fusefs.Options, locks *lockTable) (*fuse.Server, error) {
	opts.MountOptions.EnableLocks = true
	raw := &lockingFS{RawFileSystem: fusefs.NewNodeFS(root, opts), locks: locks}
	server, err := fuse.NewServer(raw, mp, &opts.MountOptions)
	if err != nil {
		return nil, err
	}
	go server.Serve()
	if err := server.WaitMount(); err != nil {
		return nil, err
	}
	return server, nil
}
