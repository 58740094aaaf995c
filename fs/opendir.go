package fs

import (
	"sync/atomic"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fuse"
)

// dirlessFS serves directories without OPENDIR and RELEASEDIR: the two
// requests a warm `find` or `git status` still paid for every directory
// once the kernel keeps listings (about 2,700 of them for Go's src, each a
// round trip to the daemon).
//
// The kernel offers FUSE_NO_OPENDIR_SUPPORT: when the daemon answers
// OPENDIR with ENOSYS, the kernel stops sending OPENDIR and RELEASEDIR for
// good, opens every directory with FOPEN_KEEP_CACHE | FOPEN_CACHE_DIR (its
// listing is kept across opens, as the workspace's directories already
// asked for), and sends READDIR and FSYNCDIR with file handle 0. go-fuse's
// node bridge knows no handle 0, so dirlessFS, in front of it, serves each
// such request through a handle of its own: OPENDIR, the request, and
// RELEASEDIR, all inside the daemon. A listing read in several READDIR
// requests seeks to each request's offset (every directory stream of the
// mount can seek: getdents offsets for the workspace, list positions for
// the views and the control directory).
//
// Views and the control directory are kept by the kernel too then. Both
// are fixed once they can be listed: a view shows recorded states, and the
// state at T of a path no checkpoint after T names is the path as it is
// now only because nothing changed it since (a change through the mount is
// captured first); the control directory's names never change. A rewind
// invalidates the workspace listings it changed (invalidate.go), as before.
type dirlessFS struct {
	fuse.RawFileSystem
	on       atomic.Bool  // the kernel offered FUSE_NO_OPENDIR_SUPPORT
	opendirs atomic.Int64 // OPENDIR requests from the kernel (for tests)
}

// negotiated notes whether the kernel offered FUSE_NO_OPENDIR_SUPPORT, once
// the mount is up (go-fuse then has the kernel's INIT).
func (d *dirlessFS) negotiated(server *fuse.Server) {
	d.on.Store(server.KernelSettings().Flags64()&fuse.CAP_NO_OPENDIR_SUPPORT != 0)
}

func (d *dirlessFS) OpenDir(cancel <-chan struct{}, in *fuse.OpenIn, out *fuse.OpenOut) fuse.Status {
	d.opendirs.Add(1)
	if d.on.Load() {
		return fuse.ENOSYS
	}
	return d.RawFileSystem.OpenDir(cancel, in, out)
}

func (d *dirlessFS) ReadDir(cancel <-chan struct{}, in *fuse.ReadIn, out *fuse.DirEntryList) fuse.Status {
	if in.Fh != 0 {
		return d.RawFileSystem.ReadDir(cancel, in, out)
	}
	return d.withHandle(cancel, &in.InHeader, func(fh uint64) fuse.Status {
		r := *in
		r.Fh = fh
		return d.RawFileSystem.ReadDir(cancel, &r, out)
	})
}

func (d *dirlessFS) ReadDirPlus(cancel <-chan struct{}, in *fuse.ReadIn, out *fuse.DirEntryList) fuse.Status {
	if in.Fh != 0 {
		return d.RawFileSystem.ReadDirPlus(cancel, in, out)
	}
	return d.withHandle(cancel, &in.InHeader, func(fh uint64) fuse.Status {
		r := *in
		r.Fh = fh
		return d.RawFileSystem.ReadDirPlus(cancel, &r, out)
	})
}

func (d *dirlessFS) FsyncDir(cancel <-chan struct{}, in *fuse.FsyncIn) fuse.Status {
	if in.Fh != 0 {
		return d.RawFileSystem.FsyncDir(cancel, in)
	}
	return d.withHandle(cancel, &in.InHeader, func(fh uint64) fuse.Status {
		r := *in
		r.Fh = fh
		return d.RawFileSystem.FsyncDir(cancel, &r)
	})
}

// withHandle opens the directory h names through the node bridge, runs fn
// with the handle and releases it.
func (d *dirlessFS) withHandle(cancel <-chan struct{}, h *fuse.InHeader, fn func(fh uint64) fuse.Status) fuse.Status {
	open := fuse.OpenIn{InHeader: *h, Flags: syscall.O_RDONLY | syscall.O_DIRECTORY}
	var opened fuse.OpenOut
	if st := d.RawFileSystem.OpenDir(cancel, &open, &opened); st != fuse.OK {
		return st
	}
	defer d.RawFileSystem.ReleaseDir(&fuse.ReleaseIn{InHeader: *h, Fh: opened.Fh})
	return fn(opened.Fh)
}
