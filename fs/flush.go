package fs

import (
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
