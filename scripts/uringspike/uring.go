package main

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The io_uring transport (the kernel's fs/fuse/dev_uring.c,
// Documentation/filesystems/fuse-io-uring.rst). Once INIT has agreed on
// FUSE_OVER_IO_URING, the daemon registers, for every possible CPU, a
// queue of ring entries: each a header buffer and a payload buffer, handed
// to the kernel by an IORING_OP_URING_CMD (FUSE_IO_URING_CMD_REGISTER) that
// stays pending until a request arrives. The kernel puts a request on the
// queue of the CPU the caller runs on and completes that entry's command;
// the daemon serves it and answers with COMMIT_AND_FETCH, which hands the
// reply back and re-arms the entry in one submission. Each queue is served
// by one thread pinned to its CPU, so a request is made, served and
// answered on one CPU: the wake-ups are same-CPU ones. FORGET and
// INTERRUPT still come through read(2) on /dev/fuse, and so does INIT,
// so one classic reader keeps running beside the rings.
//
// blobstore's ring (blobstore/uring.go) is left as it is: it is a batch
// runner for 64-byte entries, while this needs 128-byte entries
// (IORING_SETUP_SQE128: the command's 80 bytes), commands that stay
// pending, and a ring owned by one pinned thread.

// io_uring's ABI (include/uapi/linux/io_uring.h) beyond what blobstore uses.
const (
	ioringOffSQRing = 0
	ioringOffCQRing = 0x8000000
	ioringOffSQEs   = 0x10000000

	ioringSetupSQE128            = 1 << 10
	ioringSetupSingleIssuer      = 1 << 12
	ioringSetupDeferTaskrun      = 1 << 13
	ioringEnterGetEvents         = 1 << 0
	ioringOpUringCmd             = 46
	sqe128Size                   = 128
	cqeSize                      = 16
	fuseIOUringCmdRegister       = 1
	fuseIOUringCmdCommitAndFetch = 2

	// struct fuse_uring_req_header: in_out (the fuse_in_header of a
	// request, the fuse_out_header of its reply), op_in (the opcode's
	// header), then struct fuse_uring_ent_in_out.
	ringHeaderSize   = 128 + 128 + 32
	ringOpIn         = 128
	ringCommitID     = 256 + 8
	ringPayloadSize  = 256 + 16
	ringQueueDepth   = 4 // entries a queue: requests that can wait on one CPU
	ringPayloadBytes = maxWrite
)

type uringParams struct {
	sqEntries, cqEntries, flags, sqThreadCPU, sqThreadIdle, features, wqFd uint32
	resv                                                                   [3]uint32
	sqOff                                                                  [10]uint32 // head, tail, ring_mask, ring_entries, flags, dropped, array, resv1, user_addr (u64)
	cqOff                                                                  [10]uint32 // head, tail, ring_mask, ring_entries, overflow, cqes, flags, resv1, user_addr (u64)
}

// ring is one io_uring with 128-byte submission entries, used by the one
// thread that created it (IORING_SETUP_SINGLE_ISSUER).
type ring struct {
	fd             int
	sq, cq, sqes   []byte
	sqTail, sqMask uintptr
	sqArray        uintptr
	cqHead, cqTail uintptr
	cqMask, cqes   uintptr
	queued         uint32 // entries written since the last submission
}

// newRing sets up a ring; deferred task running (completions handled only
// when this thread asks for them) is tried first, then plain SQE128.
func newRing(entries uint32) (*ring, error) {
	var p uringParams
	var fd uintptr
	var errno syscall.Errno
	for _, flags := range []uint32{ioringSetupSQE128 | ioringSetupSingleIssuer | ioringSetupDeferTaskrun, ioringSetupSQE128} {
		p = uringParams{flags: flags}
		fd, _, errno = unix.Syscall(unix.SYS_IO_URING_SETUP, uintptr(entries), uintptr(unsafe.Pointer(&p)), 0)
		if errno != syscall.EINVAL {
			break
		}
	}
	if errno != 0 {
		return nil, fmt.Errorf("io_uring_setup: %w", errno)
	}
	r := &ring{fd: int(fd)}
	var err error
	mm := func(off int64, size int) []byte {
		if err != nil {
			return nil
		}
		var b []byte
		b, err = unix.Mmap(r.fd, off, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE)
		return b
	}
	r.sq = mm(ioringOffSQRing, int(p.sqOff[6])+int(p.sqEntries)*4)
	r.cq = mm(ioringOffCQRing, int(p.cqOff[5])+int(p.cqEntries)*cqeSize)
	r.sqes = mm(ioringOffSQEs, int(p.sqEntries)*sqe128Size)
	if err != nil {
		r.close()
		return nil, fmt.Errorf("io_uring mmap: %w", err)
	}
	r.sqTail, r.sqMask, r.sqArray = uintptr(p.sqOff[1]), uintptr(p.sqOff[2]), uintptr(p.sqOff[6])
	r.cqHead, r.cqTail, r.cqMask, r.cqes = uintptr(p.cqOff[0]), uintptr(p.cqOff[1]), uintptr(p.cqOff[2]), uintptr(p.cqOff[5])
	return r, nil
}

func (r *ring) close() {
	for _, m := range [][]byte{r.sq, r.cq, r.sqes} {
		if m != nil {
			unix.Munmap(m)
		}
	}
	unix.Close(r.fd)
}

func (r *ring) u32(m []byte, off uintptr) *uint32 { return (*uint32)(unsafe.Pointer(&m[off])) }

// fuseCmd queues a FUSE command for entry id: cmd is REGISTER or
// COMMIT_AND_FETCH; iov (REGISTER only) points at the entry's two iovecs.
func (r *ring) fuseCmd(devFd int, cmd uint32, qid uint16, commitID uint64, iov uintptr, id uint64) {
	mask := *r.u32(r.sq, r.sqMask)
	tail := atomic.LoadUint32(r.u32(r.sq, r.sqTail))
	idx := tail & mask
	e := r.sqes[uintptr(idx)*sqe128Size : uintptr(idx+1)*sqe128Size]
	clear(e)
	e[0] = ioringOpUringCmd
	le.PutUint32(e[4:], uint32(devFd))
	le.PutUint32(e[8:], cmd) // cmd_op
	le.PutUint64(e[16:], uint64(iov))
	if iov != 0 {
		le.PutUint32(e[24:], 2) // header and payload
	}
	le.PutUint64(e[32:], id) // user_data
	// struct fuse_uring_cmd_req, in the command area at byte 48.
	le.PutUint64(e[56:], commitID)
	le.PutUint16(e[64:], qid)
	*r.u32(r.sq, r.sqArray+uintptr(idx)*4) = idx
	atomic.StoreUint32(r.u32(r.sq, r.sqTail), tail+1)
	r.queued++
}

// enter submits what is queued and waits for at least wait completions.
func (r *ring) enter(wait uint32) error {
	for {
		flags := uintptr(0)
		if wait > 0 || r.queued == 0 {
			flags = ioringEnterGetEvents
		}
		n, _, errno := unix.Syscall6(unix.SYS_IO_URING_ENTER, uintptr(r.fd), uintptr(r.queued), uintptr(wait), flags, 0, 0)
		switch errno {
		case 0:
			r.queued -= uint32(n)
			if r.queued == 0 {
				return nil
			}
		case syscall.EINTR, syscall.EAGAIN, syscall.EBUSY:
			if r.queued == 0 {
				return nil
			}
		default:
			return fmt.Errorf("io_uring_enter: %w", errno)
		}
	}
}

// reap calls f for each completion (its user_data and result) and
// consumes them.
func (r *ring) reap(f func(id uint64, res int32)) {
	mask := *r.u32(r.cq, r.cqMask)
	head := atomic.LoadUint32(r.u32(r.cq, r.cqHead))
	tail := atomic.LoadUint32(r.u32(r.cq, r.cqTail))
	for ; head != tail; head++ {
		c := r.cq[r.cqes+uintptr(head&mask)*cqeSize:]
		f(le.Uint64(c), int32(le.Uint32(c[8:])))
	}
	atomic.StoreUint32(r.u32(r.cq, r.cqHead), head)
}

// entry is one ring entry's buffers, mapped outside the Go heap because the
// kernel writes into them between system calls.
type entry struct {
	mem     []byte // iovecs (32 bytes), header, payload
	hdr     []byte
	payload []byte
}

func newEntry() (*entry, error) {
	mem, err := unix.Mmap(-1, 0, 32+ringHeaderSize+ringPayloadBytes, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		return nil, err
	}
	e := &entry{mem: mem, hdr: mem[32 : 32+ringHeaderSize], payload: mem[32+ringHeaderSize:]}
	le.PutUint64(mem[0:], uint64(uintptr(unsafe.Pointer(&e.hdr[0]))))
	le.PutUint64(mem[8:], ringHeaderSize)
	le.PutUint64(mem[16:], uint64(uintptr(unsafe.Pointer(&e.payload[0]))))
	le.PutUint64(mem[24:], ringPayloadBytes)
	return e, nil
}

// errRegister marks a failed FUSE_IO_URING_CMD_REGISTER: the kernel
// refused FUSE over io_uring (EOPNOTSUPP where enable_uring is off).
var errRegister = errors.New("FUSE_IO_URING_CMD_REGISTER")

// ringCounts counts the requests served over io_uring, in all and by
// queue (the CPU they were made on).
type ringCounts struct {
	total   atomic.Uint64
	byQueue [64]atomic.Uint64
}

// ringServer serves the request in a ring entry: hdr is the entry's
// header (fuse_in_header in in_out, the opcode's header in op_in),
// payload its payload, of which the request fills size bytes. It writes
// the fuse_out_header into hdr and the reply's body into payload, and
// returns the body's length.
type ringServer func(hdr, payload []byte, size int) int

// serve is the spike's own ringServer.
func (s *server) serveEntry(hdr, payload []byte, size int) int {
	h := parseInHeader(hdr)
	op := hdr[ringOpIn : ringOpIn+opHeaderSize[h.opcode]]
	n, errno := s.handle(&h, op, payload[:min(size, len(payload))], payload)
	if errno != 0 {
		n = 0
	}
	putOutHeader(hdr, outHeaderSize+n, -int32(errno), h.unique)
	return n
}

// serveQueue registers queue qid's entries and serves them with serve on
// a thread pinned to CPU qid until the connection ends, counting the
// requests in served. It sends one value on ready: nil once every entry
// is registered, or why registration failed.
func serveQueue(devFd int, qid int, serve ringServer, served *ringCounts, ready chan<- error) error {
	// The thread stays locked (and is discarded when this returns): its
	// CPU affinity must not leak to other goroutines.
	runtime.LockOSThread()
	var cpus unix.CPUSet
	cpus.Set(qid)
	if err := unix.SchedSetaffinity(0, &cpus); err != nil {
		err = fmt.Errorf("queue %d: sched_setaffinity: %w", qid, err)
		ready <- err
		return err
	}
	r, err := newRing(2 * ringQueueDepth)
	if err != nil {
		ready <- err
		return err
	}
	defer r.close()
	ents := make([]*entry, ringQueueDepth)
	for i := range ents {
		if ents[i], err = newEntry(); err != nil {
			ready <- err
			return err
		}
		defer unix.Munmap(ents[i].mem)
		r.fuseCmd(devFd, fuseIOUringCmdRegister, uint16(qid), 0, uintptr(unsafe.Pointer(&ents[i].mem[0])), uint64(i))
	}
	if err := r.enter(0); err != nil {
		ready <- err
		return err
	}
	// A registration the kernel refuses completes at once; one it
	// accepts stays pending until a request comes.
	var regErr error
	live := len(ents)
	var pending []uint64 // entries completed with a request during the check
	r.reap(func(id uint64, res int32) {
		if res < 0 {
			regErr = fmt.Errorf("queue %d: %w: %w", qid, errRegister, syscall.Errno(-res))
			live--
			return
		}
		pending = append(pending, id)
	})
	ready <- regErr
	if live == 0 {
		return nil // why was sent on ready
	}
	complete := func(id uint64, res int32) {
		if res < 0 {
			// ENOTCONN or ECANCELED: the connection is gone (unmounted)
			// and the kernel has torn the entry down.
			live--
			return
		}
		e := ents[id]
		served.total.Add(1)
		if qid < len(served.byQueue) {
			served.byQueue[qid].Add(1)
		}
		n := serve(e.hdr, e.payload, int(le.Uint32(e.hdr[ringPayloadSize:])))
		le.PutUint32(e.hdr[ringPayloadSize:], uint32(n))
		r.fuseCmd(devFd, fuseIOUringCmdCommitAndFetch, uint16(qid), le.Uint64(e.hdr[ringCommitID:]), 0, id)
	}
	for _, id := range pending {
		complete(id, 0)
	}
	for live > 0 {
		if err := r.enter(1); err != nil {
			return fmt.Errorf("queue %d: %w", qid, err)
		}
		r.reap(complete)
	}
	return nil
}

// possibleCPUs is how many queues the kernel wants: one per possible CPU
// (num_possible_cpus), which may be more than are online or allowed here.
func possibleCPUs() (int, error) {
	b, err := os.ReadFile("/sys/devices/system/cpu/possible")
	if err != nil {
		return 0, err
	}
	n := 0
	for _, part := range strings.Split(strings.TrimSpace(string(b)), ",") {
		lo, hi, found := strings.Cut(part, "-")
		a, err := strconv.Atoi(lo)
		if err != nil {
			return 0, err
		}
		bnd := a
		if found {
			if bnd, err = strconv.Atoi(hi); err != nil {
				return 0, err
			}
		}
		n = max(n, bnd+1)
	}
	return n, nil
}
