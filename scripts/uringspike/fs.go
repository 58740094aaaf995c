package main

import (
	"path"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"

	"golang.org/x/sys/unix"
)

// server is the file system both transports serve: a path-based loopback
// over a backing directory, doing per request what go-fuse's loopback does
// (a path joined under the root, one system call or two), so that what
// differs between it and scripts/loopmount is the request path, not the work.
type server struct {
	root string // the backing directory, absolute

	// mu guards nodes, byIno, byPath and next.
	mu     sync.Mutex
	nodes  map[uint64]*node  // node ID -> node, while the kernel holds it
	byIno  map[uint64]uint64 // backing inode -> node ID, so a hard link or a second lookup reuses it
	byPath map[string]uint64 // path -> node ID, to retire a name the mount removed or renamed
	next   uint64

	counts [64]atomic.Uint64 // requests served, by opcode
	onRing ringCounts        // of which over io_uring
}

// node is an inode the kernel knows: its path under the root ("" for the
// root) and how many lookups the kernel has not yet forgotten.
type node struct {
	path    string
	ino     uint64
	nlookup uint64
}

func newServer(root string) *server {
	s := &server{
		root:   root,
		nodes:  map[uint64]*node{1: {path: "", nlookup: 1}},
		byIno:  map[uint64]uint64{},
		byPath: map[string]uint64{"": 1},
		next:   2,
	}
	var st unix.Stat_t
	if unix.Lstat(root, &st) == nil {
		s.nodes[1].ino = st.Ino
		s.byIno[st.Ino] = 1
	}
	return s
}

func (s *server) abs(p string) string {
	if p == "" {
		return s.root
	}
	return s.root + "/" + p
}

// pathOf is the path of node id, or ESTALE if the kernel names a node it
// has forgotten (it must not).
func (s *server) pathOf(id uint64) (string, syscall.Errno) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := s.nodes[id]
	if n == nil {
		return "", syscall.ESTALE
	}
	return n.path, 0
}

func (s *server) child(parent uint64, name string) (string, syscall.Errno) {
	p, e := s.pathOf(parent)
	if e != 0 {
		return "", e
	}
	return path.Join(p, name), 0
}

// remember hands the kernel one more lookup of the inode st at p.
func (s *server) remember(p string, st *unix.Stat_t) uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	if id, ok := s.byIno[st.Ino]; ok {
		n := s.nodes[id]
		n.nlookup++
		n.path = p
		s.byPath[p] = id
		return id
	}
	id := s.next
	s.next++
	s.nodes[id] = &node{path: p, ino: st.Ino, nlookup: 1}
	s.byIno[st.Ino] = id
	s.byPath[p] = id
	return id
}

func (s *server) forget(id, n uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	nd := s.nodes[id]
	if nd == nil || id == 1 {
		return
	}
	if nd.nlookup > n {
		nd.nlookup -= n
		return
	}
	delete(s.nodes, id)
	if s.byIno[nd.ino] == id {
		delete(s.byIno, nd.ino)
	}
	if s.byPath[nd.path] == id {
		delete(s.byPath, nd.path)
	}
}

// removed retires the name p: its node stays until the kernel forgets it,
// but a new file that gets the same backing inode number must get a new node.
func (s *server) removed(p string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if id, ok := s.byPath[p]; ok {
		delete(s.byPath, p)
		if n := s.nodes[id]; n != nil && s.byIno[n.ino] == id {
			delete(s.byIno, n.ino)
		}
	}
}

// renamed moves the node at from, and everything known beneath it, to to.
func (s *server) renamed(from, to string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if id, ok := s.byPath[to]; ok {
		delete(s.byPath, to)
		if n := s.nodes[id]; n != nil && s.byIno[n.ino] == id {
			delete(s.byIno, n.ino)
		}
	}
	for _, n := range s.nodes {
		if n.path == from || strings.HasPrefix(n.path, from+"/") {
			delete(s.byPath, n.path)
			n.path = to + n.path[len(from):]
		}
	}
	for id, n := range s.nodes {
		if n.path == to || strings.HasPrefix(n.path, to+"/") {
			s.byPath[n.path] = id
		}
	}
}

func putAttr(b []byte, st *unix.Stat_t) {
	le.PutUint64(b[0:], st.Ino)
	le.PutUint64(b[8:], uint64(st.Size))
	le.PutUint64(b[16:], uint64(st.Blocks))
	le.PutUint64(b[24:], uint64(st.Atim.Sec))
	le.PutUint64(b[32:], uint64(st.Mtim.Sec))
	le.PutUint64(b[40:], uint64(st.Ctim.Sec))
	le.PutUint32(b[48:], uint32(st.Atim.Nsec))
	le.PutUint32(b[52:], uint32(st.Mtim.Nsec))
	le.PutUint32(b[56:], uint32(st.Ctim.Nsec))
	le.PutUint32(b[60:], st.Mode)
	le.PutUint32(b[64:], uint32(st.Nlink))
	le.PutUint32(b[68:], st.Uid)
	le.PutUint32(b[72:], st.Gid)
	le.PutUint32(b[76:], uint32(st.Rdev))
	le.PutUint32(b[80:], uint32(st.Blksize))
	le.PutUint32(b[84:], 0)
}

// putEntry writes struct fuse_entry_out; id 0 with no attributes is a
// negative entry the kernel keeps as long as a positive one.
func putEntry(b []byte, id uint64, st *unix.Stat_t) {
	clear(b[:entryOutSize])
	le.PutUint64(b[0:], id)
	le.PutUint64(b[16:], cacheSeconds)
	le.PutUint64(b[24:], cacheSeconds)
	if st != nil {
		putAttr(b[40:], st)
	}
}

func putAttrOut(b []byte, st *unix.Stat_t) int {
	clear(b[:attrOutSize])
	le.PutUint64(b[0:], cacheSeconds)
	putAttr(b[16:], st)
	return attrOutSize
}

func errnoOf(err error) syscall.Errno {
	if e, ok := err.(syscall.Errno); ok {
		return e
	}
	return syscall.EIO
}

// own gives a file the mount created as root to the caller, as go-fuse's
// loopback does: one system call, and only when the caller is not root.
func own(fd int, p string, h *inHeader) {
	if h.uid == 0 && h.gid == 0 {
		return
	}
	if fd >= 0 {
		unix.Fchown(fd, int(h.uid), int(h.gid))
	} else {
		unix.Lchown(p, int(h.uid), int(h.gid))
	}
}

// The poll hack's file: a name at the root that no backing file has, whose
// only use is to be opened and polled once at mount (pollHack).
const (
	pollHackName = ".uringspike-poll-hack"
	pollHackID   = ^uint64(0)
)

// pollHackOp answers the requests for the poll hack's file: a LOOKUP and a
// GETATTR (an empty regular file), OPEN, FLUSH and RELEASE (no descriptor
// behind them) and POLL, which gets ENOSYS, as everything else.
func pollHackOp(h *inHeader, out []byte) (int, syscall.Errno) {
	st := unix.Stat_t{Ino: pollHackID, Mode: unix.S_IFREG | 0o644, Nlink: 1}
	switch h.opcode {
	case opLookup:
		putEntry(out, pollHackID, &st)
		return entryOutSize, 0
	case opGetattr:
		return putAttrOut(out, &st), 0
	case opOpen:
		clear(out[:openOutSize])
		return openOutSize, 0
	case opFlush, opRelease, opForget:
		return 0, 0
	}
	return 0, syscall.ENOSYS
}

// noReply reports whether opcode is one the kernel expects no answer to.
func noReply(opcode uint32) bool {
	return opcode == opForget || opcode == opBatchForget || opcode == opInterrupt
}

// handle serves one request: h its header, op the opcode's own header
// (opHeaderSize), data what follows it (names, a write's bytes). The reply's
// body goes into out (which may be the buffer data came in: everything is
// read from data before out is written); handle returns its length, or an
// errno. Opcodes for which noReply is true are served and get no reply.
func (s *server) handle(h *inHeader, op, data, out []byte) (int, syscall.Errno) {
	if h.opcode < uint32(len(s.counts)) {
		s.counts[h.opcode].Add(1)
	}
	if need, ok := opHeaderSize[h.opcode]; ok && len(op) < need {
		return 0, syscall.EINVAL
	}
	if h.nodeID == pollHackID || h.opcode == opLookup && h.nodeID == 1 && cstring(data) == pollHackName {
		return pollHackOp(h, out)
	}
	switch h.opcode {
	case opLookup:
		name := cstring(data)
		p, e := s.child(h.nodeID, name)
		if e != 0 {
			return 0, e
		}
		var st unix.Stat_t
		if err := unix.Lstat(s.abs(p), &st); err != nil {
			if err == unix.ENOENT {
				putEntry(out, 0, nil)
				return entryOutSize, 0
			}
			return 0, errnoOf(err)
		}
		putEntry(out, s.remember(p, &st), &st)
		return entryOutSize, 0

	case opForget:
		s.forget(h.nodeID, le.Uint64(op))
		return 0, 0

	case opBatchForget:
		count := int(le.Uint32(op))
		for i := 0; i < count && 16*i+16 <= len(data); i++ {
			s.forget(le.Uint64(data[16*i:]), le.Uint64(data[16*i+8:]))
		}
		return 0, 0

	case opGetattr:
		var st unix.Stat_t
		var err error
		if le.Uint32(op)&getattrFh != 0 {
			err = unix.Fstat(int(le.Uint64(op[8:])), &st)
		} else {
			p, e := s.pathOf(h.nodeID)
			if e != 0 {
				return 0, e
			}
			err = unix.Lstat(s.abs(p), &st)
		}
		if err != nil {
			return 0, errnoOf(err)
		}
		return putAttrOut(out, &st), 0

	case opSetattr:
		return s.setattr(h, op, out)

	case opMkdir:
		mode := le.Uint32(op)
		p, e := s.child(h.nodeID, cstring(data))
		if e != 0 {
			return 0, e
		}
		a := s.abs(p)
		if err := unix.Mkdir(a, mode); err != nil {
			return 0, errnoOf(err)
		}
		own(-1, a, h)
		var st unix.Stat_t
		if err := unix.Lstat(a, &st); err != nil {
			return 0, errnoOf(err)
		}
		putEntry(out, s.remember(p, &st), &st)
		return entryOutSize, 0

	case opUnlink, opRmdir:
		p, e := s.child(h.nodeID, cstring(data))
		if e != 0 {
			return 0, e
		}
		var err error
		if h.opcode == opUnlink {
			err = unix.Unlink(s.abs(p))
		} else {
			err = unix.Rmdir(s.abs(p))
		}
		if err != nil {
			return 0, errnoOf(err)
		}
		s.removed(p)
		return 0, 0

	case opRename, opRename2:
		newDir := le.Uint64(op)
		var flags uint32
		if h.opcode == opRename2 {
			flags = le.Uint32(op[8:])
		}
		oldName := cstring(data)
		rest := data[min(len(oldName)+1, len(data)):]
		from, e := s.child(h.nodeID, oldName)
		if e != 0 {
			return 0, e
		}
		to, e := s.child(newDir, cstring(rest))
		if e != 0 {
			return 0, e
		}
		if err := unix.Renameat2(unix.AT_FDCWD, s.abs(from), unix.AT_FDCWD, s.abs(to), uint(flags)); err != nil {
			return 0, errnoOf(err)
		}
		s.renamed(from, to)
		return 0, 0

	case opCreate:
		flags, mode := int(le.Uint32(op)), le.Uint32(op[4:])
		p, e := s.child(h.nodeID, cstring(data))
		if e != 0 {
			return 0, e
		}
		fd, err := unix.Open(s.abs(p), (flags|unix.O_CREAT|unix.O_CLOEXEC)&^unix.O_APPEND, mode)
		if err != nil {
			return 0, errnoOf(err)
		}
		own(fd, "", h)
		var st unix.Stat_t
		if err := unix.Fstat(fd, &st); err != nil {
			unix.Close(fd)
			return 0, errnoOf(err)
		}
		putEntry(out, s.remember(p, &st), &st)
		clear(out[entryOutSize : entryOutSize+openOutSize])
		le.PutUint64(out[entryOutSize:], uint64(fd))
		return entryOutSize + openOutSize, 0

	case opOpen, opOpendir:
		p, e := s.pathOf(h.nodeID)
		if e != 0 {
			return 0, e
		}
		flags := int(le.Uint32(op))&^(unix.O_CREAT|unix.O_EXCL|unix.O_NOCTTY|unix.O_APPEND) | unix.O_CLOEXEC
		if h.opcode == opOpendir {
			flags = unix.O_RDONLY | unix.O_DIRECTORY | unix.O_CLOEXEC
		}
		fd, err := unix.Open(s.abs(p), flags, 0)
		if err != nil {
			return 0, errnoOf(err)
		}
		clear(out[:openOutSize])
		le.PutUint64(out, uint64(fd))
		return openOutSize, 0

	case opRead:
		fd, off, size := int(le.Uint64(op)), int64(le.Uint64(op[8:])), int(le.Uint32(op[16:]))
		n, err := unix.Pread(fd, out[:min(size, len(out))], off)
		if err != nil {
			return 0, errnoOf(err)
		}
		return n, 0

	case opWrite:
		fd, off, size := int(le.Uint64(op)), int64(le.Uint64(op[8:])), int(le.Uint32(op[16:]))
		n, err := unix.Pwrite(fd, data[:min(size, len(data))], off)
		if err != nil {
			return 0, errnoOf(err)
		}
		le.PutUint64(out, uint64(n))
		return 8, 0

	case opFlush:
		// As go-fuse's loopback: closing a duplicate reports what a
		// close of the file would (NFS-like backing stores).
		nfd, err := unix.Dup(int(le.Uint64(op)))
		if err != nil {
			return 0, errnoOf(err)
		}
		if err := unix.Close(nfd); err != nil {
			return 0, errnoOf(err)
		}
		return 0, 0

	case opRelease, opReleasedir:
		unix.Close(int(le.Uint64(op)))
		return 0, 0

	case opFsync:
		if err := unix.Fsync(int(le.Uint64(op))); err != nil {
			return 0, errnoOf(err)
		}
		return 0, 0

	case opFsyncdir:
		return 0, 0

	case opReaddir:
		return s.readdir(op, out)

	case opStatfs:
		var st unix.Statfs_t
		if err := unix.Statfs(s.root, &st); err != nil {
			return 0, errnoOf(err)
		}
		clear(out[:kstatfsSize])
		le.PutUint64(out[0:], st.Blocks)
		le.PutUint64(out[8:], st.Bfree)
		le.PutUint64(out[16:], st.Bavail)
		le.PutUint64(out[24:], st.Files)
		le.PutUint64(out[32:], st.Ffree)
		le.PutUint32(out[40:], uint32(st.Bsize))
		le.PutUint32(out[44:], uint32(st.Namelen))
		le.PutUint32(out[48:], uint32(st.Frsize))
		return kstatfsSize, 0

	case opGetxattr:
		// No extended attributes and no POSIX ACLs: the kernel then
		// applies the mode bits alone, and caches that.
		return 0, syscall.ENODATA

	case opListxattr:
		// An empty list: a size query gets fuse_getxattr_out{size: 0}.
		if le.Uint32(op) == 0 {
			clear(out[:8])
			return 8, 0
		}
		return 0, 0

	case opInterrupt, opDestroy:
		return 0, 0
	}
	return 0, syscall.ENOSYS
}

func (s *server) setattr(h *inHeader, op, out []byte) (int, syscall.Errno) {
	valid := le.Uint32(op)
	fd := -1
	if valid&fattrFh != 0 {
		fd = int(le.Uint64(op[8:]))
	}
	p, e := s.pathOf(h.nodeID)
	if e != 0 {
		return 0, e
	}
	a := s.abs(p)
	if valid&fattrMode != 0 {
		if err := unix.Chmod(a, le.Uint32(op[68:])&07777); err != nil {
			return 0, errnoOf(err)
		}
	}
	if valid&(fattrUID|fattrGID) != 0 {
		uid, gid := -1, -1
		if valid&fattrUID != 0 {
			uid = int(le.Uint32(op[76:]))
		}
		if valid&fattrGID != 0 {
			gid = int(le.Uint32(op[80:]))
		}
		if err := unix.Lchown(a, uid, gid); err != nil {
			return 0, errnoOf(err)
		}
	}
	if valid&fattrSize != 0 {
		var err error
		if fd >= 0 {
			err = unix.Ftruncate(fd, int64(le.Uint64(op[16:])))
		} else {
			err = unix.Truncate(a, int64(le.Uint64(op[16:])))
		}
		if err != nil {
			return 0, errnoOf(err)
		}
	}
	if valid&(fattrAtime|fattrMtime|fattrAtimeNow|fattrMtimeNow) != 0 {
		ts := []unix.Timespec{{Nsec: unix.UTIME_OMIT}, {Nsec: unix.UTIME_OMIT}}
		if valid&fattrAtimeNow != 0 {
			ts[0].Nsec = unix.UTIME_NOW
		} else if valid&fattrAtime != 0 {
			ts[0] = unix.Timespec{Sec: int64(le.Uint64(op[32:])), Nsec: int64(le.Uint32(op[56:]))}
		}
		if valid&fattrMtimeNow != 0 {
			ts[1].Nsec = unix.UTIME_NOW
		} else if valid&fattrMtime != 0 {
			ts[1] = unix.Timespec{Sec: int64(le.Uint64(op[40:])), Nsec: int64(le.Uint32(op[60:]))}
		}
		if err := unix.UtimesNanoAt(unix.AT_FDCWD, a, ts, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			return 0, errnoOf(err)
		}
	}
	var st unix.Stat_t
	var err error
	if fd >= 0 {
		err = unix.Fstat(fd, &st)
	} else {
		err = unix.Lstat(a, &st)
	}
	if err != nil {
		return 0, errnoOf(err)
	}
	return putAttrOut(out, &st), 0
}

// readdir answers READDIR from the directory's descriptor: it seeks to the
// kernel's offset (a getdents cookie the previous reply handed out) and
// copies entries as struct fuse_dirent until the reply is full.
func (s *server) readdir(op, out []byte) (int, syscall.Errno) {
	fd, off, size := int(le.Uint64(op)), int64(le.Uint64(op[8:])), int(le.Uint32(op[16:]))
	out = out[:min(size, len(out))]
	if _, err := unix.Seek(fd, off, 0); err != nil {
		return 0, errnoOf(err)
	}
	buf := make([]byte, len(out))
	n, err := unix.Getdents(fd, buf)
	if err != nil {
		return 0, errnoOf(err)
	}
	w := 0
	for r := 0; r < n; {
		// struct linux_dirent64: ino, off, reclen, type, name.
		ino, next := le.Uint64(buf[r:]), le.Uint64(buf[r+8:])
		reclen, typ := int(le.Uint16(buf[r+16:])), buf[r+18]
		name := cstring(buf[r+19 : r+reclen])
		r += reclen
		// struct fuse_dirent: ino, off, namelen, type, name, padded to 8.
		rec := (24 + len(name) + 7) &^ 7
		if w+rec > len(out) {
			break
		}
		clear(out[w : w+rec])
		le.PutUint64(out[w:], ino)
		le.PutUint64(out[w+8:], next)
		le.PutUint32(out[w+16:], uint32(len(name)))
		le.PutUint32(out[w+20:], uint32(typ))
		copy(out[w+24:], name)
		w += rec
	}
	return w, 0
}
