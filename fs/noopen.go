package fs

import (
	"context"
	"sync"
	"sync/atomic"
	"syscall"

	fusefs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"

	"github.com/zerofs/zerofs/record"
)

// Mounts without OPEN (Options.NoOpen). A warm grep or rg of a tree pays
// two round trips a file to the daemon, OPEN and RELEASE, and nothing else:
// the pages are the kernel's. The kernel offers FUSE_NO_OPEN_SUPPORT: when
// the daemon answers OPEN with ENOSYS it stops sending OPEN and RELEASE for
// the connection's files, opens every file with FOPEN_KEEP_CACHE, and sends
// READ, WRITE, FSYNC, FALLOCATE, LSEEK, COPY_FILE_RANGE and SETATTR with
// file handle 0 (fs/fuse/file.c, fuse_file_open). FLUSH, answered ENOSYS
// once, stops too (fc->no_flush). A CREATE still returns a handle of its
// own (Create in dir.go), whose requests carry it as before.
//
// So a node serves handle-free requests itself (nodeIO): the first READ
// opens the backing file read-only and the first WRITE opens it for
// writing, each checked to be the node's own inode, and the node keeps both
// until the kernel forgets it. Kept descriptors follow the inode as an open
// file does: after a rename, an unlink (the node keeps an O_PATH descriptor
// of a file it unlinks, held.go) or a rewind that replaced the file, they
// still reach the file the process opened. Past maxIOFds descriptors a
// request opens and closes its own.
//
// Captures move from OPEN to where changes reach the daemon: the first
// WRITE, FALLOCATE or COPY_FILE_RANGE of a node in each step captures its
// names (writeBegin), as a SETATTR of the size (O_TRUNC arrives as one)
// already does; CREATE, UNLINK, RENAME and the rest are unchanged. The
// daemon no longer knows which removed inodes are open for writing, so
// every such write first detaches a kept blob's inode from the store
// (Engine.Detach: a stat and a lookup when it is not one).
//
// The control files need their handles (a request written in several
// writes, a report read per handle), so in this mode .zero is a FUSE mount
// of its own over the main one (ctlmount.go), with OPEN as before. Views
// serve reads from content a node opens once (viewNode.Read); a live path
// is checked for the reader at every READ and, since the kernel shares the
// view's pages between readers, at every lookup (viewNode.Lookup).
//
// Passthrough needs OPEN replies, so it is off in this mode.

// maxIOFds bounds the descriptors nodes keep for handle-free requests
// (the daemon's limit here is 20,000 in all).
const maxIOFds = 8192

// openlessFS answers OPEN with ENOSYS when Options.NoOpen is set, for every
// node of the connection (workspace files and views), so that the kernel
// stops sending OPEN and RELEASE.
type openlessFS struct {
	fuse.RawFileSystem
	on    bool
	opens *atomic.Int64 // OPEN requests from the kernel (for tests)
}

func (o *openlessFS) Open(cancel <-chan struct{}, in *fuse.OpenIn, out *fuse.OpenOut) fuse.Status {
	o.opens.Add(1)
	if o.on {
		return fuse.ENOSYS
	}
	return o.RawFileSystem.Open(cancel, in, out)
}

// Create answers ENOSYS without OPEN: the kernel then makes new files with
// MKNOD and opens them without a request. (A CREATE's handle would never be
// released: with no_open set the kernel sends no RELEASE for it either.)
func (o *openlessFS) Create(cancel <-chan struct{}, in *fuse.CreateIn, name string, out *fuse.CreateOut) fuse.Status {
	if o.on {
		return fuse.ENOSYS
	}
	return o.RawFileSystem.Create(cancel, in, name, out)
}

// mknod makes name in dfd as mknodat(2) does. Without OPEN, a regular file
// is also opened for writing, for its node to keep (keepMade): the writes
// that follow a create need no open, and a file created without write
// permission for its owner (git's objects are 0444) stays writable through
// the descriptor its creator holds, as after a native open(O_CREAT). An
// ordinary user's daemon cannot open such a file for writing afterwards, so
// it creates it writable, opens it and then sets the mode asked for. fd is
// -1 when nothing was opened.
func (n *wsNode) mknod(dfd int, name string, mode, rdev uint32) (fd int, err error) {
	if !n.fs.noOpen || mode&unix.S_IFMT != unix.S_IFREG {
		return -1, unix.Mknodat(dfd, name, mode, int(rdev))
	}
	widen := n.fs.uid != 0 && mode&0o600 != 0o600
	first := mode
	if widen {
		first |= 0o600
	}
	if err := unix.Mknodat(dfd, name, first, 0); err != nil {
		return -1, err
	}
	fd, err = unix.Openat(dfd, name, unix.O_RDWR|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		fd = -1 // the first write opens it
	}
	if widen {
		if fd >= 0 {
			err = unix.Fchmod(fd, mode&0o777)
		} else {
			err = unix.Fchmodat(dfd, name, mode&0o777, 0)
		}
		if err != nil {
			if fd >= 0 {
				unix.Close(fd)
			}
			unix.Unlinkat(dfd, name, 0)
			return -1, err
		}
	}
	return fd, nil
}

// keepMade gives child, the node of the file mknod just made in step, the
// descriptor mknod opened (fd), or closes it when there is no child.
func (n *wsNode) keepMade(child *fusefs.Inode, fd int, step record.Seq) {
	if fd < 0 {
		return
	}
	cn, ok := (*wsNode)(nil), false
	if child != nil {
		cn, ok = child.Operations().(*wsNode)
	}
	if !ok || n.fs.ioFds.Add(1) > maxIOFds {
		if ok {
			n.fs.ioFds.Add(-1)
		}
		unix.Close(fd)
		return
	}
	cn.io.mu.Lock()
	if cn.io.wr > 0 { // the kernel knew the node already
		cn.io.mu.Unlock()
		n.fs.ioFds.Add(-1)
		unix.Close(fd)
		return
	}
	cn.hold(fd)
	cn.io.wr = fd + 1
	cn.io.step, cn.io.stepSet = step, true // its creation captured it in step
	cn.io.mu.Unlock()
}

// nodeIO is what a workspace node keeps for handle-free requests.
type nodeIO struct {
	mu      sync.Mutex // guards rd, wr, stepSet, step
	rd, wr  int        // kept descriptors plus one (0: none): read-only, writable
	stepSet bool       // step is set
	step    record.Seq // the step in which the node's names were last captured by a write
}

// ioFd returns a descriptor of the node's file for reading, or for writing
// when write is set, and done to call after its use (it closes a
// descriptor opened for this request alone).
func (n *wsNode) ioFd(write bool) (fd int, done func(), errno syscall.Errno) {
	n.io.mu.Lock()
	defer n.io.mu.Unlock()
	if n.io.wr > 0 {
		return n.io.wr - 1, func() {}, 0
	}
	if !write && n.io.rd > 0 {
		return n.io.rd - 1, func() {}, 0
	}
	fd, local, errno := n.openIO(write)
	if errno != 0 {
		return -1, nil, errno
	}
	// A descriptor kept on a file system mounted below the workspace
	// would keep it busy (its umount fails) until the kernel forgets the
	// node.
	if !local || n.fs.ioFds.Add(1) > maxIOFds {
		if local {
			n.fs.ioFds.Add(-1)
		}
		return fd, func() { unix.Close(fd) }, 0
	}
	n.hold(fd)
	if write {
		n.io.wr = fd + 1
	} else {
		n.io.rd = fd + 1
	}
	return fd, func() {}, 0
}

// openIO opens the node's file: through the descriptor the node kept when
// it lost its name, else by its path, checked to be the node's own inode
// (a rewind may have put another file at the path, and the kernel still
// holds this one open). local says whether it is on the workspace root's
// own mount.
func (n *wsNode) openIO(write bool) (fd int, local bool, errno syscall.Errno) {
	modes := []int{unix.O_RDONLY}
	if write {
		modes = []int{unix.O_RDWR, unix.O_WRONLY}
	}
	a := n.fs.rw.arrive()
	var err error
	for _, mode := range modes {
		var ok bool
		ok, err = n.held.with(func(held int) error {
			var e error
			// Through the magic link: O_NOFOLLOW would refuse it, and
			// it names the held inode itself, never a symlink.
			fd, e = unix.Open(procPath(held), mode|unix.O_CLOEXEC, 0)
			return e
		})
		if !ok {
			p, found := n.path()
			if !found {
				return -1, false, n.resolveErrno(a, unix.ENOENT)
			}
			fd, err = n.fs.ws.openat2(p, mode|unix.O_NOFOLLOW|unix.O_CLOEXEC)
		}
		if err == nil {
			own, local := n.isOwn(fd)
			if !own {
				unix.Close(fd)
				return -1, false, syscall.ESTALE
			}
			return fd, local, 0
		}
		if err != unix.EACCES {
			break
		}
	}
	return -1, false, n.resolveErrno(a, err)
}

// isOwn reports whether fd is open on the node's own inode, and whether
// that is on the workspace root's own mount.
func (n *wsNode) isOwn(fd int) (own, local bool) {
	var st unix.Statx_t
	err := unix.Statx(fd, "", unix.AT_EMPTY_PATH, unix.STATX_BASIC_STATS|unix.STATX_BTIME|unix.STATX_MNT_ID, &st)
	if err != nil {
		return false, false
	}
	s := n.fs.ws.stable(&st)
	o := n.StableAttr()
	return s.Ino == o.Ino && s.Gen == o.Gen, st.Mask&unix.STATX_MNT_ID != 0 && st.Mnt_id == n.fs.wsMnt
}

// forgetIO closes the node's kept descriptors (OnForget).
func (n *wsNode) forgetIO() {
	n.io.mu.Lock()
	defer n.io.mu.Unlock()
	for _, kept := range []*int{&n.io.rd, &n.io.wr} {
		if *kept > 0 {
			n.unhold(*kept - 1)
			n.fs.ioFds.Add(-1)
			*kept = 0
		}
	}
}

// keptFd returns a duplicate of a descriptor the node keeps, on a mount
// without OPEN, for a request that names no handle (the caller closes it).
func (n *wsNode) keptFd() (fd int, ok bool) {
	if !n.fs.noOpen || n.IsDir() {
		return -1, false
	}
	ok, err := n.held.with(func(held int) (err error) {
		fd, err = unix.FcntlInt(uintptr(held), unix.F_DUPFD_CLOEXEC, 0)
		return err
	})
	return fd, ok && err == nil
}

// statOwn stats the node's file on a mount without OPEN: through a
// descriptor it keeps, else by its path, refused with ESTALE when the
// path names another inode now (a rewind replaced the file while a
// process held it open).
func (n *wsNode) statOwn(st *unix.Statx_t) syscall.Errno {
	ok, err := n.held.with(func(fd int) error {
		if err := statx(fd, "", st); err != nil {
			return err
		}
		if _, named := n.path(); !named {
			// A removed file the store keeps (or stashes) has a link
			// or two more, the store's: the process sees its own, as
			// natively.
			st.Nlink -= min(st.Nlink, uint32(n.fs.eng.Kept(fd)))
		}
		return nil
	})
	if ok {
		return sysErrno(err)
	}
	if errno := n.stat(st); errno != 0 {
		return errno
	}
	s, own := n.fs.ws.stable(st), n.StableAttr()
	if s.Ino != own.Ino || s.Gen != own.Gen {
		return syscall.ESTALE
	}
	return 0
}

// noteStep records that the node's names were captured in step.
func (n *wsNode) noteStep(step record.Seq) {
	n.io.mu.Lock()
	n.io.step, n.io.stepSet = step, true
	n.io.mu.Unlock()
}

// writeBegin begins a handle-free change of the node's content: it takes
// the workspace lock and captures the node's names when the step moved on
// since their last capture by a write here (or a truncate, Setattr). The
// caller calls release after its syscall.
func (n *wsNode) writeBegin(ctx context.Context, op string) (release func(), errno syscall.Errno) {
	ectx, who := engineCtx(ctx), callerOf(ctx)
	release, step, err := n.fs.eng.Begin(ectx, who)
	if err != nil {
		return nil, engineErrno(n.fs.log, op, "", err, seqInvalid)
	}
	n.io.mu.Lock()
	same := n.io.stepSet && n.io.step == step
	n.io.mu.Unlock()
	if !same {
		// An unlinked file has no path whose state could change.
		if p, ok := n.path(); ok {
			if err := n.fs.eng.CaptureLocked(ectx, who, n.changes(p)...); err != nil {
				release()
				return nil, engineErrno(n.fs.log, op, p, err, seqInvalid)
			}
		}
		n.noteStep(step)
	}
	return release, 0
}

// writeFd is ioFd for a change: the descriptor, detached from the store if
// the inode was kept there (a removal since the process opened it).
func (n *wsNode) writeFd(op string) (fd int, done func(), errno syscall.Errno) {
	fd, done, errno = n.ioFd(true)
	if errno != 0 {
		return -1, nil, errno
	}
	if err := n.fs.eng.Detach(fd); err != nil {
		done()
		p, _ := n.path()
		return -1, nil, engineErrno(n.fs.log, op, p, err, seqInvalid)
	}
	return fd, done, 0
}

var (
	_ fusefs.NodeReader    = (*wsNode)(nil)
	_ fusefs.NodeWriter    = (*wsNode)(nil)
	_ fusefs.NodeFlusher   = (*wsNode)(nil)
	_ fusefs.NodeFsyncer   = (*wsNode)(nil)
	_ fusefs.NodeReleaser  = (*wsNode)(nil)
	_ fusefs.NodeLseeker   = (*wsNode)(nil)
	_ fusefs.NodeAllocater = (*wsNode)(nil)
)

// The node's file operations serve the handle the request carries (an
// OPEN's or a CREATE's, file.go) and, without one, the node (nodeIO).

func (n *wsNode) Read(ctx context.Context, f fusefs.FileHandle, dest []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	if h, ok := f.(*wsFile); ok {
		return h.Read(ctx, dest, off)
	}
	n.fs.served.Add(1)
	fd, done, errno := n.ioFd(false)
	if errno != 0 {
		return nil, errno
	}
	defer done()
	k, err := unix.Pread(fd, dest, off)
	if err != nil {
		return nil, sysErrno(err)
	}
	return fuse.ReadResultData(dest[:k]), 0
}

func (n *wsNode) Write(ctx context.Context, f fusefs.FileHandle, data []byte, off int64) (uint32, syscall.Errno) {
	if h, ok := f.(*wsFile); ok {
		return h.Write(ctx, data, off)
	}
	n.fs.served.Add(1)
	release, errno := n.writeBegin(ctx, "write")
	if errno != 0 {
		return 0, errno
	}
	defer release()
	fd, done, errno := n.writeFd("write")
	if errno != 0 {
		return 0, errno
	}
	defer done()
	k, err := unix.Pwrite(fd, data, off)
	if err != nil {
		return 0, sysErrno(err)
	}
	return uint32(k), 0
}

func (n *wsNode) Allocate(ctx context.Context, f fusefs.FileHandle, off, size uint64, mode uint32) syscall.Errno {
	if h, ok := f.(*wsFile); ok {
		return h.Allocate(ctx, off, size, mode)
	}
	release, errno := n.writeBegin(ctx, "fallocate")
	if errno != 0 {
		return errno
	}
	defer release()
	fd, done, errno := n.writeFd("fallocate")
	if errno != 0 {
		return errno
	}
	defer done()
	return sysErrno(unix.Fallocate(fd, mode, int64(off), int64(size)))
}

func (n *wsNode) Lseek(ctx context.Context, f fusefs.FileHandle, off uint64, whence uint32) (uint64, syscall.Errno) {
	if h, ok := f.(*wsFile); ok {
		return h.Lseek(ctx, off, whence)
	}
	fd, done, errno := n.ioFd(false)
	if errno != 0 {
		return 0, errno
	}
	defer done()
	k, err := unix.Seek(fd, int64(off), int(whence))
	return uint64(k), sysErrno(err)
}

// Flush without a handle is a mount without OPEN: ENOSYS makes the kernel
// send no FLUSH any more (a close then reports no error of the backing
// file's close, which only a network filesystem below the workspace has).
func (n *wsNode) Flush(ctx context.Context, f fusefs.FileHandle) syscall.Errno {
	if h, ok := f.(*wsFile); ok {
		return h.Flush(ctx)
	}
	n.fs.flushed.Add(1)
	return syscall.ENOSYS
}

func (n *wsNode) Fsync(ctx context.Context, f fusefs.FileHandle, flags uint32) syscall.Errno {
	if h, ok := f.(*wsFile); ok {
		return h.Fsync(ctx, flags)
	}
	fd, done, errno := n.ioFd(false)
	if errno != 0 {
		return errno
	}
	defer done()
	if flags&1 != 0 { // FUSE_FSYNC_FDATASYNC
		return sysErrno(unix.Fdatasync(fd))
	}
	return sysErrno(unix.Fsync(fd))
}

func (n *wsNode) Release(ctx context.Context, f fusefs.FileHandle) syscall.Errno {
	if h, ok := f.(*wsFile); ok {
		return h.Release(ctx)
	}
	return 0
}

// ioOf is the descriptor a copy_file_range side uses: its handle's, or the
// node's.
func ioOf(n *wsNode, f fusefs.FileHandle, write bool, op string) (fd int, done func(), errno syscall.Errno) {
	if h, ok := f.(*wsFile); ok {
		return h.fd, func() {}, 0
	}
	if write {
		return n.writeFd(op)
	}
	return n.ioFd(false)
}
