package main

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"syscall"

	"golang.org/x/sys/unix"
)

// The classic transport: threads blocked in read(2) on /dev/fuse, each
// serving the request it read and writing the reply itself, so a request
// costs the kernel's two wake-ups (the reader's, then the caller's) and no
// hand-off inside the daemon. Which CPU the reader runs on is the
// scheduler's choice: often not the caller's.

// readBufSize holds the largest request: a 1 MiB WRITE and its headers.
const readBufSize = maxWrite + 4096

// serveClassic reads and serves requests until the mount goes away
// (ENODEV), and returns nil then.
func (s *server) serveClassic(fd int) error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	in := make([]byte, readBufSize)
	out := make([]byte, outHeaderSize+maxWrite)
	for {
		n, err := unix.Read(fd, in)
		switch {
		case err == unix.ENODEV:
			return nil
		case err == unix.EINTR || err == unix.EAGAIN || err == unix.ENOENT:
			continue // ENOENT: the request was interrupted before we read it
		case err != nil:
			return fmt.Errorf("read /dev/fuse: %w", err)
		case n < inHeaderSize:
			return fmt.Errorf("read /dev/fuse: short request (%d bytes)", n)
		}
		s.serveBuf(fd, in[:n], out)
	}
}

// serveBuf serves one request read from /dev/fuse (in) and writes its
// reply through out.
func (s *server) serveBuf(fd int, in, out []byte) {
	h := parseInHeader(in)
	body := in[inHeaderSize:]
	split := min(opHeaderSize[h.opcode], len(body))
	n, errno := s.handle(&h, body[:split], body[split:], out[outHeaderSize:])
	if noReply(h.opcode) {
		return
	}
	if errno != 0 {
		n = 0
	}
	putOutHeader(out, outHeaderSize+n, -int32(errno), h.unique)
	// ENOENT: the request was interrupted and the kernel no longer waits.
	if _, err := unix.Write(fd, out[:outHeaderSize+n]); err != nil && err != unix.ENOENT && err != unix.ENODEV {
		fmt.Fprintf(os.Stderr, "uringspike: write reply to %s: %v\n", opNames[h.opcode], err)
	}
}

// errInitFirst is returned when the first request is not INIT.
var errInitFirst = errors.New("uringspike: first request is not INIT")

// initConn reads the kernel's INIT and answers it with the settings
// scripts/loopmount gives go-fuse (1 MiB writes, POSIX ACLs, parallel
// directory operations), plus FUSE_OVER_IO_URING when uring is set and
// the kernel offers it. It reports whether io_uring was agreed.
func (s *server) initConn(fd int, uring bool) (bool, error) {
	in := make([]byte, readBufSize)
	var n int
	for {
		var err error
		n, err = unix.Read(fd, in)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return false, fmt.Errorf("read INIT: %w", err)
		}
		break
	}
	h := parseInHeader(in[:n])
	if h.opcode != opInit || n < inHeaderSize+16 {
		return false, errInitFirst
	}
	s.counts[opInit].Add(1)
	body := in[inHeaderSize:n]
	major, minor := le.Uint32(body), le.Uint32(body[4:])
	readahead := le.Uint32(body[8:])
	offered := uint64(le.Uint32(body[12:]))
	if offered&initExt != 0 && len(body) >= 24 {
		offered |= uint64(le.Uint32(body[16:])) << 32
	}
	out := make([]byte, outHeaderSize+64)
	if major != 7 || minor < 31 {
		putOutHeader(out, outHeaderSize, -int32(syscall.EPROTO), h.unique)
		unix.Write(fd, out[:outHeaderSize])
		return false, fmt.Errorf("uringspike: kernel FUSE %d.%d, want 7.31 or later", major, minor)
	}
	want := uint64(initAsyncRead | initAtomicOTrunc | initBigWrites | initAutoInvalData |
		initParallelDirops | initPosixACL | initMaxPages | initExt)
	if uring {
		want |= initOverIOUring
	}
	flags := want & offered
	r := out[outHeaderSize:]
	le.PutUint32(r[0:], 7)
	le.PutUint32(r[4:], min(minor, 42))
	le.PutUint32(r[8:], readahead)
	le.PutUint32(r[12:], uint32(flags))
	le.PutUint16(r[16:], 12) // max_background
	le.PutUint16(r[18:], 9)  // congestion_threshold
	le.PutUint32(r[20:], maxWrite)
	le.PutUint32(r[24:], 1) // time_gran: nanoseconds
	le.PutUint16(r[28:], maxPages)
	le.PutUint32(r[32:], uint32(flags>>32))
	putOutHeader(out, outHeaderSize+64, 0, h.unique)
	if _, err := unix.Write(fd, out); err != nil {
		return false, fmt.Errorf("reply INIT: %w", err)
	}
	return flags&initOverIOUring != 0, nil
}
