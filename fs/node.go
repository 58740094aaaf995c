package fs

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	fusefs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"

	"github.com/zerofs/zerofs/record"
	"github.com/zerofs/zerofs/rewind"
)

// Kernel cache timeouts. Workspace entries and attributes can change behind
// the kernel's back only through a rewind, which invalidates exactly what it
// changed (invalidate.go), so the kernel keeps them for wsCacheTimeout:
// every LOOKUP and GETATTR it answers itself is a round trip to the daemon
// saved (docs/performance.md, Code written for speed). wsTimeout
// bounds what gc can remove (a view root's entry). Views never change.
const (
	wsCacheTimeout = time.Hour
	wsTimeout      = time.Second
	viewTimeout    = time.Hour
)

// fsys is what every node of one mount shares.
type fsys struct {
	eng  *rewind.Engine
	ws   backing
	rw   rewinds // the rewinds run through the mount (backing.go)
	log  *slog.Logger
	root *wsNode

	// ctl is the control directory's inode, made once in the root's OnAdd.
	ctl *fusefs.Inode

	// prog counts the running rewind's or gc's progress, for .zero/status
	// (read without any lock the work holds).
	prog rewind.ProgressCounter

	// Shown by .zero/status.
	workspace, mountpoint, store string
	sync                         bool
	autoStep                     time.Duration

	// The user who mounted (the daemon's effective ids): the owner of the
	// control files, who alone (with root) may use them.
	uid, gid uint32
	// The workspace root's mtime at mount: the time of the control files,
	// and of recorded states from older history, which record no time.
	mtime time.Time

	mu     sync.Mutex       // guards lastGC
	lastGC *record.GCResult // the last GC run through .zero/gc

	// passthrough: opens of workspace files offer their descriptor for
	// FUSE passthrough (set once the mount has shown it works).
	passthrough atomic.Bool
	// noOpen: the kernel sends no OPEN (Options.NoOpen, noopen.go).
	noOpen bool
	// xattrFree: a file the daemon creates gets no xattrs unless its
	// directory has a default ACL (probeXattrFree, xattrfree.go).
	xattrFree bool
	// ioFds counts the descriptors nodes keep for requests without a
	// handle (nodeIO).
	ioFds atomic.Int64
	// viewIO: the view nodes holding content open for requests without
	// a handle, closed at unmount if the kernel never forgot them.
	viewIO viewIOs
	// noInvalidate holds the invalidateParts a test switched off.
	noInvalidate atomic.Uint32
	// served counts READ and WRITE requests of workspace files that reached
	// the daemon (none do with passthrough): what tests look at.
	served atomic.Int64
	// flushed counts FLUSH requests of workspace files (a test's window
	// on FOPEN_NOFLUSH).
	flushed atomic.Int64
	// missed counts LOOKUPs answered ENOENT (negative.go; for tests).
	missed atomic.Int64
	// opens counts OPEN requests (noopen.go; for tests).
	opens atomic.Int64
	// ctlAttrs counts GETATTR requests of control files (for tests).
	ctlAttrs atomic.Int64

	writers *writerSet  // passthrough handles open for writing
	fds     openFds     // every backing descriptor its nodes hold (held.go)
	wopen   *writeOpens // every handle open for writing, by inode (writeopens.go)
	wsMnt   uint64      // the mount id of the workspace root (openMode: passthrough only on it)
	links   linkTable   // the names of files with several links (links.go)
	dirs    dirCache    // directory descriptors kept for requests (backing.go)
	// rootFlushless: the workspace root's filesystem needs no FLUSH
	// (noFlushStatx), decided once (rootFlush).
	rootFlush     sync.Once
	rootFlushless bool

	notTsSeen notTsLog // views that refused changed present content
}

// writerSet holds the passthrough handles open for writing. Their writes
// never reach the daemon, so Write cannot capture their file again in a new
// step; the engine captures them at every step boundary instead
// (rewind.Options.OpenWriters).
type writerSet struct {
	mu sync.Mutex // guards m
	m  map[*wsFile]struct{}
	// off makes paths name nothing: a test seam only, to show that a test
	// fails without the boundary captures.
	off atomic.Bool
}

// paths is rewind.Options.OpenWriters: the paths of the handles' files (an
// unlinked file has none: nothing at any path changes through it).
func (w *writerSet) paths() []string {
	if w.off.Load() {
		return nil
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []string
	for h := range w.m {
		if p, ok := h.node.path(); ok {
			out = append(out, paths(h.node.changes(p))...)
		}
	}
	return out
}

// add registers h. Call it under the capture (Begin) that opened the file,
// so that no step boundary falls between its capture and its registration.
func (w *writerSet) add(h *wsFile) {
	w.mu.Lock()
	w.m[h] = struct{}{}
	w.mu.Unlock()
}

func (w *writerSet) remove(h *wsFile) {
	w.mu.Lock()
	delete(w.m, h)
	w.mu.Unlock()
}

// wsNode is any node of the workspace (root, directory, file, symlink,
// device): a loopback onto the backing directory.
type wsNode struct {
	fusefs.Inode
	fs *fsys

	ioMu    sync.Mutex // guards decided, pt, flushDecided, flushless
	decided bool       // its first open chose pt (openMode)
	pt      bool       // whether its handles offer passthrough
	// flushDecided: its first open for writing looked at its filesystem;
	// flushless: a close there never fails (noFlush).
	flushDecided, flushless bool

	// held: the descriptors of its open handles, for a node without a
	// name (held.go).
	held heldFds
	// io: what it keeps for requests without a handle (noopen.go).
	io nodeIO

	// suspect: last looked up while a rewind ran, so the kernel's entry
	// for it may describe what the rewind then changed (rewinds.stale).
	suspect atomic.Bool
	// seen is rewinds.started when the kernel last got an entry for this
	// node (a lookup or a create). A rewind begun since may have removed or
	// replaced its path behind the kernel's back, even if the request
	// reaches us after the rewind settled: the kernel may have resolved the
	// name before the rewind's invalidation (rewinds.stale).
	seen atomic.Uint64
	// xattrFree and aclFree are marks (xattrfree.go): the node has no
	// xattrs; the directory has no default ACL.
	xattrFree, aclFree atomic.Uint64
}

var (
	_ fusefs.NodeOnAdder       = (*wsNode)(nil)
	_ fusefs.NodeLookuper      = (*wsNode)(nil)
	_ fusefs.NodeGetattrer     = (*wsNode)(nil)
	_ fusefs.NodeSetattrer     = (*wsNode)(nil)
	_ fusefs.NodeStatfser      = (*wsNode)(nil)
	_ fusefs.NodeReadlinker    = (*wsNode)(nil)
	_ fusefs.NodeGetxattrer    = (*wsNode)(nil)
	_ fusefs.NodeSetxattrer    = (*wsNode)(nil)
	_ fusefs.NodeListxattrer   = (*wsNode)(nil)
	_ fusefs.NodeRemovexattrer = (*wsNode)(nil)
)

func (n *wsNode) isRoot() bool { return n == n.fs.root }

// path is the node's workspace path, walking go-fuse's tree up to the root.
// ok is false for a node no longer in the tree: unlinked while open, or
// displaced by what a rewind left at its name. Callers answer
// resolveErrno(ENOENT), like a path that no longer resolves.
func (n *wsNode) path() (p string, ok bool) {
	root := n.fs.root.EmbeddedInode()
	var names []string
	for in := n.EmbeddedInode(); in != root; {
		name, parent := in.Parent()
		if parent == nil {
			return "", false
		}
		names = append(names, name)
		in = parent
	}
	for i := len(names) - 1; i >= 0; i-- {
		p = join(p, names[i])
	}
	return p, true
}

// begin calls Engine.Begin for a mutating request: captures changes, and
// returns release, to be called after the backing syscall.
func (n *wsNode) begin(ctx context.Context, op string, changes ...rewind.Change) (release func(), step record.Seq, errno syscall.Errno) {
	release, step, err := n.fs.eng.Begin(engineCtx(ctx), callerOf(ctx), changes...)
	if err != nil {
		p := ""
		if len(changes) > 0 {
			p = changes[0].Path
		}
		return nil, 0, engineErrno(n.fs.log, op, p, err, seqInvalid)
	}
	return release, step, 0
}

// newChild makes (or finds) the inode for a backing object just looked up
// or created as name under n, and fills out.
func (n *wsNode) newChild(ctx context.Context, name string, st *unix.Statx_t, out *fuse.EntryOut) *fusefs.Inode {
	fillAttr(st, &out.Attr)
	seen := n.fs.rw.started.Load()
	ch := n.NewInode(ctx, &wsNode{fs: n.fs}, n.fs.ws.stable(st))
	if c, ok := ch.Operations().(*wsNode); ok {
		// The node the kernel now holds an entry for (a new one, or one it
		// knew, looked up again) was resolved after this many rewinds.
		c.seen.Store(seen)
		if st.Nlink > 1 && st.Mode&unix.S_IFMT != unix.S_IFDIR {
			n.fs.noteLink(ch.StableAttr().Ino, n, name)
		}
	}
	return ch
}

func (n *wsNode) OnAdd(ctx context.Context) {
	if n.isRoot() {
		var ctl fusefs.InodeEmbedder = &ctlDir{fs: n.fs}
		if n.fs.noOpen {
			ctl = &ctlMountDir{fs: n.fs} // the control mount's mount point (ctlmount.go)
		}
		n.fs.ctl = n.NewPersistentInode(ctx, ctl, fusefs.StableAttr{Mode: syscall.S_IFDIR})
	}
}

func (n *wsNode) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*fusefs.Inode, syscall.Errno) {
	if n.isRoot() && record.IsReserved(name) {
		return n.fs.lookupReserved(ctx, name, out)
	}
	a := n.fs.rw.arrive()
	dfd, done, errno := n.dirFd(a)
	if errno != 0 {
		return nil, errno
	}
	defer done()
	var st unix.Statx_t
	if err := statx(dfd, name, &st); err != nil {
		return nil, sysErrno(err)
	}
	ch := n.newChild(ctx, name, &st, out)
	if c, ok := ch.Operations().(*wsNode); ok {
		// Lookups do not wait for a rewind. One that overlapped a rewind
		// may describe what the rewind then changed, and reach the kernel
		// after the rewind's invalidation: the kernel keeps it for no time,
		// and a request through it that finds it gone is stale.
		overlapped := n.fs.rw.overlapped(a)
		if overlapped {
			out.SetEntryTimeout(time.Nanosecond)
			out.SetAttrTimeout(time.Nanosecond)
		}
		c.suspect.Store(overlapped)
	}
	return ch, 0
}

// stat stats the node itself.
func (n *wsNode) stat(st *unix.Statx_t) syscall.Errno {
	return n.withAt(n.fs.rw.arrive(), func(dfd int, name string) error { return statx(dfd, name, st) })
}

func (n *wsNode) Getattr(ctx context.Context, f fusefs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	var st unix.Statx_t
	if h, ok := f.(*wsFile); ok {
		// An open handle still works for a node unlinked while open.
		if err := statx(h.fd, "", &st); err != nil {
			return sysErrno(err)
		}
		if _, named := n.path(); !named {
			// Removed, its inode kept or stashed by the store: the
			// store's links are not the process's to see.
			st.Nlink -= min(st.Nlink, uint32(n.fs.eng.Kept(h.fd)))
		}
	} else if n.fs.noOpen && !n.IsDir() {
		// Without OPEN no request names the descriptor (noopen.go):
		// the node's own is its file, its path may name another.
		if errno := n.statOwn(&st); errno != 0 {
			return errno
		}
	} else if errno := n.stat(&st); errno == syscall.ENOENT || errno == syscall.ESTALE {
		// A directory open but renamed over, or an open O_TMPFILE file:
		// the kernel sends no handle, so ask one of the node's own. With
		// none, the node is gone (ESTALE: a rewind may have moved it).
		if herr := n.statHeld(&st); herr == syscall.ENOENT {
			return errno
		} else if herr != 0 {
			return herr
		}
	} else if errno != 0 {
		return errno
	}
	fillAttr(&st, &out.Attr)
	return 0
}

// Setattr captures before any change: size (truncate), mode (chmod),
// owner (chown), and times alone (touch, utimensat). A touch is captured
// like a chmod so that the log knows every change made through the mount:
// a view that serves present content can then tell a change made outside
// the mount (viewaccess.go) also after a remount.
func (n *wsNode) Setattr(ctx context.Context, f fusefs.FileHandle, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	a := n.fs.rw.arrive()
	p, ok := n.path()
	h, _ := f.(*wsFile)
	if !ok && h == nil && !n.fs.noOpen {
		return n.resolveErrno(a, unix.ENOENT)
	}
	size, hasSize := in.GetSize()
	mode, hasMode := in.GetMode()
	_, hasUID := in.GetUID()
	_, hasGID := in.GetGID()
	var changes []rewind.Change
	_, hasATime := in.GetATime()
	_, hasMTime := in.GetMTime()
	// The kernel asks the daemon to clear set-id bits (killpriv.go); an
	// explicit mode wins.
	kill := killRequested(in) && !hasMode
	if (hasSize || hasMode || hasUID || hasGID || hasATime || hasMTime || kill) && ok {
		changes = n.changes(p)
	}
	release, step, errno := n.begin(ctx, "setattr", changes...)
	if errno != 0 {
		return errno
	}
	defer release()
	if h != nil && len(changes) > 0 {
		h.setStep(step)
	} else if len(changes) > 0 {
		n.noteStep(step)
	}

	// The object changed: an open descriptor (fd), or, for a change by
	// path that neither truncates nor clears set-id bits (tar's chmod,
	// chown and utimes), the node named for *at calls: no descriptor of
	// its own to open and close.
	fd, dfd, name := -1, -1, ""
	if h != nil {
		fd = h.fd
	} else if kept, isKept := n.keptFd(); isKept {
		// Without OPEN (noopen.go) the node's own descriptor is its
		// file; its path may name another (after a rewind) or none.
		defer unix.Close(kept)
		fd = kept
	} else if !ok {
		return n.resolveErrno(a, unix.ENOENT)
	} else if !hasSize && !n.IsDir() {
		var done func()
		var errno syscall.Errno
		if dfd, name, done, errno = n.at(a); errno != 0 {
			return errno
		}
		defer done()
	} else {
		var done func()
		var err error
		if fd, done, err = n.fs.ws.node(p); err != nil {
			return n.resolveErrno(a, err)
		}
		defer done()
	}
	if fd < 0 {
		var st unix.Statx_t
		if errno := n.setattrAt(ctx, a, dfd, name, in, kill, &st); errno != 0 {
			return errno
		}
		fillAttr(&st, &out.Attr)
		out.SetTimeout(wsCacheTimeout)
		return 0
	}
	proc := procPath(fd)
	if hasMode {
		if err := unix.Fchmodat(unix.AT_FDCWD, proc, mode&07777, 0); err != nil {
			return sysErrno(err)
		}
	}
	if hasUID || hasGID {
		u, g := chownIDs(in)
		if err := unix.Fchownat(unix.AT_FDCWD, proc, u, g, 0); err != nil {
			return sysErrno(err)
		}
	}
	// Truncate before setting times, so an explicit mtime survives.
	if hasSize {
		if h == nil || !h.write {
			// A truncate by path writes like a handle: registered, and
			// the inode detached from the store if it is a kept blob.
			key, ok := n.fs.wopen.add(fd)
			if !ok {
				return syscall.EIO
			}
			defer n.fs.wopen.remove(key)
			if err := n.fs.eng.Detach(fd); err != nil {
				return engineErrno(n.fs.log, "setattr", p, err, seqInvalid)
			}
		}
		var err error
		if h != nil {
			err = unix.Ftruncate(fd, int64(size))
		} else {
			err = unix.Truncate(proc, int64(size))
		}
		if err != nil {
			return sysErrno(err)
		}
	}
	if kill {
		if err := killSetID(ctx, fd, proc); err != nil {
			return sysErrno(err)
		}
	}
	atime, hasA := in.GetATime()
	mtime, hasM := in.GetMTime()
	if hasA || hasM {
		var ap, mp *time.Time
		if hasA {
			ap = &atime
		}
		if hasM {
			mp = &mtime
		}
		if err := setTimes(fd, ap, mp); err != nil {
			return sysErrno(err)
		}
	}
	var st unix.Statx_t
	if err := statx(fd, "", &st); err != nil {
		return sysErrno(err)
	}
	fillAttr(&st, &out.Attr)
	// The attributes are exact (read under the workspace lock, after the
	// change) and, like a GETATTR's, stay so until a rewind invalidates
	// them: without a timeout the kernel would ask again at once (go-fuse
	// sets none on a SETATTR reply), one GETATTR more per chmod, chown or
	// utimes (tar -x does all three per file).
	out.SetTimeout(wsCacheTimeout)
	return 0
}

// setattrAt makes a SETATTR's mode, owner and time changes to the
// non-directory name in dfd, never following it if it is a symlink, clears
// its set-id bits where kill asks (killSetID), and fills st with its
// attributes after.
func (n *wsNode) setattrAt(ctx context.Context, a arrival, dfd int, name string, in *fuse.SetAttrIn, kill bool, st *unix.Statx_t) syscall.Errno {
	if mode, ok := in.GetMode(); ok {
		if err := chmodAt(dfd, name, mode&07777); err != nil {
			return n.resolveErrno(a, err)
		}
	}
	if u, g := chownIDs(in); u != -1 || g != -1 {
		if err := unix.Fchownat(dfd, name, u, g, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			return n.resolveErrno(a, err)
		}
	}
	atime, hasA := in.GetATime()
	mtime, hasM := in.GetMTime()
	if hasA || hasM {
		ts := []unix.Timespec{{Nsec: unix.UTIME_OMIT}, {Nsec: unix.UTIME_OMIT}}
		var err error
		if hasA {
			if ts[0], err = unix.TimeToTimespec(atime); err != nil {
				return sysErrno(err)
			}
		}
		if hasM {
			if ts[1], err = unix.TimeToTimespec(mtime); err != nil {
				return sysErrno(err)
			}
		}
		if err := unix.UtimesNanoAt(dfd, name, ts, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			return n.resolveErrno(a, err)
		}
	}
	if err := statx(dfd, name, st); err != nil {
		return n.resolveErrno(a, err)
	}
	if !kill || st.Mode&unix.S_IFMT != unix.S_IFREG || st.Mode&setIDBits == 0 {
		return 0
	}
	mode := uint32(st.Mode)
	clear := mode & unix.S_ISUID
	if mode&unix.S_ISGID != 0 && (mode&unix.S_IXGRP != 0 || !inGroupOrRoot(ctx, st.Gid)) {
		clear |= unix.S_ISGID
	}
	if clear == 0 {
		return 0
	}
	if err := chmodAt(dfd, name, (mode&0o7777)&^clear); err != nil {
		return n.resolveErrno(a, err)
	}
	if err := statx(dfd, name, st); err != nil {
		return n.resolveErrno(a, err)
	}
	return 0
}

// chmodAt sets the mode of name in dfd without following it.
func chmodAt(dfd int, name string, mode uint32) error {
	err := unix.Fchmodat(dfd, name, mode, unix.AT_SYMLINK_NOFOLLOW)
	if err == unix.EOPNOTSUPP || err == unix.ENOSYS {
		// No fchmodat2 (before Linux 6.6), or a symlink: through an
		// O_PATH descriptor of the name.
		var fd int
		if fd, err = unix.Openat(dfd, name, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0); err == nil {
			err = unix.Fchmodat(unix.AT_FDCWD, procPath(fd), mode, 0)
			unix.Close(fd)
		}
	}
	return err
}

// Statfs reports the filesystem the node is on: one mounted below the
// workspace (a tmpfs) has its own size. A node that no longer resolves
// (an unlinked file still open) reports the workspace's.
func (n *wsNode) Statfs(ctx context.Context, out *fuse.StatfsOut) syscall.Errno {
	var st unix.Statfs_t
	if n.withNode(n.fs.rw.arrive(), func(fd int) error { return unix.Fstatfs(fd, &st) }) != 0 {
		if err := unix.Fstatfs(n.fs.ws.fd, &st); err != nil {
			return sysErrno(err)
		}
	}
	out.Blocks = st.Blocks
	out.Bfree = st.Bfree
	out.Bavail = st.Bavail
	out.Files = st.Files
	out.Ffree = st.Ffree
	out.Bsize = uint32(st.Bsize)
	out.NameLen = uint32(st.Namelen)
	out.Frsize = uint32(st.Frsize)
	return 0
}

func (n *wsNode) Readlink(ctx context.Context) ([]byte, syscall.Errno) {
	var target []byte
	errno := n.withNode(n.fs.rw.arrive(), func(fd int) error {
		for size := 256; ; size *= 2 {
			buf := make([]byte, size)
			k, err := unix.Readlinkat(fd, "", buf)
			if err != nil {
				return err
			}
			if k < size {
				target = buf[:k]
				return nil
			}
		}
	})
	return target, errno
}

// resolveErrno is the errno for a request that arrived at a and could not
// resolve its own node: see rewinds.stale.
func (n *wsNode) resolveErrno(a arrival, err error) syscall.Errno {
	if n.suspect.Load() || n.seen.Load() != n.fs.rw.started.Load() {
		a.busy = true
	}
	return sysErrno(n.fs.rw.stale(a, err))
}

// dirFd is a descriptor of directory node n for *at calls, for a request
// that arrived at a; done releases it. The root's stays open; others come
// from fsys.dirs.
func (n *wsNode) dirFd(a arrival) (fd int, done func(), errno syscall.Errno) {
	if n.isRoot() {
		return n.fs.ws.fd, func() {}, 0
	}
	p, ok := n.path()
	if !ok {
		return -1, nil, n.resolveErrno(a, unix.ENOENT)
	}
	return n.dirAt(a, p)
}

// dirAt is dirFd for directory node n found at path p (its path, taken
// earlier in the same request).
func (n *wsNode) dirAt(a arrival, p string) (fd int, done func(), errno syscall.Errno) {
	if n.isRoot() {
		return n.fs.ws.fd, func() {}, 0
	}
	fd, done, err := n.fs.dirs.open(n, p)
	if err != nil {
		return -1, nil, n.resolveErrno(a, err)
	}
	return fd, done, 0
}

// at names the node for *at calls, for a request that arrived at a: a
// directory by its own descriptor and the name "", anything else by its
// parent's descriptor and its name. done releases the descriptor.
func (n *wsNode) at(a arrival) (dfd int, name string, done func(), errno syscall.Errno) {
	if n.IsDir() {
		dfd, done, errno = n.dirFd(a)
		return dfd, "", done, errno
	}
	name, parent := n.Parent()
	if parent == nil {
		return -1, "", nil, n.resolveErrno(a, unix.ENOENT)
	}
	pn, ok := parent.Operations().(*wsNode)
	if !ok {
		return -1, "", nil, n.resolveErrno(a, unix.ENOENT)
	}
	dfd, done, errno = pn.dirFd(a)
	return dfd, name, done, errno
}

// atPath is the path that reaches (dfd, name) through /proc, for the calls
// that have no *at form (the xattr calls): dfd's own magic link when name
// is "" (followed: it is the object itself), else the name in it (not
// followed by the l* calls).
func atPath(dfd int, name string) string {
	if name == "" {
		return procPath(dfd)
	}
	return procPath(dfd) + "/" + name
}

// withAt runs fn on the node named for *at calls (at), for a request that
// arrived at a. An error that says the node's own name is gone is the
// node's failure to resolve (resolveErrno).
func (n *wsNode) withAt(a arrival, fn func(dfd int, name string) error) syscall.Errno {
	dfd, name, done, errno := n.at(a)
	if errno != 0 {
		return errno
	}
	defer done()
	if err := fn(dfd, name); err != nil {
		return n.resolveErrno(a, err)
	}
	return 0
}

// withNode runs fn on the node's O_PATH descriptor, for a request that
// arrived at a.
func (n *wsNode) withNode(a arrival, fn func(fd int) error) syscall.Errno {
	p, ok := n.path()
	if !ok {
		return n.resolveErrno(a, unix.ENOENT)
	}
	fd, done, err := n.fs.ws.node(p)
	if err != nil {
		return n.resolveErrno(a, err)
	}
	defer done()
	return sysErrno(fn(fd))
}

func (n *wsNode) Getxattr(ctx context.Context, attr string, dest []byte) (uint32, syscall.Errno) {
	var size int
	errno := n.withAt(n.fs.rw.arrive(), func(dfd int, name string) (err error) {
		if name == "" {
			size, err = unix.Getxattr(procPath(dfd), attr, dest)
		} else {
			size, err = unix.Lgetxattr(atPath(dfd, name), attr, dest)
		}
		return err
	})
	return uint32(size), errno
}

func (n *wsNode) Listxattr(ctx context.Context, dest []byte) (uint32, syscall.Errno) {
	var size int
	errno := n.withAt(n.fs.rw.arrive(), func(dfd int, name string) (err error) {
		if name == "" {
			size, err = unix.Listxattr(procPath(dfd), dest)
		} else {
			size, err = unix.Llistxattr(atPath(dfd, name), dest)
		}
		return err
	})
	return uint32(size), errno
}

// Setxattr and Removexattr are changes: they capture the path first (a
// before-state records its xattrs), as a chmod does.
func (n *wsNode) Setxattr(ctx context.Context, attr string, data []byte, flags uint32) syscall.Errno {
	a := n.fs.rw.arrive()
	release, errno := n.beginXattr(ctx, a, "setxattr")
	if errno != 0 {
		return errno
	}
	defer release()
	n.forgetXattrs()
	return n.withAt(a, func(dfd int, name string) error {
		if name == "" {
			return unix.Setxattr(procPath(dfd), attr, data, int(flags))
		}
		return unix.Lsetxattr(atPath(dfd, name), attr, data, int(flags))
	})
}

func (n *wsNode) Removexattr(ctx context.Context, attr string) syscall.Errno {
	a := n.fs.rw.arrive()
	release, errno := n.beginXattr(ctx, a, "removexattr")
	if errno != 0 {
		return errno
	}
	defer release()
	return n.withAt(a, func(dfd int, name string) error {
		if name == "" {
			return unix.Removexattr(procPath(dfd), attr)
		}
		return unix.Lremovexattr(atPath(dfd, name), attr)
	})
}

// beginXattr begins an xattr change of the node: its names are captured.
func (n *wsNode) beginXattr(ctx context.Context, a arrival, op string) (release func(), errno syscall.Errno) {
	p, ok := n.path()
	if !ok {
		return nil, n.resolveErrno(a, unix.ENOENT)
	}
	release, _, errno = n.begin(ctx, op, n.changes(p)...)
	return release, errno
}

// chownIDs are the owner and group a SETATTR asks for, as fchownat takes
// them: -1 for the one it leaves as it is.
func chownIDs(in *fuse.SetAttrIn) (uid, gid int) {
	uid, gid = -1, -1
	if u, ok := in.GetUID(); ok {
		uid = int(u)
	}
	if g, ok := in.GetGID(); ok {
		gid = int(g)
	}
	return uid, gid
}
