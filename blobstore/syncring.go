package blobstore

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/zerofs/zerofs/internal/durable"
)

// A batch-mode Sync that makes a window's kept files durable one by one
// (syncmany.go) submits them to an io_uring of its own: for each file an
// OPENAT of its name in kept/ into one of the ring's registered slots
// (a direct descriptor: no entry in the process's table), linked to an
// FSYNC(DATASYNC) of that slot, linked to a CLOSE of it; after the last
// file an FSYNC of kept/ itself, drained behind all of them. One
// io_uring_enter submits a window of up to syncRingFiles files and waits
// for it, where plain system calls cost an openat, an fcntl, an
// fdatasync and a close a file and an fsync of kept/
// (docs/performance.md, System calls per entry). The kernel runs the
// fsyncs on its io_uring workers, several at once, as syncEachFile's
// goroutines do. What is durable when Sync returns is the same either
// way: each file's data, then kept/'s entries.
//
// The ring is separate from the namer's (hashbatch.go): a step's flush
// never waits behind a batch of hashing. Where the kernel offers no
// io_uring, or the ring fails, syncEachFile does the work.

const (
	// syncRingFiles is how many files one submission syncs (the ring's
	// registered slots).
	syncRingFiles = 128
	// syncRingEntries holds three entries a file and kept/'s fsync.
	syncRingEntries = 512

	ioringOpFsync       = 3
	ioringFsyncDatasync = 1 << 0
	iosqeFixedFile      = 1 << 0
	iosqeIODrain        = 1 << 1
	iosqeIOLink         = 1 << 2
	ioringRegisterFiles = 2
	// ioringFeatLinkedFile: a linked request's file is looked up when it
	// runs, so an FSYNC can use the slot the OPENAT before it filled
	// (Linux 5.17). Without it the ring is not used.
	ioringFeatLinkedFile = 1 << 12
)

// syncRingState is the Store's io_uring for kept files' syncs.
type syncRingState struct {
	syncOnce sync.Once
	syncMu   sync.Mutex // guards syncRing and syncDead; held while the ring is in use
	syncRing *ring
	syncDead bool
}

// newSyncRing is the seam (STYLE rule 16) that sets up the sync ring;
// tests make it fail to exercise the plain path.
var newSyncRing = func() (*ring, error) {
	r, err := newRing(syncRingEntries)
	if err != nil {
		return nil, err
	}
	if r.features&ioringFeatLinkedFile == 0 {
		r.close()
		return nil, errRingUnusable
	}
	if err := r.registerSparse(syncRingFiles); err != nil {
		r.close()
		return nil, err
	}
	return r, nil
}

// ringSynced counts the kept files synced through the ring, and
// ringDirSynced the fsyncs of kept/ made there (tests read them).
var ringSynced, ringDirSynced atomic.Int64

// syncRingSetup sets the sync ring up on first use.
func (s *Store) syncRingSetup() {
	s.syncOnce.Do(func() {
		if r, err := newSyncRing(); err == nil {
			s.syncRing = r
		}
	})
}

// syncRingUp reports whether kept files are synced through the ring.
func (s *Store) syncRingUp() bool {
	s.syncRingSetup()
	s.syncMu.Lock()
	defer s.syncMu.Unlock()
	return s.syncRing != nil && !s.syncDead
}

// registerSparse registers n empty slots for direct descriptors.
func (r *ring) registerSparse(n int) error {
	fds := make([]int32, n)
	for i := range fds {
		fds[i] = -1
	}
	_, _, errno := unix.Syscall6(unix.SYS_IO_URING_REGISTER, uintptr(r.fd), ioringRegisterFiles, uintptr(unsafe.Pointer(&fds[0])), uintptr(n), 0, 0)
	runtime.KeepAlive(fds)
	if errno != 0 {
		return fmt.Errorf("blobstore: io_uring_register files: %w", errno)
	}
	return nil
}

// syncKeptRing makes the kept files pending (names in kept/, open at dir)
// durable, and then kept/, through the sync ring. handled is false when
// there is no ring (none offered, or it failed: what it did is then
// unknown), and the caller syncs them all with plain system calls.
func (s *Store) syncKeptRing(dir *os.File, pending []string) (handled bool, err error) {
	s.syncRingSetup()
	s.syncMu.Lock()
	defer s.syncMu.Unlock()
	if s.syncRing == nil || s.syncDead {
		return false, nil
	}
	kfd := int(dir.Fd())
	for start := 0; start < len(pending); start += syncRingFiles {
		batch := pending[start:min(len(pending), start+syncRingFiles)]
		last := start+len(batch) == len(pending)
		paths := make([][]byte, len(batch))
		ops := make([]sqe, 0, 3*len(batch)+1)
		for j, name := range batch {
			paths[j] = append([]byte(name), 0)
			ops = append(ops,
				sqe{opcode: ioringOpOpenat, flags: iosqeIOLink, fd: int32(kfd), addr: uint64(uintptrOf(paths[j])),
					opFlags: unix.O_RDONLY | unix.O_NOFOLLOW | unix.O_NONBLOCK, fileIdx: int32(j + 1)}, // no O_CLOEXEC: EINVAL with a slot, which no exec inherits
				// Hard-linked: the slot is closed even if the fsync fails.
				sqe{opcode: ioringOpFsync, flags: iosqeFixedFile | iosqeIOHardlink, fd: int32(j), opFlags: ioringFsyncDatasync},
				sqe{opcode: ioringOpClose, fileIdx: int32(j + 1)})
		}
		if last {
			// After every file's data: kept/'s entries.
			ops = append(ops, sqe{opcode: ioringOpFsync, flags: iosqeIODrain, fd: int32(kfd)})
		}
		var submitted func()
		if durable.TestHook != nil {
			submitted = func() { hook("kept:ring-syncing", dir.Name()) }
		}
		res := make([]int32, len(ops))
		err := s.syncRing.runThen(ops, res, submitted)
		runtime.KeepAlive(paths)
		runtime.KeepAlive(dir)
		if err != nil {
			// What the ring did is unknown: it is not used again, and
			// every file is synced again the plain way.
			s.syncDead = true
			return false, nil
		}
		if err := syncRingResults(dir, batch, res, last); err != nil {
			if errors.Is(err, errRingUnusable) {
				s.syncDead = true
				return false, nil
			}
			return true, err
		}
	}
	return true, nil
}

// syncRingResults reads the completions res of syncKeptRing's ops for
// batch (and kept/'s fsync after them when dirSync). A name no longer in
// kept/ was detached and removed, pruned, or is a stash named since.
func syncRingResults(dir *os.File, batch []string, res []int32, dirSync bool) error {
	for j, name := range batch {
		open, data := res[3*j], res[3*j+1]
		switch {
		case open == -int32(unix.ENOENT):
			continue
		case open < 0:
			return fmt.Errorf("blobstore: sync kept blob %s: %w", name, &os.PathError{Op: "open", Path: filepath.Join(dir.Name(), name), Err: unix.Errno(-open)})
		case data == -int32(unix.EBADF):
			return errRingUnusable
		case data < 0:
			return fmt.Errorf("blobstore: sync kept blob %s: %w", name, &os.PathError{Op: "fdatasync", Path: filepath.Join(dir.Name(), name), Err: unix.Errno(-data)})
		}
		ringSynced.Add(1)
	}
	if !dirSync {
		return nil
	}
	switch d := res[3*len(batch)]; {
	case d == -int32(unix.EINVAL) || d == -int32(unix.ENOTSUP):
		// A filesystem that cannot fsync a directory: syncDirFile
		// says so once and goes on, as on the plain path.
		if err := syncDirFile(dir); err != nil {
			return fmt.Errorf("blobstore: sync kept blobs: %w", err)
		}
	case d < 0:
		return fmt.Errorf("blobstore: sync kept blobs: %w", &os.PathError{Op: "fsync", Path: dir.Name(), Err: unix.Errno(-d)})
	default:
		ringDirSynced.Add(1)
	}
	return nil
}

// closeSyncRing closes the sync ring (Close).
func (s *Store) closeSyncRing() {
	s.syncMu.Lock()
	defer s.syncMu.Unlock()
	if s.syncRing != nil {
		s.syncRing.close()
	}
	s.syncRing, s.syncDead = nil, true
}

// errRingUnusable: the kernel cannot fsync a slot filled by the open
// linked before it (no IORING_FEAT_LINKED_FILE, or an fsync that found
// the slot its open had just filled empty): the ring cannot do this work.
var errRingUnusable = errors.New("blobstore: io_uring cannot sync through direct descriptors")
