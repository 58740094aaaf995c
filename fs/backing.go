package fs

import (
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	fusefs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"

	"github.com/zerofs/zerofs/internal/wsdir"
)

// backing is the workspace as the daemon sees it: a directory descriptor
// opened before mounting, resolved through wsdir (confined beneath it,
// refusing every symlink on the way, crossing mount points below it, in
// chunks far past PATH_MAX). Every path here is relative to it ("" is the
// root) and is a node's path from go-fuse's inode tree, so it is clean.
type backing struct {
	fd  int    // the workspace root, O_RDONLY|O_DIRECTORY
	dev uint64 // its device, masked out of inode numbers
}

// daemonRoot: the daemon runs as root (its effective uid, read once: a
// geteuid per create was three system calls of a create's thirty).
var daemonRoot = os.Geteuid() == 0

// root is the workspace root's resolver.
func (b *backing) root() wsdir.Dir { return wsdir.New(b.fd) }

// rewinds tracks the rewinds run through the mount, for stale.
//
// A request names a node the kernel resolved before sending it. A rewind
// changes the backing tree behind the kernel's back, and tells the kernel
// to forget what it changed only after it releases the workspace lock, so a
// request that waited for a rewind, or arrived before the kernel forgot,
// may name a node whose path the rewind removed or gave to another object.
// So may a request through a node that a lookup returned while a rewind
// ran (lookups do not wait for the workspace lock, and their reply can
// reach the kernel after the rewind's invalidation: wsNode.suspect).
// Such a request answers ESTALE: the VFS then walks the path again with
// LOOKUP_REVAL, finds what the name is now, and retries the call once
// (retry_estale), so `printf x > f` that waited for a rewind which removed
// f creates f again instead of failing with ENOENT. Without a rewind, a
// path that does not resolve keeps its own errno (a rename racing a lookup
// through the mount gives ENOENT or ELOOP, as go-fuse's loopback does).
type rewinds struct {
	inflight atomic.Int64  // rewinds begun whose invalidation has not finished
	started  atomic.Uint64 // rewinds begun, ever
}

// begin notes a rewind starting; the returned func notes it settled, once
// the kernel was told to forget what it changed.
func (r *rewinds) begin() (settled func()) {
	r.inflight.Add(1) // before started: see arrive
	r.started.Add(1)
	return func() { r.inflight.Add(-1) }
}

// arrival is what a request knew of rewinds when it arrived.
type arrival struct {
	started uint64
	busy    bool // a rewind was running or still invalidating
}

// arrive is taken when a request arrives, before it waits for anything.
// It reads started before inflight, the reverse of begin, so a rewind
// begun at the same moment is seen by one of the two.
func (r *rewinds) arrive() arrival {
	s := r.started.Load()
	return arrival{started: s, busy: r.inflight.Load() > 0}
}

// overlapped reports whether a rewind ran, or was still invalidating, at
// any moment since a.
func (r *rewinds) overlapped(a arrival) bool {
	return a.busy || r.started.Load() != a.started
}

// stale is the error for a failure to resolve a request's own node (not a
// name below it): ESTALE when the node's path is gone (ENOENT, ENOTDIR, or
// ELOOP: it now crosses a symlink) and a rewind may have moved it since the
// kernel resolved it; err itself otherwise.
func (r *rewinds) stale(a arrival, err error) error {
	switch err {
	case unix.ENOENT, unix.ENOTDIR, unix.ELOOP:
		if r.overlapped(a) {
			return unix.ESTALE
		}
	}
	return err
}

// openat2 opens the node at rel with flags.
func (b *backing) openat2(rel string, flags int) (int, error) {
	return b.root().Open(rel, flags)
}

// dir opens directory rel for use as the dirfd of *at calls. done closes it
// (it is a no-op for the root, which stays open).
func (b *backing) dir(rel string) (fd int, done func(), err error) {
	if rel == "" {
		return b.fd, func() {}, nil
	}
	fd, err = b.openat2(rel, unix.O_PATH|unix.O_DIRECTORY)
	if err != nil {
		return -1, nil, err
	}
	return fd, func() { unix.Close(fd) }, nil
}

// node opens rel itself with O_PATH, never following a final symlink (the
// descriptor then refers to the symlink). Metadata calls go through it:
// statx with AT_EMPTY_PATH, or the /proc/self/fd path of procPath.
func (b *backing) node(rel string) (fd int, done func(), err error) {
	if rel == "" {
		return b.fd, func() {}, nil
	}
	fd, err = b.openat2(rel, unix.O_PATH|unix.O_NOFOLLOW)
	if err != nil {
		return -1, nil, err
	}
	return fd, func() { unix.Close(fd) }, nil
}

// procPath names the object open at fd. Calls that follow a final symlink
// (chmod, chown, utimensat, getxattr, truncate) reach through this magic link
// to exactly that object, even when it is a symlink itself: the *at
// equivalents without a path do not exist for all of them.
func procPath(fd int) string {
	return "/proc/self/fd/" + strconv.Itoa(fd)
}

// statx stats name in dirfd without following a final symlink; name ""
// stats dirfd itself.
func statx(dirfd int, name string, st *unix.Statx_t) error {
	flags := unix.AT_SYMLINK_NOFOLLOW | unix.AT_STATX_SYNC_AS_STAT
	if name == "" {
		flags |= unix.AT_EMPTY_PATH
	}
	for {
		err := unix.Statx(dirfd, name, flags, unix.STATX_BASIC_STATS|unix.STATX_BTIME, st)
		if err != unix.EINTR {
			return err
		}
	}
}

// stable is the identity go-fuse keys inodes by: the backing inode number
// (with a foreign device mixed in, as go-fuse's loopback does) and the birth
// time as generation, so a reused inode number is a new node.
func (b *backing) stable(st *unix.Statx_t) fusefs.StableAttr {
	dev := unix.Mkdev(st.Dev_major, st.Dev_minor)
	swapped := (dev << 32) | (dev >> 32)
	rootSwapped := (b.dev << 32) | (b.dev >> 32)
	gen := uint64(1)
	if st.Mask&unix.STATX_BTIME != 0 {
		gen = uint64(st.Btime.Sec)*1e9 + uint64(st.Btime.Nsec)
	}
	return fusefs.StableAttr{
		Mode: uint32(st.Mode) & syscall.S_IFMT,
		Ino:  (swapped ^ rootSwapped) ^ st.Ino,
		Gen:  gen,
	}
}

// fillAttr copies a statx result into a FUSE attribute.
func fillAttr(st *unix.Statx_t, a *fuse.Attr) {
	a.Ino = st.Ino
	a.Size = st.Size
	a.Blocks = st.Blocks
	a.Atime, a.Atimensec = uint64(st.Atime.Sec), st.Atime.Nsec
	a.Mtime, a.Mtimensec = uint64(st.Mtime.Sec), st.Mtime.Nsec
	a.Ctime, a.Ctimensec = uint64(st.Ctime.Sec), st.Ctime.Nsec
	a.Mode = uint32(st.Mode)
	a.Nlink = st.Nlink
	a.Uid = st.Uid
	a.Gid = st.Gid
	a.Rdev = uint32(unix.Mkdev(st.Rdev_major, st.Rdev_minor))
	a.Blksize = st.Blksize
}

// setTimes sets atime/mtime on the object open at fd (O_PATH is fine).
func setTimes(fd int, atime, mtime *time.Time) error {
	ts := []unix.Timespec{{Nsec: unix.UTIME_OMIT}, {Nsec: unix.UTIME_OMIT}}
	var err error
	if atime != nil {
		if ts[0], err = unix.TimeToTimespec(*atime); err != nil {
			return err
		}
	}
	if mtime != nil {
		if ts[1], err = unix.TimeToTimespec(*mtime); err != nil {
			return err
		}
	}
	return unix.UtimesNanoAt(unix.AT_FDCWD, procPath(fd), ts, 0)
}

// join is the workspace path of name in directory dir.
func join(dir, name string) string { return wsdir.Join(dir, name) }

// split is the inverse of join.
func split(p string) (dir, name string) { return wsdir.Split(p) }

// dirCacheMax bounds the directory descriptors dirCache keeps open (the
// daemon's RLIMIT_NOFILE is shared with every handle the kernel holds).
const dirCacheMax = 1024

// dirCache keeps an O_PATH descriptor of the workspace directories that
// requests name, so that a request in a directory the daemon used recently
// costs no path walk (an openat2 and a close): a create, a removal or a
// lookup works relative to it, as libfuse's passthrough_hp does with its
// descriptor per inode. Each descriptor was opened beneath the workspace
// root, by the path the node then had; it is used only while the node
// still has that path and no rewind began since (a rewind changes paths
// behind the kernel's back: rewinds.stale), so a request resolves exactly
// what a walk of its path would. A directory moved or removed behind the
// daemon's back (by another process, in the backing directory) is dropped
// as soon as inotify reports it (IN_MOVE_SELF, IN_DELETE_SELF), with every
// kept directory below it: a request then walks its path again, and finds
// the name gone, as it would have without the cache, instead of following
// the directory where it went, maybe out of the workspace. Only directories
// on the workspace root's own mount are kept: a descriptor inside a
// filesystem mounted below the workspace would keep that filesystem busy.
type dirCache struct {
	mu  sync.Mutex // guards m, wds, watch and every entry's refs and gone
	m   map[*wsNode]*cachedDir
	wds map[int]*wsNode // inotify watch descriptor -> its node's entry
	// watch is the inotify instance, or -1 (before the first entry, and
	// after closeAll): without one nothing is kept. watchLoop reads it
	// with blocking reads on a thread of its own (in the runtime's poller
	// every wake-up cost an eventfd write and read and an epoll_pwait).
	watch int
	// rootWd watches the workspace root: removed by closeAll, its
	// IN_IGNORED wakes watchLoop to end.
	rootWd int
	closed bool
	// opened counts the directories resolved by path (for tests).
	opened atomic.Int64
}

// cachedDir is one kept directory descriptor.
type cachedDir struct {
	fd      int
	path    string // the node's path when fd was opened
	started uint64 // rewinds.started then
	refs    int    // requests using fd now
	gone    bool   // out of the cache: the last user closes fd
	wd      int    // its inotify watch
}

// dirWatchMask is what makes a kept directory stale.
const dirWatchMask = unix.IN_MOVE_SELF | unix.IN_DELETE_SELF | unix.IN_ONLYDIR

// watchLocked starts watching the directory open at fd, starting inotify
// (and the goroutine reading it) the first time.
func (c *dirCache) watchLocked(b *backing, fd int) (wd int, ok bool) {
	if c.m == nil { // the first time
		c.m, c.wds, c.watch = map[*wsNode]*cachedDir{}, map[int]*wsNode{}, -1
		ifd, err := unix.InotifyInit1(unix.IN_CLOEXEC)
		if err != nil {
			return 0, false
		}
		rwd, err := unix.InotifyAddWatch(ifd, procPath(b.fd), dirWatchMask)
		if err != nil {
			unix.Close(ifd)
			return 0, false
		}
		c.watch, c.rootWd = ifd, rwd
		go c.watchLoop(ifd)
	}
	if c.watch < 0 {
		return 0, false // closed, or no inotify
	}
	wd, err := unix.InotifyAddWatch(c.watch, procPath(fd), dirWatchMask)
	if err != nil {
		return 0, false
	}
	return wd, true
}

// watchLoop drops the entries inotify reports moved or removed, until
// closeAll; then it closes ifd.
func (c *dirCache) watchLoop(ifd int) {
	defer unix.Close(ifd)
	buf := make([]byte, 64*(unix.SizeofInotifyEvent+unix.NAME_MAX+1))
	for {
		k, err := unix.Read(ifd, buf)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return
		}
		c.mu.Lock()
		if c.closed {
			c.mu.Unlock()
			return
		}
		for off := 0; off+unix.SizeofInotifyEvent <= k; {
			ev := (*unix.InotifyEvent)(unsafe.Pointer(&buf[off]))
			off += unix.SizeofInotifyEvent + int(ev.Len)
			if ev.Mask&unix.IN_Q_OVERFLOW != 0 {
				for n, e := range c.m { // events lost: anything may have moved
					c.dropLocked(n, e)
				}
				continue
			}
			n := c.wds[int(ev.Wd)]
			e := c.m[n]
			if e == nil {
				continue
			}
			c.dropTreeLocked(n, e)
		}
		c.mu.Unlock()
	}
}

// open returns a descriptor of directory node n, whose path is p, for the
// duration of a request (done releases it).
func (c *dirCache) open(n *wsNode, p string) (fd int, done func(), err error) {
	f := n.fs
	started := f.rw.started.Load()
	keep := f.rw.inflight.Load() == 0 // a rewind under way may still move p
	c.mu.Lock()
	if e := c.m[n]; e != nil {
		if keep && e.path == p && e.started == started {
			e.refs++
			c.mu.Unlock()
			return e.fd, func() { c.release(e) }, nil
		}
		c.dropTreeLocked(n, e)
	}
	c.mu.Unlock()
	c.opened.Add(1)
	fd, err = f.ws.openat2(p, unix.O_PATH|unix.O_DIRECTORY)
	if err != nil {
		return -1, nil, err
	}
	var st unix.Statx_t
	if keep {
		keep = unix.Statx(fd, "", unix.AT_EMPTY_PATH, unix.STATX_INO|unix.STATX_MNT_ID, &st) == nil &&
			st.Mask&unix.STATX_MNT_ID != 0 && st.Mnt_id == f.wsMnt
	}
	if !keep {
		return fd, func() { unix.Close(fd) }, nil
	}
	e := &cachedDir{fd: fd, path: p, started: started, refs: 1}
	c.mu.Lock()
	if old := c.m[n]; old != nil {
		c.dropLocked(n, old)
	}
	// Only below a kept parent (or the root): every directory above a
	// kept one is watched, so a move of any of them is reported.
	if !c.parentKeptLocked(n, p) {
		c.mu.Unlock()
		return fd, func() { unix.Close(fd) }, nil
	}
	wd, watched := c.watchLocked(&f.ws, fd)
	if watched && (!stillAt(&f.ws, p, st.Ino) || f.rw.started.Load() != started) {
		// Moved between the walk and the watch: not kept.
		unix.InotifyRmWatch(c.watch, uint32(wd))
		watched = false
	}
	if !watched {
		c.mu.Unlock()
		return fd, func() { unix.Close(fd) }, nil
	}
	e.wd = wd
	if len(c.m) >= dirCacheMax {
		for k, v := range c.m { // any one: map order is random
			c.dropTreeLocked(k, v)
			break
		}
	}
	c.m[n] = e
	c.wds[wd] = n
	c.mu.Unlock()
	return fd, func() { c.release(e) }, nil
}

// stillAt reports whether path p still names directory ino, once its watch
// is in place: from then on, a move is reported.
func stillAt(b *backing, p string, ino uint64) bool {
	fd, err := b.openat2(p, unix.O_PATH|unix.O_DIRECTORY)
	if err != nil {
		return false
	}
	defer unix.Close(fd)
	var st unix.Statx_t
	return unix.Statx(fd, "", unix.AT_EMPTY_PATH, unix.STATX_INO, &st) == nil && st.Ino == ino
}

// closeAll drops every kept descriptor (at unmount: no request comes
// after).
func (c *dirCache) closeAll() {
	c.mu.Lock()
	for n, e := range c.m {
		c.dropLocked(n, e)
	}
	if c.watch >= 0 && c.m != nil {
		c.closed = true
		unix.InotifyRmWatch(c.watch, uint32(c.rootWd)) // wakes watchLoop
	}
	c.m, c.watch = map[*wsNode]*cachedDir{}, -1 // nothing is kept from now on
	c.mu.Unlock()
}

// parentKeptLocked reports whether the parent of directory node n, at p,
// is the root or kept at p's parent path.
func (c *dirCache) parentKeptLocked(n *wsNode, p string) bool {
	dir, _ := split(p)
	if dir == "" {
		return true
	}
	_, parent := n.Parent()
	if parent == nil {
		return false
	}
	pn, ok := parent.Operations().(*wsNode)
	if !ok {
		return false
	}
	e := c.m[pn]
	return e != nil && e.path == dir
}

// dropTreeLocked drops n's entry e and every entry below it (what moves
// with it).
func (c *dirCache) dropTreeLocked(n *wsNode, e *cachedDir) {
	for dn, de := range c.m {
		if strings.HasPrefix(de.path, e.path+"/") {
			c.dropLocked(dn, de)
		}
	}
	c.dropLocked(n, e)
}

// take gives the caller n's kept descriptor, if n is kept at p, valid
// (as open would use it) and in use by no request: it leaves the cache,
// with every entry below it, and its watch. A directory about to be
// removed keeps it as its held descriptor (holdRemoved) rather than
// opening the same directory again and closing this one at its FORGET.
func (c *dirCache) take(n *wsNode, p string) (fd int, ok bool) {
	f := n.fs
	started := f.rw.started.Load()
	if f.rw.inflight.Load() != 0 {
		return -1, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	e := c.m[n]
	if e == nil || e.path != p || e.started != started || e.refs != 0 || e.gone {
		return -1, false
	}
	e.refs++ // not closed by dropLocked: the caller owns fd
	c.dropTreeLocked(n, e)
	return e.fd, true
}

// forget drops n's descriptor, if kept (its node left the tree).
func (c *dirCache) forget(n *wsNode) {
	c.mu.Lock()
	if e := c.m[n]; e != nil {
		c.dropTreeLocked(n, e)
	}
	c.mu.Unlock()
}

func (c *dirCache) dropLocked(n *wsNode, e *cachedDir) {
	delete(c.m, n)
	if c.wds[e.wd] == n {
		delete(c.wds, e.wd)
		if c.watch >= 0 {
			unix.InotifyRmWatch(c.watch, uint32(e.wd))
		}
	}
	e.gone = true
	if e.refs == 0 {
		unix.Close(e.fd)
	}
}

func (c *dirCache) release(e *cachedDir) {
	c.mu.Lock()
	e.refs--
	if e.gone && e.refs == 0 {
		unix.Close(e.fd)
	}
	c.mu.Unlock()
}
