package fs

import (
	"context"
	"sync"
	"syscall"

	fusefs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"

	"github.com/zerofs/zerofs/record"
)

// wsFile is an open workspace file: a descriptor on the backing file.
//
// Where the mount allows it (Mounted.Passthrough), the handle offers that
// descriptor for FUSE passthrough: the kernel then reads and writes the
// backing file itself and Read and Write are never called. Every open of a
// node shares one backing file, and all handles of a node offer it or none
// (openMode).
//
// A handle open for writing must still get its file captured again in each
// later step in which it writes (a file held open across .zero/step or a
// rewind). Without passthrough, Write does that: it remembers the step in
// which the file was last captured and captures again when the step moved
// on. With passthrough no write reaches the daemon, so the handle is
// registered in fsys.writers and every step boundary captures its file in
// the new step before the boundary returns (rewind.Options.OpenWriters).
// The kernel calls no operation on a handle after Release.
type wsFile struct {
	node        *wsNode
	fd          int
	write       bool   // opened for writing: writes and truncates go through recapture
	passthrough bool   // offers fd for passthrough
	registered  bool   // in fsys.writers
	wcounted    bool   // counted in fsys.wopen under wkey
	wkey        devIno // its inode

	mu   sync.Mutex // guards step
	step record.Seq // the step in which the file was last captured
}

var (
	_ fusefs.FileReader    = (*wsFile)(nil)
	_ fusefs.FileWriter    = (*wsFile)(nil)
	_ fusefs.FileFlusher   = (*wsFile)(nil)
	_ fusefs.FileFsyncer   = (*wsFile)(nil)
	_ fusefs.FileReleaser  = (*wsFile)(nil)
	_ fusefs.FileLseeker   = (*wsFile)(nil)
	_ fusefs.FileAllocater = (*wsFile)(nil)

	_ fusefs.FilePassthroughFder = (*wsFile)(nil)
)

// writeFlags are the open flags that may change a file.
const writeFlags = syscall.O_WRONLY | syscall.O_RDWR | syscall.O_TRUNC

// openFlags cleans the flags the kernel sends for open(2) on the backing
// file: FMODE_EXEC is not an open flag; the descriptor must not follow a
// symlink or leak to children.
//
// O_APPEND is kept, unlike go-fuse's loopback: the kernel computes an
// append's offset from the size it caches, and a write queued behind a
// rewind that shrank the file would land at the old end, leaving a hole of
// NULs. On an O_APPEND descriptor pwrite appends at the backing file's real
// end, atomically. (The price: a shared writable mmap whose dirty pages the
// kernel writes back through an O_APPEND handle would append them; no tool
// we know mixes the two.)
func openFlags(flags uint32) int {
	f := int(flags&^openKillSetID) &^ (fuse.FMODE_EXEC | syscall.O_CREAT | syscall.O_EXCL | syscall.O_NOCTTY)
	return f | syscall.O_NOFOLLOW | syscall.O_CLOEXEC
}

func (n *wsNode) Open(ctx context.Context, flags uint32) (fusefs.FileHandle, uint32, syscall.Errno) {
	a := n.fs.rw.arrive()
	p, ok := n.path()
	if !ok {
		return nil, 0, n.resolveErrno(a, unix.ENOENT)
	}
	h := &wsFile{node: n, write: flags&writeFlags != 0}
	if h.write {
		release, step, errno := n.begin(ctx, "open", n.changes(p)...)
		if errno != 0 {
			return nil, 0, errno
		}
		defer release()
		h.step = step
	}
	// O_TRUNC waits for beginWrite: the file may be a kept blob's inode,
	// which must be detached before anything writes to it.
	fl := openFlags(flags)
	fd, err := n.fs.ws.openat2(p, fl&^syscall.O_TRUNC)
	if err != nil {
		return nil, 0, n.resolveErrno(a, err)
	}
	h.fd = fd
	if h.write {
		if errno := n.fs.beginWrite(ctx, h, p, fl&syscall.O_TRUNC != 0, flags); errno != 0 {
			unix.Close(fd)
			return nil, 0, errno
		}
	}
	n.hold(fd)
	if n.fs.passthrough.Load() {
		h.passthrough = n.openMode(fd, h.write)
	}
	n.fs.addWriter(h) // still under the capture
	// A reader keeps the kernel's cached pages: writes through the mount
	// keep them current, and a rewind, the one change behind the kernel's
	// back, invalidates what it changed (invalidate.go). (go-fuse drops
	// KEEP_CACHE for a passthrough open: the pages are the backing file's.)
	//
	// A reader has nothing to flush, and the kernel drops a process's
	// locks at close itself (mount.go), so its closes send no FLUSH
	// (FOPEN_NOFLUSH): a grep of a tree costs an OPEN and a RELEASE per
	// file, not three requests. A writer's close sends one only where the
	// backing file's close can fail (noFlush, flush.go): its FLUSH then
	// reports that error (Flush). A tar -x pays one request less per file.
	var fuseFlags uint32
	if !h.write {
		fuseFlags = fuse.FOPEN_KEEP_CACHE | fuse.FOPEN_NOFLUSH
	} else if n.noFlush(fd) {
		fuseFlags = fuse.FOPEN_NOFLUSH
	}
	return h, fuseFlags, 0
}

// passthroughMin is the size from which a file opened only for reading
// gets passthrough. Below it the page cache of the FUSE inode serves reads
// as well (KEEP_CACHE), and an open costs fewer steps: passthrough adds the
// registration of a backing file and its removal, and the kernel's opening
// of its own backing file, to every OPEN and RELEASE (grep -r of Go's tree
// was slower with it than without).
const passthroughMin = 1 << 20

// openMode reports whether a new handle of n offers passthrough. The first
// open of the node decides for the node's whole life: passthrough for a
// writer, or a reader of a file of passthroughMin bytes or more, on the
// workspace's own mount (not a filesystem or a bind mount inside the
// workspace: the kernel holds a registered backing file until the FUSE
// connection is gone, which would keep that mount busy after zerofs
// unmounts). fd is the open file. Only that first open looks at the file
// (its size, its mount); every later one costs nothing here.
//
// The kernel refuses to mix passthrough and cached opens of one inode (the
// open fails with EIO), and go-fuse makes a node's mode switch unsafe even
// between opens that do not overlap: it counts the references to a node's
// backing file per node, and the RELEASE of a cached handle drops one too
// when, while that RELEASE ran, an open registered a backing file. The
// kernel then finds that backing file gone and fails the open with EIO
// (a reader's release racing a writer's open). A node that never changes
// mode has nothing to race.
func (n *wsNode) openMode(fd int, write bool) bool {
	return n.openModeStatx(fd, write, nil)
}

// openModeStatx is openMode for a file whose statx (with its mount,
// statxMnt) the caller has, or nil.
func (n *wsNode) openModeStatx(fd int, write bool, st *unix.Statx_t) bool {
	n.ioMu.Lock()
	defer n.ioMu.Unlock()
	if !n.decided {
		if st == nil {
			st = new(unix.Statx_t)
			if unix.Statx(fd, "", unix.AT_EMPTY_PATH, unix.STATX_SIZE|unix.STATX_MNT_ID, st) != nil {
				st.Mask = 0
			}
		}
		big := !write && st.Mask&unix.STATX_SIZE != 0 && st.Size >= passthroughMin
		n.pt = (write || big) && n.fs.passthrough.Load() && st.Mask&unix.STATX_MNT_ID != 0 && st.Mnt_id == n.fs.wsMnt
		n.decided = true
	}
	return n.pt
}

// statxMnt is statx of the object open at fd, with its mount id.
func statxMnt(fd int, st *unix.Statx_t) error {
	for {
		err := unix.Statx(fd, "", unix.AT_EMPTY_PATH|unix.AT_STATX_SYNC_AS_STAT, unix.STATX_BASIC_STATS|unix.STATX_BTIME|unix.STATX_MNT_ID, st)
		if err != unix.EINTR {
			return err
		}
	}
}

// addWriter registers h, open for writing, in fsys.writers when the mount
// uses passthrough: whichever mode the handle got (go-fuse keeps a node's
// backing file until its last handle's release has run, and uses it for an
// open that overlaps that), every step boundary captures its file.
func (f *fsys) addWriter(h *wsFile) {
	if h.write && f.passthrough.Load() {
		h.registered = true
		f.writers.add(h)
	}
}

// PassthroughFd offers the backing descriptor to go-fuse, which registers
// it with the kernel for the node's first open (see wsFile).
func (h *wsFile) PassthroughFd() (int, bool) { return h.fd, h.passthrough }

func (h *wsFile) setStep(s record.Seq) {
	h.mu.Lock()
	h.step = s
	h.mu.Unlock()
}

// recapture begins a change through the handle: it takes the workspace lock
// and, when the step moved on since the handle's last capture, captures the
// file again. The caller calls release after its syscall.
func (h *wsFile) recapture(ctx context.Context, op string) (release func(), errno syscall.Errno) {
	n := h.node
	ectx, who := engineCtx(ctx), callerOf(ctx)
	release, step, err := n.fs.eng.Begin(ectx, who)
	if err != nil {
		return nil, engineErrno(n.fs.log, op, "", err, seqInvalid)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if step != h.step {
		// An unlinked file has no path whose state could change.
		if p, ok := n.path(); ok {
			if err := n.fs.eng.CaptureLocked(ectx, who, n.changes(p)...); err != nil {
				release()
				return nil, engineErrno(n.fs.log, op, p, err, seqInvalid)
			}
		}
		h.step = step
	}
	return release, 0
}

func (h *wsFile) Read(ctx context.Context, dest []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	h.node.fs.served.Add(1)
	return fuse.ReadResultFd(uintptr(h.fd), off, len(dest)), 0
}

func (h *wsFile) Write(ctx context.Context, data []byte, off int64) (uint32, syscall.Errno) {
	h.node.fs.served.Add(1)
	release, errno := h.recapture(ctx, "write")
	if errno != 0 {
		return 0, errno
	}
	defer release()
	k, err := unix.Pwrite(h.fd, data, off)
	if err != nil {
		return 0, sysErrno(err)
	}
	return uint32(k), 0
}

func (h *wsFile) Allocate(ctx context.Context, off, size uint64, mode uint32) syscall.Errno {
	release, errno := h.recapture(ctx, "fallocate")
	if errno != 0 {
		return errno
	}
	defer release()
	return sysErrno(unix.Fallocate(h.fd, mode, int64(off), int64(size)))
}

func (h *wsFile) Lseek(ctx context.Context, off uint64, whence uint32) (uint64, syscall.Errno) {
	k, err := unix.Seek(h.fd, int64(off), int(whence))
	return uint64(k), sysErrno(err)
}

// Flush reports close(2) errors of the backing file (NFS-style write-back)
// without closing it: it may run once per dup'ed descriptor.
func (h *wsFile) Flush(ctx context.Context) syscall.Errno {
	h.node.fs.flushed.Add(1)
	fd, err := unix.Dup(h.fd)
	if err != nil {
		return sysErrno(err)
	}
	return sysErrno(unix.Close(fd))
}

func (h *wsFile) Fsync(ctx context.Context, flags uint32) syscall.Errno {
	if flags&1 != 0 { // FUSE_FSYNC_FDATASYNC
		return sysErrno(unix.Fdatasync(h.fd))
	}
	return sysErrno(unix.Fsync(h.fd))
}

func (h *wsFile) Release(ctx context.Context) syscall.Errno {
	if h.registered {
		h.node.fs.writers.remove(h)
	}
	h.node.fs.endWrite(h)
	return sysErrno(h.node.unhold(h.fd))
}

var _ fusefs.NodeCopyFileRanger = (*wsNode)(nil)

// CopyFileRange copies between two workspace files inside the kernel; the
// destination is a change like a write. Each side is its handle or, on a
// mount without OPEN, its node (noopen.go).
func (n *wsNode) CopyFileRange(ctx context.Context, fhIn fusefs.FileHandle, offIn uint64,
	out *fusefs.Inode, fhOut fusefs.FileHandle, offOut uint64, size uint64, flags uint64) (uint32, syscall.Errno) {
	on, ok := out.Operations().(*wsNode)
	if !ok {
		return 0, syscall.EXDEV
	}
	var release func()
	var errno syscall.Errno
	if dst, ok := fhOut.(*wsFile); ok {
		release, errno = dst.recapture(ctx, "copy_file_range")
	} else {
		release, errno = on.writeBegin(ctx, "copy_file_range")
	}
	if errno != 0 {
		return 0, errno
	}
	defer release()
	in, inDone, errno := ioOf(n, fhIn, false, "copy_file_range")
	if errno != 0 {
		return 0, errno
	}
	defer inDone()
	dst, dstDone, errno := ioOf(on, fhOut, true, "copy_file_range")
	if errno != 0 {
		return 0, errno
	}
	defer dstDone()
	oi, oo := int64(offIn), int64(offOut)
	k, err := unix.CopyFileRange(in, &oi, dst, &oo, int(size), int(flags))
	return uint32(k), sysErrno(err)
}
