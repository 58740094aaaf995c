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
