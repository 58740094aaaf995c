package fs

import (
	"strconv"
	"syscall"
	"time"

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
//
// A node's path that no longer resolves (ENOENT, ENOTDIR, ELOOP) means the
// kernel holds a node the backing tree no longer has there: a rewind
// changed the tree behind the kernel's back while the request waited for
// it, or before the kernel's entry expired. Every method here then returns
// ESTALE: the VFS walks the path again with LOOKUP_REVAL, so a fresh lookup
// finds what the name is now, and it retries the call once (retry_estale).
// So `printf x > f` that waited for a rewind which removed f creates f
// again instead of failing with ENOENT.
type backing struct {
	fd  int    // the workspace root, O_RDONLY|O_DIRECTORY
	dev uint64 // its device, masked out of inode numbers
}

// root is the workspace root's resolver.
func (b *backing) root() wsdir.Dir { return wsdir.New(b.fd) }

// stale maps a failure to resolve a node's own path to ESTALE.
func stale(err error) error {
	switch err {
	case unix.ENOENT, unix.ENOTDIR, unix.ELOOP:
		return unix.ESTALE
	}
	return err
}

// openat2 opens the node at rel with flags.
func (b *backing) openat2(rel string, flags int) (int, error) {
	fd, err := b.root().Open(rel, flags)
	return fd, stale(err)
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
