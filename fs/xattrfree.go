package fs

import (
	"golang.org/x/sys/unix"
)

// Files known to have no extended attributes: a removal's capture reads a
// file's xattrs (a listxattr) unless the daemon knows there are none, which
// it does for a file it created itself, since the last rewind: at a create
// the backing filesystem gives a new file only the parent's default ACL
// (system.posix_acl_access) and a security module's label, and after it
// every xattr change through the mount is a SETXATTR of the node, which
// forgets what is known. A rewind, which writes the backing tree itself,
// forgets everything known before it (the marks hold rewinds.started).
// Not seen: an xattr set directly on the backing file, behind the mount,
// on a file the mount created; its removal through the mount then records
// no xattrs (docs/performance.md, System calls per entry).
//
// A mark is rewinds.started+1 when it was taken (0: nothing known); it
// holds while no rewind has begun since.

// probeXattrFree reports whether a file created in the directory open at
// dirfd gets no xattrs beyond a default ACL's (no security module labels
// new files there): an O_TMPFILE, never linked, looked at and closed.
func probeXattrFree(dirfd int) bool {
	fd, err := unix.Openat(dirfd, ".", unix.O_TMPFILE|unix.O_RDWR|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return false
	}
	defer unix.Close(fd)
	var buf [256]byte
	n, err := unix.Flistxattr(fd, buf[:])
	if err != nil {
		return false
	}
	for _, name := range splitNames(buf[:n]) {
		if name != "system.posix_acl_access" {
			return false
		}
	}
	return true
}

// splitNames splits a listxattr list.
func splitNames(b []byte) []string {
	var out []string
	start := 0
	for i, c := range b {
		if c == 0 {
			out = append(out, string(b[start:i]))
			start = i + 1
		}
	}
	return out
}

// mark is the value a node's mark takes for what is known from arrival a
// on: 0 (nothing) when a rewind was running then.
func mark(a arrival) uint64 {
	if a.busy {
		return 0
	}
	return a.started + 1
}

// holds reports whether mark m, taken at some arrival, still holds: no
// rewind has begun since.
func (f *fsys) holds(m uint64) bool {
	return m != 0 && m == f.rw.started.Load()+1 && f.rw.inflight.Load() == 0
}

// noDefaultACL reports whether directory n, open at dfd, has no default
// ACL (so a file created in it gets no xattr): known from its own mark, or
// asked once (a getxattr) and marked.
func (n *wsNode) noDefaultACL(a arrival, dfd int) bool {
	if n.fs.holds(n.aclFree.Load()) {
		return true
	}
	m := mark(a)
	if m == 0 {
		return false
	}
	_, err := unix.Getxattr(procPath(dfd), "system.posix_acl_default", nil)
	if err != unix.ENODATA {
		return false
	}
	n.aclFree.Store(m)
	return true
}

// madeXattrFree marks child, which this request (arriving at a) just
// created in n (open at dfd), as having no xattrs where the mount knows it
// (a directory also as having no default ACL).
func (n *wsNode) madeXattrFree(a arrival, dfd int, child *wsNode, dir bool) {
	if !n.fs.xattrFree || child == nil || !n.noDefaultACL(a, dfd) {
		return
	}
	m := mark(a)
	child.xattrFree.Store(m)
	if dir {
		child.aclFree.Store(m)
	}
}

// forgetXattrs forgets what is known of n's xattrs (a SETXATTR).
func (n *wsNode) forgetXattrs() {
	n.xattrFree.Store(0)
	n.aclFree.Store(0)
}

// childXattrFree reports whether n's child name is a file known to have no
// xattrs.
func (n *wsNode) childXattrFree(name string) bool {
	ch := n.GetChild(name)
	if ch == nil {
		return false
	}
	cn, ok := ch.Operations().(*wsNode)
	return ok && n.fs.holds(cn.xattrFree.Load())
}
