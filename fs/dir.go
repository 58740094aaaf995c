package fs

import (
	"context"
	"syscall"

	fusefs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"

	"github.com/zerofs/zerofs/record"
	"github.com/zerofs/zerofs/rewind"
)

var (
	_ fusefs.NodeCreater        = (*wsNode)(nil)
	_ fusefs.NodeMkdirer        = (*wsNode)(nil)
	_ fusefs.NodeMknoder        = (*wsNode)(nil)
	_ fusefs.NodeSymlinker      = (*wsNode)(nil)
	_ fusefs.NodeLinker         = (*wsNode)(nil)
	_ fusefs.NodeUnlinker       = (*wsNode)(nil)
	_ fusefs.NodeRmdirer        = (*wsNode)(nil)
	_ fusefs.NodeRenamer        = (*wsNode)(nil)
	_ fusefs.NodeOpendirHandler = (*wsNode)(nil)
)

// entryOp is the common shape of a request that adds or removes the name
// `name` in directory n: refuse reserved names at the root, capture
// join(dir, name), open the directory, run fn on (dirfd, name) while holding
// the capture. fn's step is the capture's step.
func (n *wsNode) entryOp(ctx context.Context, op, name string, fn func(dirfd int, p string, step record.Seq) syscall.Errno) syscall.Errno {
	return n.entryOpRemoved(ctx, op, name, false, func(dirfd int, p string, step record.Seq, _ *rewind.Removal) syscall.Errno {
		return fn(dirfd, p, step)
	})
}

// entryOpRemoved is entryOp whose change says whether name is about to go
// by an unlink (rewind.Change.Removed and Stash); fn then removes it with
// rm (rewind.Removal: the capture may have chosen to stash the file by
// the unlink's own rename).
func (n *wsNode) entryOpRemoved(ctx context.Context, op, name string, removed bool, fn func(dirfd int, p string, step record.Seq, rm *rewind.Removal) syscall.Errno) syscall.Errno {
	if n.isRoot() && record.IsReserved(name) {
		return syscall.EPERM
	}
	a := n.fs.rw.arrive()
	dir, ok := n.path()
	if !ok {
		return n.resolveErrno(a, unix.ENOENT)
	}
	p := join(dir, name)
	// The directory is resolved under the workspace lock, before the
	// capture, which reads name through it rather than walking p again.
	release, step, errno := n.begin(ctx, op)
	if errno != 0 {
		return errno
	}
	defer release()
	dfd, done, errno := n.dirAt(a, dir)
	if errno != 0 {
		return errno
	}
	defer done()
	c := rewind.Change{Path: p, Removed: removed, Stash: removed, Dirfd: dfd, InDir: true, Dir: op == "mkdir"}
	if removed {
		c.NoXattrs = n.childXattrFree(name) // xattrfree.go
		rm, err := n.fs.eng.CaptureUnlinkLocked(engineCtx(ctx), callerOf(ctx), c)
		if err != nil {
			return engineErrno(n.fs.log, op, p, err, seqInvalid)
		}
		return fn(dfd, p, step, rm)
	}
	if err := n.fs.eng.CaptureLocked(engineCtx(ctx), callerOf(ctx), c); err != nil {
		return engineErrno(n.fs.log, op, p, err, seqInvalid)
	}
	return fn(dfd, p, step, nil)
}

// chownNew gives a node the daemon just created to the caller, leaving the
// group alone in a setgid directory (the backing filesystem already gave it
// the directory's group).
func chownNew(ctx context.Context, dirfd int, name string, fd int) {
	uid, gid, ok := owner(ctx)
	if !ok {
		return
	}
	var st unix.Stat_t
	if err := unix.Fstat(dirfd, &st); err == nil && st.Mode&unix.S_ISGID != 0 {
		gid = -1
	}
	if fd >= 0 {
		unix.Fchown(fd, uid, gid)
		return
	}
	unix.Fchownat(dirfd, name, uid, gid, unix.AT_SYMLINK_NOFOLLOW)
}

// setIDBits are the bits a chown clears from a regular file.
const setIDBits = unix.S_ISUID | unix.S_ISGID

// createMode is the mode a file asked for with mode is created with: without
// its set-id bits when the daemon gives it to the caller afterwards, so that
// it is never, even for an instant, a set-id file of the daemon's (a chown
// would clear them anyway). setIDAfterChown adds them back once the file is
// the caller's.
func createMode(ctx context.Context, mode uint32) uint32 {
	if _, _, chown := owner(ctx); chown {
		return mode &^ setIDBits
	}
	return mode
}

// setIDAfterChown gives the file just created at fd, now the caller's, the
// set-id bits mode asked for, as a native create would have: the kernel has
// already dropped a setgid bit the caller may not have (a setgid directory
// of a group it is not in) from the mode it sent.
//
// Only a regular file of the caller's gets them: a mknod's file is opened
// again by name, and another user may have put something else there.
func setIDAfterChown(ctx context.Context, fd int, mode uint32) error {
	uid, _, chown := owner(ctx)
	if !chown || mode&setIDBits == 0 {
		return nil
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG || st.Uid != uint32(uid) {
		return unix.EPERM
	}
	return unix.Fchmod(fd, (st.Mode&0o7777)|(mode&setIDBits))
}

// created finishes a create-like request: chown, stat, new inode. On a
// failed stat the new name is removed again.
func (n *wsNode) created(ctx context.Context, dirfd int, name string, isDir bool, out *fuse.EntryOut) (*fusefs.Inode, syscall.Errno) {
	chownNew(ctx, dirfd, name, -1)
	var st unix.Statx_t
	if err := statx(dirfd, name, &st); err != nil {
		flag := 0
		if isDir {
			flag = unix.AT_REMOVEDIR
		}
		unix.Unlinkat(dirfd, name, flag)
		return nil, sysErrno(err)
	}
	return n.newChild(ctx, name, &st, out), 0
}

func (n *wsNode) Create(ctx context.Context, name string, flags, mode uint32, out *fuse.EntryOut) (*fusefs.Inode, fusefs.FileHandle, uint32, syscall.Errno) {
	var child *fusefs.Inode
	var h *wsFile
	var fuseFlags uint32
	a := n.fs.rw.arrive()
	errno := n.entryOp(ctx, "create", name, func(dfd int, p string, step record.Seq) syscall.Errno {
		// O_TRUNC waits for beginWrite (Open says why); a file this
		// create makes is not truncated at all, as by the kernel.
		fl := openFlags(flags)
		fd, created, err := createAt(dfd, name, fl&^syscall.O_TRUNC, flags&syscall.O_EXCL != 0, createMode(ctx, mode))
		if err != nil {
			return sysErrno(err)
		}
		h = &wsFile{fd: fd, write: true, step: step}
		var st unix.Statx_t
		if created {
			// A file this request made: nobody else has it, the store
			// keeps nothing of it, and one statx (its mount included)
			// answers for its attributes, its registration as being
			// written, its passthrough and its flushes.
			chownNew(ctx, dfd, name, fd)
			if err := setIDAfterChown(ctx, fd, mode); err != nil {
				unix.Close(fd)
				return sysErrno(err)
			}
			if err := statxMnt(fd, &st); err != nil {
				unix.Close(fd)
				return sysErrno(err)
			}
			h.wkey, h.wcounted = n.fs.wopen.addKey(devIno{unix.Mkdev(st.Dev_major, st.Dev_minor), st.Ino}), true
		} else {
			if errno := n.fs.beginWrite(ctx, h, p, fl&syscall.O_TRUNC != 0, flags); errno != 0 {
				unix.Close(fd)
				return errno
			}
			if err := statxMnt(fd, &st); err != nil {
				n.fs.endWrite(h)
				unix.Close(fd)
				return sysErrno(err)
			}
		}
		child = n.newChild(ctx, name, &st, out)
		cn := child.Operations().(*wsNode)
		if created {
			n.madeXattrFree(a, dfd, cn, false)
		}
		h.node = cn
		cn.hold(fd)
		if n.fs.passthrough.Load() {
			h.passthrough = cn.openModeStatx(fd, true, &st)
		}
		n.fs.addWriter(h) // still under the capture
		if cn.noFlushStatx(fd, &st) {
			fuseFlags = fuse.FOPEN_NOFLUSH // file.go: Open
		}
		return 0
	})
	if errno != 0 {
		return nil, nil, 0, errno
	}
	return child, h, fuseFlags, 0
}

// createAt opens name in dfd with flags (O_CREAT added), creating it with
// mode unless it exists (then excl fails it with EEXIST); created says
// whether this call made it.
func createAt(dfd int, name string, flags int, excl bool, mode uint32) (fd int, created bool, err error) {
	for range 3 {
		fd, err = unix.Openat(dfd, name, flags|syscall.O_CREAT|syscall.O_EXCL, mode)
		if err == nil || err != unix.EEXIST || excl {
			return fd, err == nil, err
		}
		fd, err = unix.Openat(dfd, name, flags, 0)
		if err != unix.ENOENT { // removed meanwhile: create it after all
			return fd, false, err
		}
	}
	return -1, false, err
}

func (n *wsNode) Mkdir(ctx context.Context, name string, mode uint32, out *fuse.EntryOut) (*fusefs.Inode, syscall.Errno) {
	var child *fusefs.Inode
	a := n.fs.rw.arrive()
	errno := n.entryOp(ctx, "mkdir", name, func(dfd int, p string, _ record.Seq) (errno syscall.Errno) {
		if err := unix.Mkdirat(dfd, name, mode); err != nil {
			return sysErrno(err)
		}
		child, errno = n.created(ctx, dfd, name, true, out)
		if errno == 0 {
			cn, _ := child.Operations().(*wsNode)
			n.madeXattrFree(a, dfd, cn, true)
		}
		return errno
	})
	return child, errno
}

func (n *wsNode) Mknod(ctx context.Context, name string, mode, rdev uint32, out *fuse.EntryOut) (*fusefs.Inode, syscall.Errno) {
	var child *fusefs.Inode
	errno := n.entryOp(ctx, "mknod", name, func(dfd int, p string, step record.Seq) (errno syscall.Errno) {
		fd, err := n.mknod(dfd, name, createMode(ctx, mode), rdev) // noopen.go
		if err != nil {
			return sysErrno(err)
		}
		defer func() { n.keepMade(child, fd, step) }()
		child, errno = n.created(ctx, dfd, name, false, out)
		if errno == 0 && mode&setIDBits != 0 && mode&unix.S_IFMT == unix.S_IFREG {
			// As Create: the set-id bits come once the file is the
			// caller's, after created's chown (a chown clears them).
			sfd, err := unix.Openat(dfd, name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
			if err == nil {
				err = setIDAfterChown(ctx, sfd, mode)
				var st unix.Statx_t
				if err == nil {
					if err = statx(sfd, "", &st); err == nil {
						fillAttr(&st, &out.Attr)
					}
				}
				unix.Close(sfd)
			}
			if err != nil {
				unix.Unlinkat(dfd, name, 0)
				child = nil
				return sysErrno(err)
			}
		}
		return errno
	})
	return child, errno
}

func (n *wsNode) Symlink(ctx context.Context, target, name string, out *fuse.EntryOut) (*fusefs.Inode, syscall.Errno) {
	var child *fusefs.Inode
	errno := n.entryOp(ctx, "symlink", name, func(dfd int, p string, _ record.Seq) (errno syscall.Errno) {
		if err := unix.Symlinkat(target, dfd, name); err != nil {
			return sysErrno(err)
		}
		child, errno = n.created(ctx, dfd, name, false, out)
		return errno
	})
	return child, errno
}

func (n *wsNode) Link(ctx context.Context, target fusefs.InodeEmbedder, name string, out *fuse.EntryOut) (*fusefs.Inode, syscall.Errno) {
	src, ok := target.(*wsNode)
	if !ok || src.fs != n.fs {
		return nil, syscall.EXDEV
	}
	a := n.fs.rw.arrive()
	srcPath, named := src.path()
	var child *fusefs.Inode
	errno := n.entryOp(ctx, "link", name, func(dfd int, p string, _ record.Seq) syscall.Errno {
		if !named {
			// An O_TMPFILE file (or one unlinked while open, which the
			// backing kernel refuses): link what its handle holds.
			ok, err := src.held.with(func(fd int) error {
				return unix.Linkat(unix.AT_FDCWD, procPath(fd), dfd, name, unix.AT_SYMLINK_FOLLOW)
			})
			if !ok {
				return syscall.ENOENT
			}
			if err != nil {
				return sysErrno(err)
			}
		} else if errno := src.linkNamed(a, srcPath, dfd, name); errno != 0 {
			return errno
		} else if sname, sparent := src.Parent(); sparent != nil {
			// The source's name is one of the file's names too.
			if pn, ok := sparent.Operations().(*wsNode); ok {
				n.fs.noteLink(src.StableAttr().Ino, pn, sname)
			}
		}
		var st unix.Statx_t
		if err := statx(dfd, name, &st); err != nil {
			return sysErrno(err)
		}
		child = n.newChild(ctx, name, &st, out)
		return 0
	})
	return child, errno
}

// linkNamed links the workspace path src to name in dfd, for a request
// that arrived at a (src is the request's own node: a source gone because
// of a rewind is stale).
func (n *wsNode) linkNamed(a arrival, src string, dfd int, name string) syscall.Errno {
	sdir, sname := split(src)
	sfd, done, err := n.fs.ws.dir(sdir)
	if err != nil {
		return n.resolveErrno(a, err)
	}
	defer done()
	if err := unix.Linkat(sfd, sname, dfd, name, 0); err != nil {
		// ENOENT: the source itself is gone.
		return n.resolveErrno(a, err)
	}
	return 0
}

// Unlink marks its change Removed and Stash: the file's inode may be
// stashed in the store unread rather than copied (rewind.Change), by the
// unlink itself, a rename into the store (rewind.Removal). If the unlink
// then fails, the file keeps its name and shares its inode with the stash:
// the stash is named (hashed) at once, before anything can write it.
func (n *wsNode) Unlink(ctx context.Context, name string) syscall.Errno {
	return n.entryOpRemoved(ctx, "unlink", name, true, func(dfd int, p string, _ record.Seq, rm *rewind.Removal) syscall.Errno {
		kept := n.holdRemoved(dfd, name)
		err := rm.Unlink(engineCtx(ctx), dfd, name, func() error { return unix.Unlinkat(dfd, name, 0) })
		kept(err == nil)
		if err != nil {
			if nerr := n.fs.eng.NameStashes(engineCtx(ctx)); nerr != nil {
				n.fs.log.Warn("unlink failed, and naming its stash failed too", "path", p, "err", nerr)
			}
		}
		return sysErrno(err)
	})
}

func (n *wsNode) Rmdir(ctx context.Context, name string) syscall.Errno {
	return n.entryOp(ctx, "rmdir", name, func(dfd int, _ string, _ record.Seq) syscall.Errno {
		kept := n.holdRemoved(dfd, name)
		err := unix.Unlinkat(dfd, name, unix.AT_REMOVEDIR)
		kept(err == nil)
		return sysErrno(err)
	})
}

// Rename captures the source and the destination; a directory is captured
// with its whole subtree, since every path below it changes too. The kinds
// are read after Begin, under the workspace lock, so a rewind cannot change
// them between the look and the capture.
func (n *wsNode) Rename(ctx context.Context, name string, newParent fusefs.InodeEmbedder, newName string, flags uint32) syscall.Errno {
	np, ok := newParent.(*wsNode)
	if !ok || np.fs != n.fs {
		if _, isView := newParent.(*viewNode); isView {
			return syscall.EROFS
		}
		return syscall.EXDEV
	}
	if (n.isRoot() && record.IsReserved(name)) || (np.isRoot() && record.IsReserved(newName)) {
		return syscall.EPERM
	}
	a := n.fs.rw.arrive()
	odir, ok1 := n.path()
	ndir, ok2 := np.path()
	if !ok1 || !ok2 {
		return n.resolveErrno(a, unix.ENOENT)
	}
	oldPath, newPath := join(odir, name), join(ndir, newName)

	ectx, who := engineCtx(ctx), callerOf(ctx)
	release, _, err := n.fs.eng.Begin(ectx, who)
	if err != nil {
		return engineErrno(n.fs.log, "rename", oldPath, err, seqInvalid)
	}
	defer release()

	ofd, odone, errno := n.dirAt(a, odir)
	if errno != 0 {
		return errno
	}
	defer odone()
	nfd, ndone, errno := np.dirAt(a, ndir)
	if errno != 0 {
		return errno
	}
	defer ndone()

	var ost, nst unix.Statx_t
	if err := statx(ofd, name, &ost); err != nil {
		return sysErrno(err)
	}
	// Each side captures its own subtree (Tree) and the names the other
	// side's subtree is about to take under it (From); a plain rename
	// moves old's subtree under new, an exchange moves both ways.
	oldDir := ost.Mode&unix.S_IFMT == unix.S_IFDIR
	newDir := false
	if err := statx(nfd, newName, &nst); err == nil {
		newDir = nst.Mode&unix.S_IFMT == unix.S_IFDIR
	} else if err != unix.ENOENT {
		return sysErrno(err)
	}
	if oldDir && flags&unix.RENAME_EXCHANGE == 0 {
		// A directory's rename may be recorded as one record, with the
		// rename made by the engine between the record and its release.
		var kept func(bool)
		handled, err := n.fs.eng.RenameDir(ectx, who, oldPath, newPath, func() error {
			kept = func(bool) {}
			if newDir {
				kept = np.holdRemoved(nfd, newName)
			}
			err := unix.Renameat2(ofd, name, nfd, newName, uint(flags))
			kept(err == nil)
			return err
		})
		if handled {
			if err != nil && kept == nil {
				return engineErrno(n.fs.log, "rename", oldPath, err, seqInvalid)
			}
			return sysErrno(err)
		}
	}
	changes := []rewind.Change{
		{Path: oldPath, Tree: oldDir, From: ifDir(newDir, newPath)},
		// A plain rename removes what was at newPath: its inode may be
		// kept rather than copied (an exchange keeps both names).
		{Path: newPath, Tree: newDir, From: ifDir(oldDir, oldPath), Removed: flags&unix.RENAME_EXCHANGE == 0},
	}
	if err := n.fs.eng.CaptureLocked(ectx, who, changes...); err != nil {
		return engineErrno(n.fs.log, "rename", oldPath, err, seqInvalid)
	}
	kept := func(bool) {}
	if (newDir || n.fs.noOpen) && flags&unix.RENAME_EXCHANGE == 0 {
		kept = np.holdRemoved(nfd, newName)
	}
	err = unix.Renameat2(ofd, name, nfd, newName, uint(flags))
	kept(err == nil)
	return sysErrno(err)
}

// OpendirHandle lists the backing directory with getdents on its own
// descriptor. At the root the reserved names are left out: the store
// (".zero" on the backing side) and any "@N" are never listed, so tools
// that walk the workspace never see them.
//
// The kernel keeps a listing it read (FOPEN_CACHE_DIR) across opens
// (FOPEN_KEEP_CACHE): the next `find` or `git status` asks for no READDIR
// at all. A change through the mount resets the kernel's copy itself; a
// rewind, the one change behind its back, invalidates the listing of every
// directory it touched (invalidate.go).
func (n *wsNode) OpendirHandle(ctx context.Context, flags uint32) (fusefs.FileHandle, uint32, syscall.Errno) {
	a := n.fs.rw.arrive()
	p, ok := n.path()
	if !ok {
		return nil, 0, n.resolveErrno(a, unix.ENOENT)
	}
	fd, err := n.fs.ws.openat2(p, unix.O_RDONLY|unix.O_DIRECTORY)
	if err != nil {
		return nil, 0, n.resolveErrno(a, err)
	}
	ds, errno := fusefs.NewLoopbackDirStreamFd(fd)
	if errno != 0 {
		unix.Close(fd)
		return nil, 0, errno
	}
	n.hold(fd)
	hd := &heldDir{DirStream: ds, node: n, fd: fd}
	const keep = fuse.FOPEN_CACHE_DIR | fuse.FOPEN_KEEP_CACHE
	if !n.isRoot() {
		return hd, keep, 0
	}
	return &rootDir{hd}, keep, 0
}

// dirFile is what go-fuse's loopback directory stream offers.
type dirFile interface {
	fusefs.FileReaddirenter
	fusefs.FileSeekdirer
	fusefs.FileReleasedirer
	fusefs.FileFsyncdirer
}

// rootDir is the root's directory stream with the reserved names removed.
// Offsets are getdents's, so skipping entries keeps seeking exact.
type rootDir struct {
	fusefs.DirStream
}

var _ dirFile = (*rootDir)(nil)

func (d *rootDir) inner() dirFile { return d.DirStream.(dirFile) }

func (d *rootDir) Readdirent(ctx context.Context) (*fuse.DirEntry, syscall.Errno) {
	for {
		de, errno := d.inner().Readdirent(ctx)
		if errno != 0 || de == nil || !record.IsReserved(de.Name) {
			return de, errno
		}
	}
}

func (d *rootDir) Seekdir(ctx context.Context, off uint64) syscall.Errno {
	return d.inner().Seekdir(ctx, off)
}

func (d *rootDir) Releasedir(ctx context.Context, flags uint32) {
	d.inner().Releasedir(ctx, flags)
}

func (d *rootDir) Fsyncdir(ctx context.Context, flags uint32) syscall.Errno {
	return d.inner().Fsyncdir(ctx, flags)
}

// ifDir is p when dir is true, else "" (no subtree moves from p).
func ifDir(dir bool, p string) string {
	if dir {
		return p
	}
	return ""
}
