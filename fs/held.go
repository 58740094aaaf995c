package fs

import (
	"context"
	"slices"
	"sync"
	"syscall"

	fusefs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"
)

// heldFds are the backing descriptors of a node's open handles. A node that
// has lost its name while open (unlinked, renamed over, or an O_TMPFILE file
// that never had one) is still reachable through them: fstat(2) of an open
// directory (the kernel sends no handle with GETATTR for a directory), and
// linkat(2) of an O_TMPFILE file.
//
// A directory has no handle while it is open (the mount serves directories
// without OPENDIR, opendir.go), so one the daemon removes (rmdir, a rename
// over it) gets an O_PATH descriptor of its own, kept until the kernel
// forgets the node (keep, drain): a process may hold it open, or be in it.
type heldFds struct {
	mu   sync.Mutex // guards fds and kept, and keeps each open while in use
	fds  []int
	kept int // an O_PATH descriptor the set owns, plus one (0: none)
}

// keep gives the set fd to own; drain closes it. It returns the
// descriptor it owned before, for the caller to close.
func (h *heldFds) keep(fd int) (old int, ok bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	old, h.kept = h.kept, fd+1
	return old - 1, old > 0
}

// drain gives up the descriptor the set owns, if any, for the caller to
// close.
func (h *heldFds) drain() (fd int, ok bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	old := h.kept
	h.kept = 0
	return old - 1, old > 0
}

// openFds are all the backing descriptors a mount's nodes hold (heldFds),
// so that unmounting closes every one, also those whose RELEASE or FORGET
// the kernel never sent: at unmount it drops the requests still queued,
// and a descriptor left open would keep a file system mounted inside the
// workspace busy.
type openFds struct {
	mu  sync.Mutex
	fds map[int]struct{}
}

func (o *openFds) add(fd int) {
	o.mu.Lock()
	if o.fds == nil {
		o.fds = map[int]struct{}{}
	}
	o.fds[fd] = struct{}{}
	o.mu.Unlock()
}

// close closes fd, unless closeAll already did.
func (o *openFds) close(fd int) error {
	o.mu.Lock()
	_, ok := o.fds[fd]
	delete(o.fds, fd)
	o.mu.Unlock()
	if !ok {
		return nil
	}
	return unix.Close(fd)
}

// forget drops fd, which its owner closes.
func (o *openFds) forget(fd int) {
	o.mu.Lock()
	delete(o.fds, fd)
	o.mu.Unlock()
}

// closeAll closes every descriptor still open; it runs once the mount is
// served no more.
func (o *openFds) closeAll() {
	o.mu.Lock()
	defer o.mu.Unlock()
	for fd := range o.fds {
		unix.Close(fd)
	}
	o.fds = nil
}

// hold adds fd, a handle's backing descriptor, to the node's and the
// mount's descriptors.
func (n *wsNode) hold(fd int) {
	n.fs.fds.add(fd)
	n.held.add(fd)
}

// unhold forgets fd and closes it.
func (n *wsNode) unhold(fd int) error {
	n.held.remove(fd)
	return n.fs.fds.close(fd)
}

func (h *heldFds) add(fd int) {
	h.mu.Lock()
	h.fds = append(h.fds, fd)
	h.mu.Unlock()
}

// remove forgets fd; the caller closes it afterwards.
func (h *heldFds) remove(fd int) {
	h.mu.Lock()
	if i := slices.Index(h.fds, fd); i >= 0 {
		h.fds = slices.Delete(h.fds, i, i+1)
	}
	h.mu.Unlock()
}

// with runs fn on one of the descriptors; ok is false when none is open.
func (h *heldFds) with(fn func(fd int) error) (ok bool, err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	switch {
	case len(h.fds) > 0:
		return true, fn(h.fds[0])
	case h.kept > 0:
		return true, fn(h.kept - 1)
	}
	return false, nil
}

// holdRemoved prepares the removal of the directory name in n (through
// dfd, n's backing directory): when removed is reported true, the
// directory's node, if the kernel knows it, keeps an O_PATH descriptor of
// it (heldFds). Call it before the removal, the returned func after.
//
// On a mount without OPEN (noopen.go) a regular file's node keeps one too:
// no handle tells the daemon that a process holds it open, so its reads
// and writes after the removal reach the file through that descriptor.
func (n *wsNode) holdRemoved(dfd int, name string) func(removed bool) {
	ch := n.GetChild(name)
	if ch == nil {
		return func(bool) {}
	}
	flags := unix.O_PATH | unix.O_DIRECTORY | unix.O_NOFOLLOW | unix.O_CLOEXEC
	switch {
	case ch.IsDir():
	case n.fs.noOpen && ch.StableAttr().Mode == unix.S_IFREG:
		flags &^= unix.O_DIRECTORY
	default:
		return func(bool) {}
	}
	cn, ok := ch.Operations().(*wsNode)
	if !ok {
		return func(bool) {}
	}
	fd, taken := -1, false
	if ch.IsDir() {
		// The directory's kept descriptor (backing.go), if it has one.
		if dir, ok := n.path(); ok {
			fd, taken = n.fs.dirs.take(cn, join(dir, name))
		}
	}
	if !taken {
		var err error
		if fd, err = unix.Openat(dfd, name, flags, 0); err != nil {
			return func(bool) {}
		}
	}
	return func(removed bool) {
		if !removed {
			unix.Close(fd)
			return
		}
		cn.fs.fds.add(fd)
		if old, ok := cn.held.keep(fd); ok {
			cn.fs.fds.close(old)
		}
	}
}

var _ fusefs.NodeOnForgetter = (*wsNode)(nil)

// OnForget closes what the node's held descriptors own: the kernel has
// forgotten it, so no request can name it again.
func (n *wsNode) OnForget() {
	if fd, ok := n.held.drain(); ok {
		n.fs.fds.close(fd)
	}
	n.forgetIO()
	n.fs.dirs.forget(n)
}

// statHeld stats the node through an open handle when it has no name.
func (n *wsNode) statHeld(st *unix.Statx_t) syscall.Errno {
	ok, err := n.held.with(func(fd int) error { return statx(fd, "", st) })
	if !ok {
		return syscall.ENOENT
	}
	return sysErrno(err)
}

// heldDir is a directory stream whose descriptor the node holds while it
// is open.
type heldDir struct {
	fusefs.DirStream
	node *wsNode
	fd   int
}

var _ dirFile = (*heldDir)(nil)

func (d *heldDir) inner() dirFile { return d.DirStream.(dirFile) }

func (d *heldDir) Readdirent(ctx context.Context) (*fuse.DirEntry, syscall.Errno) {
	return d.inner().Readdirent(ctx)
}

// Seekdir moves the descriptor to off and starts a fresh stream on it,
// which reads at its first use: go-fuse's Seekdir reads at once, and its
// first Readdirent reads again when that found nothing (the kernel's
// READDIR at a listing's end offset: two getdents where one says EOF).
func (d *heldDir) Seekdir(ctx context.Context, off uint64) syscall.Errno {
	if _, err := unix.Seek(d.fd, int64(off), unix.SEEK_SET); err != nil {
		return sysErrno(err)
	}
	ds, errno := fusefs.NewLoopbackDirStreamFd(d.fd)
	if errno != 0 {
		return errno
	}
	d.DirStream = ds
	return 0
}

func (d *heldDir) Releasedir(ctx context.Context, flags uint32) {
	d.node.held.remove(d.fd)
	d.node.fs.fds.forget(d.fd) // the directory stream closes it
	d.inner().Releasedir(ctx, flags)
}

func (d *heldDir) Fsyncdir(ctx context.Context, flags uint32) syscall.Errno {
	return d.inner().Fsyncdir(ctx, flags)
}

var _ fusefs.NodeTmpfiler = (*wsNode)(nil)

// Tmpfile makes an O_TMPFILE file in the backing directory. It has no name,
// so nothing is captured; linkat(2) gives it one, captured as absent before
// like any new name (Link).
func (n *wsNode) Tmpfile(ctx context.Context, flags, mode uint32, out *fuse.EntryOut) (*fusefs.Inode, fusefs.FileHandle, uint32, syscall.Errno) {
	if n.fs.noOpen {
		// Its handle would never be released (noopen.go): the kernel
		// then answers O_TMPFILE with EOPNOTSUPP, as a filesystem
		// without it.
		return nil, nil, 0, syscall.ENOSYS
	}
	p, ok := n.path()
	if !ok {
		return nil, nil, 0, syscall.ENOENT
	}
	dfd, done, err := n.fs.ws.dir(p)
	if err != nil {
		return nil, nil, 0, sysErrno(err)
	}
	defer done()
	// O_EXCL stays: it makes the file one that can never be linked.
	fd, err := unix.Openat(dfd, ".", openFlags(flags)&^unix.O_NOFOLLOW|unix.O_TMPFILE|int(flags&unix.O_EXCL), mode)
	if err != nil {
		return nil, nil, 0, sysErrno(err)
	}
	chownNew(ctx, dfd, "", fd)
	var st unix.Statx_t
	if err := statx(fd, "", &st); err != nil {
		unix.Close(fd)
		return nil, nil, 0, sysErrno(err)
	}
	fillAttr(&st, &out.Attr)
	child := n.NewInode(ctx, &wsNode{fs: n.fs}, n.fs.ws.stable(&st))
	cn := child.Operations().(*wsNode)
	cn.hold(fd)
	// Every open of the node must agree on passthrough (the kernel refuses
	// to mix), so a tmpfile's handle offers it too, and is a writer like
	// any other: it has a path to capture once linkat names it.
	h := &wsFile{node: cn, fd: fd, write: true}
	if n.fs.passthrough.Load() {
		h.passthrough = cn.openMode(fd, true)
	}
	n.fs.addWriter(h)
	return child, h, 0, 0
}
