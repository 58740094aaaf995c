package main

import (
	"encoding/binary"
)

// The FUSE wire protocol (include/uapi/linux/fuse.h), only what the spike
// answers. Structures are read and written field by field at their offsets
// (little-endian, as on every machine this runs on), so no Go struct layout
// has to match the kernel's.

const (
	opLookup      = 1
	opForget      = 2
	opGetattr     = 3
	opSetattr     = 4
	opMkdir       = 9
	opUnlink      = 10
	opRmdir       = 11
	opRename      = 12
	opOpen        = 14
	opRead        = 15
	opWrite       = 16
	opStatfs      = 17
	opRelease     = 18
	opFsync       = 20
	opSetxattr    = 21
	opGetxattr    = 22
	opListxattr   = 23
	opRemovexattr = 24
	opFlush       = 25
	opInit        = 26
	opOpendir     = 27
	opReaddir     = 28
	opReleasedir  = 29
	opFsyncdir    = 30
	opCreate      = 35
	opInterrupt   = 36
	opDestroy     = 38
	opBatchForget = 42
	opRename2     = 45
)

var opNames = map[uint32]string{
	opLookup: "LOOKUP", opForget: "FORGET", opGetattr: "GETATTR", opSetattr: "SETATTR",
	opMkdir: "MKDIR", opUnlink: "UNLINK", opRmdir: "RMDIR", opRename: "RENAME", opOpen: "OPEN",
	opRead: "READ", opWrite: "WRITE", opStatfs: "STATFS", opRelease: "RELEASE", opFsync: "FSYNC",
	opSetxattr: "SETXATTR", opGetxattr: "GETXATTR", opListxattr: "LISTXATTR",
	opRemovexattr: "REMOVEXATTR", opFlush: "FLUSH", opInit: "INIT", opOpendir: "OPENDIR",
	opReaddir: "READDIR", opReleasedir: "RELEASEDIR", opFsyncdir: "FSYNCDIR", opCreate: "CREATE",
	opInterrupt: "INTERRUPT", opDestroy: "DESTROY", opBatchForget: "BATCH_FORGET", opRename2: "RENAME2",
}

// opHeaderSize is the size of each opcode's own header, the struct that
// precedes names and data. The classic transport needs it to split a
// request's body; over io_uring the kernel has already split it (the
// header in the ring entry's op_in, the rest in its payload). Opcodes
// missing here have no header (LOOKUP, UNLINK, RMDIR, STATFS) or are
// answered ENOSYS without being parsed.
//
// The -server gofuse mode hands go-fuse every opcode it knows, so the
// table also holds the ones the spike's own server answers ENOSYS
// (MKNOD, LINK, ACCESS, locks, FALLOCATE, LSEEK, ...): over io_uring the
// op header's size is nowhere in the request and must come from here.
var opHeaderSize = map[uint32]int{
	opForget: 8, opGetattr: 16, opSetattr: 88, opMkdir: 8, opRename: 8, opOpen: 8,
	opRead: 40, opWrite: 40, opRelease: 24, opFsync: 16, opSetxattr: 8, opGetxattr: 8,
	opListxattr: 8, opFlush: 24, opInit: 64, opOpendir: 8, opReaddir: 40, opReleasedir: 24,
	opFsyncdir: 16, opCreate: 16, opInterrupt: 8, opBatchForget: 8, opRename2: 16,
	8 /* MKNOD */ : 16, 13 /* LINK */ : 8, 34 /* ACCESS */ : 8, 31 /* GETLK */ : 48,
	32 /* SETLK */ : 48, 33 /* SETLKW */ : 48, 37 /* BMAP */ : 16, 39 /* IOCTL */ : 32,
	40 /* POLL */ : 24, 43 /* FALLOCATE */ : 32, 44 /* READDIRPLUS */ : 40, 46 /* LSEEK */ : 24,
	47 /* COPY_FILE_RANGE */ : 56, 53 /* COPY_FILE_RANGE_64 */ : 56, 50 /* SYNCFS */ : 8, 51 /* TMPFILE */ : 16, 52 /* STATX */ : 24,
}

const (
	inHeaderSize  = 40 // struct fuse_in_header
	outHeaderSize = 16 // struct fuse_out_header
	attrSize      = 88 // struct fuse_attr
	attrOutSize   = 16 + attrSize
	entryOutSize  = 40 + attrSize
	openOutSize   = 16
	kstatfsSize   = 80

	// INIT flags (fuse_init_in/out.flags, and flags2 for bits 32 and up).
	initAsyncRead      = 1 << 0
	initAtomicOTrunc   = 1 << 3
	initBigWrites      = 1 << 5
	initAutoInvalData  = 1 << 12
	initParallelDirops = 1 << 18
	initPosixACL       = 1 << 20
	initMaxPages       = 1 << 22
	initExt            = 1 << 30
	initOverIOUring    = 1 << 41

	// SETATTR's valid bits.
	fattrMode     = 1 << 0
	fattrUID      = 1 << 1
	fattrGID      = 1 << 2
	fattrSize     = 1 << 3
	fattrAtime    = 1 << 4
	fattrMtime    = 1 << 5
	fattrFh       = 1 << 6
	fattrAtimeNow = 1 << 7
	fattrMtimeNow = 1 << 8

	getattrFh = 1 << 0 // fuse_getattr_in.getattr_flags: fh is valid

	// maxWrite is the largest WRITE (and READ) the spike accepts, as
	// zerofs and scripts/loopmount offer: 1 MiB, 256 pages.
	maxWrite = 1 << 20
	maxPages = maxWrite / 4096

	// cacheSeconds is how long the kernel may keep entries, negative
	// entries and attributes: an hour, as zerofs and loopmount do, so the
	// request counts compare.
	cacheSeconds = 3600
)

var le = binary.LittleEndian

// inHeader is struct fuse_in_header.
type inHeader struct {
	opcode   uint32
	unique   uint64
	nodeID   uint64
	uid, gid uint32
	pid      uint32
}

func parseInHeader(b []byte) inHeader {
	return inHeader{
		opcode: le.Uint32(b[4:]),
		unique: le.Uint64(b[8:]),
		nodeID: le.Uint64(b[16:]),
		uid:    le.Uint32(b[24:]),
		gid:    le.Uint32(b[28:]),
		pid:    le.Uint32(b[32:]),
	}
}

// putOutHeader writes struct fuse_out_header: the reply's total length,
// its error (0 or a negative errno) and the request it answers.
func putOutHeader(b []byte, length int, errno int32, unique uint64) {
	le.PutUint32(b[0:], uint32(length))
	le.PutUint32(b[4:], uint32(errno))
	le.PutUint64(b[8:], unique)
}

// cstring is b up to its first NUL, as a string (a copy: the buffer it
// came from may be overwritten by the reply).
func cstring(b []byte) string {
	for i, c := range b {
		if c == 0 {
			return string(b[:i])
		}
	}
	return string(b)
}
