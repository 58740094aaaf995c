package fs

import (
	"context"
	"fmt"
	"hash/fnv"
	"maps"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	fusefs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"

	"github.com/zerofs/zerofs/record"
	"github.com/zerofs/zerofs/rewind"
)

// Views: "@T/" at the mount root is the workspace as it was at sequence T,
// read-only, served from the engine's index (ChildAt, ReadDirAt) and the
// blob store (OpenContent). A recorded state never changes, so the kernel
// may cache it for an hour.
//
// A path unchanged since T is "live": the engine answers with the workspace
// file itself. A change to it is captured (and the index updated) before it
// reaches the file, unless the step open at T had captured the path at or
// before T already: then the state at T is the file as it is now, and goes
// on changing with it. So a live entry's attributes and pages are not kept
// (liveTimeout), and a read that finds the entry still live after reading
// read the state at T (see viewFile.Read). Lookup and Getattr check the
// attributes they stat'ed the same way, as the engine checks its own live
// answers (rewind's childAt).

// liveTimeout is how long the kernel may keep a live entry's attributes,
// and a live file's pages are dropped at each open: a path captured in the
// open step at or before T is not captured again when it changes, so its
// state at T is the workspace file as it is now, which goes on changing
// until another step captures it. Only a recorded state never changes.
const liveTimeout = time.Nanosecond // 0 would be go-fuse's default

// viewNode is one path of one view. It keeps no state of its own: a path
// that was live at lookup may have been captured since (by a change or a
// rewind), and then only the recorded state is right, so every request asks
// the engine afresh (current).
type viewNode struct {
	fusefs.Inode
	fs   *fsys
	t    record.Seq
	path string // workspace path; "" is the view's root

	ioMu sync.Mutex // guards io
	io   *viewFile  // the content read without a handle (mount without OPEN), opened once
}

var (
	_ fusefs.NodeLookuper      = (*viewNode)(nil)
	_ fusefs.NodeGetattrer     = (*viewNode)(nil)
	_ fusefs.NodeReaddirer     = (*viewNode)(nil)
	_ fusefs.NodeOpener        = (*viewNode)(nil)
	_ fusefs.NodeReadlinker    = (*viewNode)(nil)
	_ fusefs.NodeSetattrer     = (*viewNode)(nil)
	_ fusefs.NodeCreater       = (*viewNode)(nil)
	_ fusefs.NodeMkdirer       = (*viewNode)(nil)
	_ fusefs.NodeMknoder       = (*viewNode)(nil)
	_ fusefs.NodeSymlinker     = (*viewNode)(nil)
	_ fusefs.NodeLinker        = (*viewNode)(nil)
	_ fusefs.NodeUnlinker      = (*viewNode)(nil)
	_ fusefs.NodeRmdirer       = (*viewNode)(nil)
	_ fusefs.NodeRenamer       = (*viewNode)(nil)
	_ fusefs.NodeSetxattrer    = (*viewNode)(nil)
	_ fusefs.NodeRemovexattrer = (*viewNode)(nil)
	_ fusefs.NodeGetxattrer    = (*viewNode)(nil)
	_ fusefs.NodeListxattrer   = (*viewNode)(nil)
	_ fusefs.NodeStatfser      = (*viewNode)(nil)
)

// viewIno is the inode number of path in view t: stable, so the same path
// looked up twice is the same inode and readdir's d_ino matches stat's, and
// with the top bit set, apart from backing inode numbers, so a view node is
// never mistaken for a workspace node (which would make it writable).
func viewIno(t record.Seq, path string) uint64 {
	h := fnv.New64a()
	var b [8]byte
	for i := range b {
		b[i] = byte(t >> (8 * i))
	}
	h.Write(b[:])
	h.Write([]byte(path))
	return h.Sum64() | 1<<63
}

func kindMode(k record.Kind) uint32 {
	switch k {
	case record.KindDir:
		return syscall.S_IFDIR
	case record.KindSymlink:
		return syscall.S_IFLNK
	}
	return syscall.S_IFREG
}

// lookupReserved answers a lookup of a reserved name at the root: the
// control directory, or a view when T is within history.
func (f *fsys) lookupReserved(ctx context.Context, name string, out *fuse.EntryOut) (*fusefs.Inode, syscall.Errno) {
	if name == record.StoreName {
		f.fillVirtual(&out.Attr, syscall.S_IFDIR|0o755, 2)
		return f.ctl, 0
	}
	t, ok := record.ParseView(name)
	if !ok || !f.eng.HasState(t) {
		return nil, syscall.ENOENT
	}
	ent, err := f.eng.StateAt("", t)
	if err != nil {
		return nil, engineErrno(f.log, "lookup", name, err, seqNotFound)
	}
	v := &viewNode{fs: f, t: t}
	v.fill(&out.Attr, ent)
	// The view root's own entry stays short-lived: gc can remove a view.
	out.SetEntryTimeout(wsTimeout)
	out.SetAttrTimeout(viewTimeout)
	return f.root.NewInode(ctx, v, fusefs.StableAttr{Mode: syscall.S_IFDIR, Ino: viewIno(t, "")}), 0
}

// fill sets the attributes of the state ent, as the path had them at T:
// kind, owner, permission bits, size and mtime from the record, so that the
// kernel's permission checks (the mount is default_permissions) give every
// user exactly the access they had then. A record that names no owner
// (older history) is shown as root's, 0700 at most for a directory and 0600
// at most for a file: never more open than it may have been. A live path
// shows its real attributes.
func (v *viewNode) fill(a *fuse.Attr, ent rewind.Entry) {
	st := ent.State
	kind := kindMode(st.Kind)
	if v.path == "" {
		kind = syscall.S_IFDIR
	}
	perm := st.Mode & 07777
	var uid, gid uint32
	if st.Owned() {
		uid, gid = *st.UID, *st.GID
	} else if kind == syscall.S_IFDIR {
		perm &= 0o700
	} else if kind == syscall.S_IFREG {
		perm &= 0o600
	}
	v.fs.fillVirtual(a, kind|perm, 1)
	a.Uid, a.Gid = uid, gid
	if st.MTime != nil {
		t := *st.MTime
		a.Atime, a.Mtime, a.Ctime = uint64(t.Unix()), uint64(t.Unix()), uint64(t.Unix())
		a.Atimensec, a.Mtimensec, a.Ctimensec = uint32(t.Nanosecond()), uint32(t.Nanosecond()), uint32(t.Nanosecond())
	}
	if kind == syscall.S_IFDIR {
		a.Nlink = 2
	}
	a.Size = uint64(st.Bytes)
	if st.Kind == record.KindSymlink && st.Target != "" {
		a.Size = uint64(len(st.Target))
	}
	a.Blocks = (a.Size + 511) / 512
	if ent.Live {
		if beforeLiveRead != nil {
			beforeLiveRead(st.Path)
		}
		var x unix.Statx_t
		fd, done, err := v.fs.ws.node(st.Path) // where a rename record took it, maybe
		if err == nil {
			if statx(fd, "", &x) == nil && uint32(x.Mode)&syscall.S_IFMT == kind {
				fillAttr(&x, a)
			}
			done()
		}
	}
	a.Ino = viewIno(v.t, v.path)
}

// beforeLiveRead, when set (by tests), runs just before a live path is
// stat'ed (fill) or its link read (Readlink): a change made there is what
// their check must catch.
var beforeLiveRead func(p string)

// livePath is the workspace path whose present content the node shows:
// its own, or where a rename record took it.
func (v *viewNode) livePath() string {
	if ent, err := v.current(); err == nil && ent.Live {
		return ent.State.Path
	}
	return v.path
}

// current is the state of the node's path at T now: a live entry may since
// have been captured, which turns it into a recorded one with the same
// content.
func (v *viewNode) current() (rewind.Entry, error) {
	if v.path == "" {
		return v.fs.eng.StateAt("", v.t)
	}
	dir, name := split(v.path)
	return v.fs.eng.ChildAt(dir, name, v.t)
}

func (v *viewNode) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*fusefs.Inode, syscall.Errno) {
	ent, err := v.fs.eng.ChildAt(v.path, name, v.t)
	if err != nil {
		return nil, engineErrno(v.fs.log, "lookup", join(v.path, name), err, seqNotFound)
	}
	if !ent.Exists {
		return nil, syscall.ENOENT
	}
	p := join(v.path, name)
	ch := &viewNode{fs: v.fs, t: v.t, path: p}
	ch.fill(&out.Attr, ent)
	if ent.Live {
		// A change captured while fill stat'ed the live path makes the
		// recorded state the right one (as in Getattr): the kernel keeps
		// these attributes, its size bounding what a read returns.
		if again, err := v.fs.eng.ChildAt(v.path, name, v.t); err == nil && !again.Live {
			if !again.Exists {
				return nil, syscall.ENOENT
			}
			ent = again
			ch.fill(&out.Attr, ent)
		}
	}
	out.SetEntryTimeout(viewTimeout)
	out.SetAttrTimeout(viewTimeout)
	if ent.Live {
		out.SetAttrTimeout(liveTimeout)
	}
	if v.fs.noOpen && ent.Live && ent.State.Kind == record.KindFile {
		// Without OPEN the kernel serves every reader of the node from
		// the pages one reader brought in: each lookup checks the
		// reader against the present path, and the entry is kept for no
		// time, so every path walk to it is such a lookup (noopen.go).
		if errno := v.fs.presentAllows(ctx, ent.State.Path, unix.O_RDONLY); errno != 0 {
			return nil, errno
		}
		out.SetEntryTimeout(time.Nanosecond) // 0 would be go-fuse's default
	}
	return v.NewInode(ctx, ch, fusefs.StableAttr{Mode: kindMode(ent.State.Kind), Ino: viewIno(v.t, p)}), 0
}

func (v *viewNode) Getattr(ctx context.Context, f fusefs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	ent, err := v.current()
	if err != nil {
		return engineErrno(v.fs.log, "getattr", v.path, err, seqNotFound)
	}
	v.fill(&out.Attr, ent)
	out.SetTimeout(viewTimeout)
	if ent.Live {
		out.SetTimeout(liveTimeout)
		// A change captured while we stat'ed the live file makes the
		// recorded state the right one (as in viewFile.Read).
		if again, err := v.current(); err == nil && !again.Live {
			v.fill(&out.Attr, again)
			out.SetTimeout(viewTimeout)
		}
	}
	return 0
}

func (v *viewNode) Readdir(ctx context.Context) (fusefs.DirStream, syscall.Errno) {
	if ent, err := v.current(); err == nil && ent.Live {
		// The present names: the reader must be let in now too.
		if errno := v.fs.presentAllows(ctx, ent.State.Path, unix.O_RDONLY|unix.O_DIRECTORY); errno != 0 {
			return nil, errno
		}
	}
	ents, err := v.fs.eng.ReadDirAt(v.path, v.t)
	if err != nil {
		return nil, engineErrno(v.fs.log, "readdir", v.path, err, seqNotFound)
	}
	list := make([]fuse.DirEntry, 0, len(ents))
	for _, e := range ents {
		if !e.Entry.Exists {
			continue
		}
		list = append(list, fuse.DirEntry{
			Name: e.Name,
			Mode: kindMode(e.Entry.State.Kind),
			Ino:  viewIno(v.t, join(v.path, e.Name)),
		})
	}
	return fusefs.NewListDirStream(list), 0
}

func (v *viewNode) Readlink(ctx context.Context) ([]byte, syscall.Errno) {
	ent, err := v.current()
	if err != nil {
		return nil, engineErrno(v.fs.log, "readlink", v.path, err, seqNotFound)
	}
	if ent.Live {
		if errno := v.fs.presentAllows(ctx, ent.State.Path, unix.O_PATH); errno != 0 {
			return nil, errno
		}
		if beforeLiveRead != nil {
			beforeLiveRead(ent.State.Path)
		}
	}
	target, err := v.fs.eng.ReadLink(ent)
	if err != nil {
		return nil, engineErrno(v.fs.log, "readlink", v.path, err, seqNotFound)
	}
	if ent.Live {
		// Changed while read? Then the record is T's (as in Getattr).
		if again, err := v.current(); err == nil && !again.Live {
			if !again.Exists {
				return nil, syscall.ENOENT
			}
			if again.State.Kind != record.KindSymlink {
				return nil, syscall.EINVAL
			}
			return []byte(again.State.Target), 0
		}
	}
	return []byte(target), 0
}

// Open opens the content at T. A state whose content could not be kept
// (skipped) exists but cannot be read.
func (v *viewNode) Open(ctx context.Context, flags uint32) (fusefs.FileHandle, uint32, syscall.Errno) {
	if flags&writeFlags != 0 {
		return nil, 0, syscall.EROFS
	}
	ent, err := v.current()
	if err != nil {
		return nil, 0, engineErrno(v.fs.log, "open", v.path, err, seqNotFound)
	}
	if !ent.Exists {
		return nil, 0, syscall.ENOENT
	}
	if ent.State.Skipped {
		v.fs.log.Warn("zerofs: view of a state that was not kept", "seq", v.t, "path", v.path, "reason", ent.State.Reason)
		return nil, 0, syscall.EIO
	}
	if ent.Live {
		if errno := v.fs.presentAllows(ctx, ent.State.Path, unix.O_RDONLY); errno != 0 {
			return nil, 0, errno
		}
	}
	f, err := v.fs.eng.OpenContent(ent)
	if err != nil {
		return nil, 0, engineErrno(v.fs.log, "open", v.path, err, seqNotFound)
	}
	if ent.Live {
		// An ignored path has no history: a view shows it as it is now
		// (ignore.go), changed since T or not.
		if lf, ok := f.(interface{ Fd() uintptr }); ok && !v.fs.eng.Ignores(ent.State.Path) && v.fs.notTs(int(lf.Fd()), v.t) {
			// Captured meanwhile? Then the record is T's after all.
			if again, err := v.current(); err != nil || again.Live {
				f.Close()
				what := fmt.Sprintf("@%d/%s", v.t, v.path)
				v.fs.notTsSeen.add(what)
				v.fs.log.Warn("zerofs: view refused present content changed outside the mount", "view", what)
				return nil, 0, syscall.EIO
			}
			f.Close()
			return v.Open(ctx, flags)
		}
	}
	if ent.Live {
		return &viewFile{node: v, f: f, live: true}, 0, 0 // see liveTimeout
	}
	return &viewFile{node: v, f: f, live: ent.Live}, fuse.FOPEN_KEEP_CACHE, 0
}

// viewFile is an open file of a view.
type viewFile struct {
	node *viewNode

	mu   sync.Mutex // guards f and live
	f    rewind.Content
	live bool // f is the workspace file, not a blob
}

var (
	_ fusefs.FileReader   = (*viewFile)(nil)
	_ fusefs.FileReleaser = (*viewFile)(nil)
)

// Read reads the state at T. While the entry is live, f is the workspace
// file; a read that finds the entry still live afterwards read unchanged
// bytes (a change is captured before it starts). Otherwise it switches to
// the recorded content for good and reads again.
func (h *viewFile) Read(ctx context.Context, dest []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for {
		k, err := h.f.ReadAt(dest, off)
		if err != nil && !isEOF(err) {
			return nil, engineErrno(h.node.fs.log, "read", h.node.path, err, seqNotFound)
		}
		if !h.live {
			return fuse.ReadResultData(dest[:k]), 0
		}
		ent, err := h.node.current()
		if err != nil {
			return nil, engineErrno(h.node.fs.log, "read", h.node.path, err, seqNotFound)
		}
		if ent.Live {
			return fuse.ReadResultData(dest[:k]), 0
		}
		if ent.State.Skipped || !ent.Exists {
			return nil, syscall.EIO
		}
		nf, err := h.node.fs.eng.OpenContent(ent)
		if err != nil {
			return nil, engineErrno(h.node.fs.log, "read", h.node.path, err, seqNotFound)
		}
		h.f.Close()
		h.f, h.live = nf, false
	}
}

var (
	_ fusefs.NodeReader      = (*viewNode)(nil)
	_ fusefs.NodeWriter      = (*viewNode)(nil)
	_ fusefs.NodeOnForgetter = (*viewNode)(nil)
)

// Read serves the handle the request carries or, on a mount without OPEN
// (noopen.go), the content the node opens at its first read and keeps
// until the kernel forgets it; a live path is checked for the reader at
// every read, as Open does at every open.
func (v *viewNode) Read(ctx context.Context, f fusefs.FileHandle, dest []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	if h, ok := f.(*viewFile); ok {
		return h.Read(ctx, dest, off)
	}
	v.ioMu.Lock()
	h := v.io
	if h == nil {
		fh, _, errno := v.Open(ctx, syscall.O_RDONLY)
		if errno != 0 {
			v.ioMu.Unlock()
			return nil, errno
		}
		h = fh.(*viewFile)
		v.io = h
		v.fs.viewIO.add(v)
	}
	v.ioMu.Unlock()
	h.mu.Lock()
	live := h.live
	h.mu.Unlock()
	if live {
		if errno := v.fs.presentAllows(ctx, v.livePath(), unix.O_RDONLY); errno != 0 {
			return nil, errno
		}
	}
	return h.Read(ctx, dest, off)
}

// Write: a view is read-only. (Without OPEN an open for writing is not
// refused, its first write is.)
func (v *viewNode) Write(ctx context.Context, f fusefs.FileHandle, data []byte, off int64) (uint32, syscall.Errno) {
	return 0, syscall.EROFS
}

// OnForget closes the content Read kept.
func (v *viewNode) OnForget() {
	v.fs.viewIO.remove(v)
	v.closeIO()
}

func (v *viewNode) closeIO() {
	v.ioMu.Lock()
	defer v.ioMu.Unlock()
	if v.io != nil {
		v.io.Release(context.Background())
		v.io = nil
	}
}

// viewIOs are the view nodes whose Read keeps content open.
type viewIOs struct {
	mu sync.Mutex // guards m
	m  map[*viewNode]struct{}
}

func (s *viewIOs) add(v *viewNode) {
	s.mu.Lock()
	if s.m == nil {
		s.m = map[*viewNode]struct{}{}
	}
	s.m[v] = struct{}{}
	s.mu.Unlock()
}

func (s *viewIOs) remove(v *viewNode) {
	s.mu.Lock()
	delete(s.m, v)
	s.mu.Unlock()
}

// closeAll closes every node's content: at unmount, when the kernel sends
// no more FORGETs (a file system mounted below the workspace must not stay
// busy).
func (s *viewIOs) closeAll() {
	s.mu.Lock()
	m := s.m
	s.m = nil
	s.mu.Unlock()
	for v := range m {
		v.closeIO()
	}
}

func (h *viewFile) Release(ctx context.Context) syscall.Errno {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.f.Close()
	return 0
}

// Everything that would change a view fails with EROFS.

func (v *viewNode) Setattr(context.Context, fusefs.FileHandle, *fuse.SetAttrIn, *fuse.AttrOut) syscall.Errno {
	return syscall.EROFS
}
func (v *viewNode) Create(context.Context, string, uint32, uint32, *fuse.EntryOut) (*fusefs.Inode, fusefs.FileHandle, uint32, syscall.Errno) {
	return nil, nil, 0, syscall.EROFS
}
func (v *viewNode) Mkdir(context.Context, string, uint32, *fuse.EntryOut) (*fusefs.Inode, syscall.Errno) {
	return nil, syscall.EROFS
}
func (v *viewNode) Mknod(context.Context, string, uint32, uint32, *fuse.EntryOut) (*fusefs.Inode, syscall.Errno) {
	return nil, syscall.EROFS
}
func (v *viewNode) Symlink(context.Context, string, string, *fuse.EntryOut) (*fusefs.Inode, syscall.Errno) {
	return nil, syscall.EROFS
}
func (v *viewNode) Link(context.Context, fusefs.InodeEmbedder, string, *fuse.EntryOut) (*fusefs.Inode, syscall.Errno) {
	return nil, syscall.EROFS
}
func (v *viewNode) Unlink(context.Context, string) syscall.Errno { return syscall.EROFS }
func (v *viewNode) Rmdir(context.Context, string) syscall.Errno  { return syscall.EROFS }
func (v *viewNode) Rename(context.Context, string, fusefs.InodeEmbedder, string, uint32) syscall.Errno {
	return syscall.EROFS
}
func (v *viewNode) Setxattr(context.Context, string, []byte, uint32) syscall.Errno {
	return syscall.EROFS
}
func (v *viewNode) Removexattr(context.Context, string) syscall.Errno { return syscall.EROFS }

// xattrs is the node's extended attributes at T: those its record kept
// (none for a record that kept none), or a live path's present ones.
func (v *viewNode) xattrs() (map[string][]byte, syscall.Errno) {
	ent, err := v.current()
	if err != nil {
		return nil, engineErrno(v.fs.log, "getxattr", v.path, err, seqNotFound)
	}
	if !ent.Live {
		return ent.State.Xattrs, 0
	}
	fd, done, err := v.fs.ws.node(ent.State.Path)
	if err != nil {
		return nil, sysErrno(err)
	}
	defer done()
	xs, err := rewind.ReadXattrs(fd)
	if err != nil {
		return nil, sysErrno(err)
	}
	if again, err := v.current(); err == nil && !again.Live {
		// Captured meanwhile: the record is T's.
		return again.State.Xattrs, 0
	}
	return xs, 0
}

// Getxattr and Listxattr show the xattrs the path had at T (SPEC, Events:
// a record's "xattrs"), as getxattr(2) would: an empty dest asks for the
// size, a short one is ERANGE.
func (v *viewNode) Getxattr(ctx context.Context, attr string, dest []byte) (uint32, syscall.Errno) {
	xs, errno := v.xattrs()
	if errno != 0 {
		return 0, errno
	}
	val, ok := xs[attr]
	if !ok {
		return 0, syscall.ENODATA
	}
	if len(dest) > 0 && len(dest) < len(val) {
		return uint32(len(val)), syscall.ERANGE
	}
	copy(dest, val)
	return uint32(len(val)), 0
}

func (v *viewNode) Listxattr(ctx context.Context, dest []byte) (uint32, syscall.Errno) {
	xs, errno := v.xattrs()
	if errno != 0 {
		return 0, errno
	}
	// trusted.* is for root only, as a local file system lists it.
	c, ok := fuse.FromContext(ctx)
	root := ok && c.Uid == 0
	var list []byte
	for _, name := range slices.Sorted(maps.Keys(xs)) {
		if !root && strings.HasPrefix(name, "trusted.") {
			continue
		}
		list = append(append(list, name...), 0)
	}
	if len(dest) > 0 && len(dest) < len(list) {
		return uint32(len(list)), syscall.ERANGE
	}
	copy(dest, list)
	return uint32(len(list)), 0
}

func (v *viewNode) Statfs(ctx context.Context, out *fuse.StatfsOut) syscall.Errno {
	return v.fs.root.Statfs(ctx, out)
}
