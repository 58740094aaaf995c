package blobstore

import (
	"errors"
	"fmt"
	"sync/atomic"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// ring is a minimal io_uring (the kernel's submission and completion
// queues), for the namer's batches of small stashes: their opens, reads
// and closes go to the kernel in one io_uring_enter a phase instead of
// three system calls a file (docs/performance.md, System calls per
// entry). Only what HashStashes needs is here: OPENAT, READ and CLOSE,
// submitted and waited for as a batch. Where the kernel refuses io_uring
// (too old, or io_uring_disabled), newRing fails and the caller uses plain
// system calls.
type ring struct {
	fd       int
	features uint32 // IORING_FEAT_* the kernel offers
	sqRing   []byte
	cqRing   []byte
	sqeMem   []byte
	entries  uint32

	sqHead, sqTail, sqMask, sqArray uintptr // offsets into sqRing
	cqHead, cqTail, cqMask, cqes    uintptr // offsets into cqRing
}

// io_uring's ABI (include/uapi/linux/io_uring.h).
const (
	ioringOffSQRing = 0
	ioringOffCQRing = 0x8000000
	ioringOffSQEs   = 0x10000000

	ioringEnterGetEvents = 1 << 0

	ioringOpOpenat = 18
	ioringOpClose  = 19
	ioringOpRead   = 22

	iosqeIOHardlink = 1 << 3

	sqeSize = 64
	cqeSize = 16
)

type sqringOffsets struct {
	head, tail, ringMask, ringEntries, flags, dropped, array, resv1 uint32
	userAddr                                                        uint64
}

type cqringOffsets struct {
	head, tail, ringMask, ringEntries, overflow, cqes, flags, resv1 uint32
	userAddr                                                        uint64
}

type uringParams struct {
	sqEntries, cqEntries, flags, sqThreadCPU, sqThreadIdle, features, wqFd uint32
	resv                                                                   [3]uint32
	sqOff                                                                  sqringOffsets
	cqOff                                                                  cqringOffsets
}

// sqe is one submission queue entry.
type sqe struct {
	opcode   uint8
	flags    uint8
	ioprio   uint16
	fd       int32
	off      uint64
	addr     uint64
	len      uint32
	opFlags  uint32
	userData uint64
	bufIndex uint16
	person   uint16
	fileIdx  int32
	addr3    uint64
	pad      uint64
}

type cqe struct {
	userData uint64
	res      int32
	flags    uint32
}

// newRing sets up a ring of entries submission entries (a power of two).
func newRing(entries uint32) (*ring, error) {
	var p uringParams
	fd, _, errno := unix.Syscall(unix.SYS_IO_URING_SETUP, uintptr(entries), uintptr(unsafe.Pointer(&p)), 0)
	if errno != 0 {
		return nil, fmt.Errorf("blobstore: io_uring_setup: %w", errno)
	}
	r := &ring{fd: int(fd), entries: p.sqEntries, features: p.features}
	fail := func(err error) (*ring, error) {
		r.close()
		return nil, fmt.Errorf("blobstore: io_uring mmap: %w", err)
	}
	var err error
	sqSize := int(p.sqOff.array) + int(p.sqEntries)*4
	if r.sqRing, err = unix.Mmap(r.fd, ioringOffSQRing, sqSize, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE); err != nil {
		return fail(err)
	}
	cqSize := int(p.cqOff.cqes) + int(p.cqEntries)*cqeSize
	if r.cqRing, err = unix.Mmap(r.fd, ioringOffCQRing, cqSize, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE); err != nil {
		return fail(err)
	}
	if r.sqeMem, err = unix.Mmap(r.fd, ioringOffSQEs, int(p.sqEntries)*sqeSize, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE); err != nil {
		return fail(err)
	}
	r.sqHead, r.sqTail, r.sqMask, r.sqArray = uintptr(p.sqOff.head), uintptr(p.sqOff.tail), uintptr(p.sqOff.ringMask), uintptr(p.sqOff.array)
	r.cqHead, r.cqTail, r.cqMask, r.cqes = uintptr(p.cqOff.head), uintptr(p.cqOff.tail), uintptr(p.cqOff.ringMask), uintptr(p.cqOff.cqes)
	return r, nil
}

func (r *ring) close() {
	for _, m := range [][]byte{r.sqRing, r.cqRing, r.sqeMem} {
		if m != nil {
			unix.Munmap(m)
		}
	}
	unix.Close(r.fd)
}

func (r *ring) u32(m []byte, off uintptr) *uint32 { return (*uint32)(unsafe.Pointer(&m[off])) }

// run submits ops (at most r.entries) and waits for all their
// completions; res[i] is ops[i]'s result (a negative errno on failure).
// Whatever ops point to (paths, buffers) must stay alive until run
// returns. It is not safe for concurrent use.
func (r *ring) run(ops []sqe, res []int32) error { return r.runThen(ops, res, nil) }

// runThen is run; when submitted is not nil, the ops are submitted first
// without waiting and submitted is called before their completions are
// waited for (a crash point: the ops in flight).
func (r *ring) runThen(ops []sqe, res []int32, submitted func()) error {
	if uint32(len(ops)) > r.entries {
		return errors.New("blobstore: io_uring batch larger than its ring")
	}
	mask := *r.u32(r.sqRing, r.sqMask)
	tail := atomic.LoadUint32(r.u32(r.sqRing, r.sqTail))
	for i := range ops {
		idx := (tail + uint32(i)) & mask
		ops[i].userData = uint64(i)
		*(*sqe)(unsafe.Pointer(&r.sqeMem[uintptr(idx)*sqeSize])) = ops[i]
		*(*uint32)(unsafe.Pointer(&r.sqRing[r.sqArray+uintptr(idx)*4])) = idx
	}
	atomic.StoreUint32(r.u32(r.sqRing, r.sqTail), tail+uint32(len(ops)))
	toSubmit, done := uint32(len(ops)), 0
	cmask := *r.u32(r.cqRing, r.cqMask)
	if submitted != nil {
		for toSubmit > 0 {
			n, _, errno := unix.Syscall6(unix.SYS_IO_URING_ENTER, uintptr(r.fd), uintptr(toSubmit), 0, 0, 0, 0)
			switch errno {
			case 0:
				toSubmit -= uint32(n)
			case syscall.EINTR, syscall.EAGAIN, syscall.EBUSY:
			default:
				return fmt.Errorf("blobstore: io_uring_enter: %w", errno)
			}
		}
		submitted()
	}
	for done < len(ops) {
		n, _, errno := unix.Syscall6(unix.SYS_IO_URING_ENTER, uintptr(r.fd), uintptr(toSubmit), uintptr(len(ops)-done), ioringEnterGetEvents, 0, 0)
		switch errno {
		case 0:
			toSubmit -= uint32(n)
		case syscall.EINTR, syscall.EAGAIN, syscall.EBUSY:
			// Nothing submitted; the completions there are reaped
			// below, which makes room.
		default:
			return fmt.Errorf("blobstore: io_uring_enter: %w", errno)
		}
		head := atomic.LoadUint32(r.u32(r.cqRing, r.cqHead))
		ctail := atomic.LoadUint32(r.u32(r.cqRing, r.cqTail))
		for ; head != ctail; head++ {
			c := (*cqe)(unsafe.Pointer(&r.cqRing[r.cqes+uintptr(head&cmask)*cqeSize]))
			if c.userData < uint64(len(res)) {
				res[c.userData] = c.res
			}
			done++
		}
		atomic.StoreUint32(r.u32(r.cqRing, r.cqHead), head)
	}
	return nil
}

// unsafeSliceData is unsafe.SliceData as a uintptr-able pointer.
func unsafeSliceData(b []byte) unsafe.Pointer { return unsafe.Pointer(unsafe.SliceData(b)) }
