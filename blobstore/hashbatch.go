package blobstore

import (
	"crypto/sha256"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"

	"github.com/zerofs/zerofs/record"
)

// Hashed is what HashStashes found for one stash: HashStash's results.
type Hashed struct {
	ID  ID
	N   int64
	Err error
}

// ringEntries bounds one io_uring submission (a read and a close a file).
const ringEntries = 256

// HashStashes is HashStash of each of names. The small stashes this Store
// made itself (their size known from their stash, at most hashSmall, not
// sparse) are opened, read whole and closed through io_uring, one
// io_uring_enter for the opens of up to ringEntries of them and one for
// their reads and closes, where HashStash costs an openat, a pread and a
// close each; the others, and each of those whose read says it grew, go
// through HashStash. Where the kernel offers no io_uring, all do.
func (s *Store) HashStashes(names []string) []Hashed {
	out := make([]Hashed, len(names))
	var small []int
	rest := make([]int, 0, len(names))
	r := s.uring()
	s.kmu.Lock()
	dir := s.kept.dir
	s.kmu.Unlock()
	if r != nil && dir != nil {
		// ringMu before any keptInode's mutex, as MoveStashes takes them.
		s.ringMu.Lock()
		for i, name := range names {
			s.kmu.Lock()
			ki := s.kept.stash[name]
			s.kmu.Unlock()
			if ki != nil {
				ki.mu.Lock()
				if st := ki.stashStat; !ki.named && st != nil && st.Mode&unix.S_IFMT == unix.S_IFREG && st.Size <= hashSmall && !mostlyHoles(st) {
					small = append(small, i) // its lock held until hashed
					continue
				}
				ki.mu.Unlock()
			}
			rest = append(rest, i)
		}
		for len(small) > 0 && !s.ringDead {
			k := min(len(small), ringEntries/2)
			rest = append(rest, s.hashRing(r, int(dir.Fd()), names, small[:k], out)...)
			small = small[k:]
		}
		for _, i := range small { // the ring failed: HashStash does them
			s.kmu.Lock()
			ki := s.kept.stash[names[i]]
			s.kmu.Unlock()
			ki.mu.Unlock()
			rest = append(rest, i)
		}
		s.ringMu.Unlock()
	} else {
		for i := range names {
			rest = append(rest, i)
		}
	}
	for _, i := range rest {
		out[i].ID, out[i].N, out[i].Err = s.HashStash(names[i])
	}
	return out
}

// hashRing hashes the stashes names[idx] (each one's keptInode locked,
// unlocked here) through the ring; it returns those to hash again by
// HashStash (an open or a read that failed, or a file that grew).
func (s *Store) hashRing(r *ring, kfd int, names []string, idx []int, out []Hashed) (again []int) {
	kis := make([]*keptInode, len(idx))
	s.kmu.Lock()
	for j, i := range idx {
		kis[j] = s.kept.stash[names[i]]
	}
	s.kmu.Unlock()
	defer func() {
		for _, ki := range kis {
			ki.mu.Unlock()
		}
	}()
	paths := make([][]byte, len(idx))
	ops := make([]sqe, 0, 2*len(idx))
	for j, i := range idx {
		paths[j] = append([]byte(names[i]), 0)
		ops = append(ops, sqe{opcode: ioringOpOpenat, fd: int32(kfd), addr: uint64(uintptrOf(paths[j])),
			opFlags: unix.O_RDONLY | unix.O_NOFOLLOW | unix.O_CLOEXEC})
	}
	res := make([]int32, len(ops))
	err := r.run(ops, res)
	runtime.KeepAlive(paths)
	if err != nil {
		// Nothing is known of the opens: those that succeeded are
		// unknown descriptors (the ring failed, not the opens), so the
		// ring is not used again, and HashStash does them all.
		s.ringOff()
		return idx
	}
	bufs := make([][]byte, len(idx))
	opened := make([]int, 0, len(idx)) // positions in idx
	ops = ops[:0]
	for j, i := range idx {
		if res[j] < 0 {
			again = append(again, i)
			continue
		}
		fd := res[j]
		hook("kept:naming", filepath.Join(s.dir, keptDirName, names[i]))
		bufs[j] = make([]byte, kis[j].stashStat.Size+1)
		opened = append(opened, j)
		ops = append(ops,
			sqe{opcode: ioringOpRead, flags: iosqeIOHardlink, fd: fd, addr: uint64(uintptrOf(bufs[j])), len: uint32(len(bufs[j]))},
			sqe{opcode: ioringOpClose, fd: fd})
	}
	if len(ops) == 0 {
		return again
	}
	res = make([]int32, len(ops))
	if err := r.run(ops, res); err != nil {
		// The descriptors' fate is unknown: they are left (closing one
		// the ring closed could close another goroutine's new file),
		// and the files hashed again.
		s.ringOff()
		for _, j := range opened {
			again = append(again, idx[j])
		}
		return again
	}
	runtime.KeepAlive(bufs)
	for k, j := range opened {
		i := idx[j]
		if res[2*k+1] == -int32(unix.ECANCELED) {
			unix.Close(int(ops[2*k].fd)) // the close was not run
		}
		n := res[2*k]
		if n < 0 || int64(n) > kis[j].stashStat.Size {
			again = append(again, i) // failed, or grew: HashStash reads it
			continue
		}
		out[i] = Hashed{ID: sha256.Sum256(bufs[j][:n]), N: int64(n)}
		ringHashed.Add(1)
	}
	return again
}

// ringHashed counts the stashes hashed through the ring (tests read it).
var ringHashed atomic.Int64

// uintptrOf is the address of b's first byte (b not empty).
func uintptrOf(b []byte) uintptr { return uintptr(unsafeSliceData(b)) }

// uring is the store's ring, set up on first use; nil when the kernel
// offers none (or it failed once).
func (s *Store) uring() *ring {
	s.ringOnce.Do(func() {
		if r, err := newRing(ringEntries); err == nil {
			s.ring = r
		}
	})
	s.ringMu.Lock()
	defer s.ringMu.Unlock()
	if s.ringDead {
		return nil
	}
	return s.ring
}

// ringOff stops using the ring (its state is unknown after a failure);
// the caller holds ringMu.
func (s *Store) ringOff() { s.ringDead = true }

// ringState is the Store's io_uring (HashStashes).
type ringState struct {
	ringOnce sync.Once
	ringMu   sync.Mutex // guards ringDead; held while the ring is in use
	ring     *ring
	ringDead bool
}

// ioringOpRenameat is IORING_OP_RENAMEAT.
const ioringOpRenameat = 35

// renameRing is moveStash of each of moves (at most ringEntries) with the
// renames submitted through r in one io_uring_enter; the caller holds
// ringMu. It returns the stashes to remove instead (gone), whether any was
// moved, and those to move one by one (the ring failed).
func (s *Store) renameRing(r *ring, dir *os.File, moves []Moved) (gone []string, moved bool, again []Moved) {
	kfd := int(dir.Fd())
	type one struct {
		m        Moved
		ki       *keptInode
		old, new []byte
	}
	var todo []one
	for _, m := range moves {
		if !record.IsStashName(m.Stash) {
			continue
		}
		s.kmu.Lock()
		ki := s.kept.stash[m.Stash]
		s.kmu.Unlock()
		if ki != nil {
			ki.mu.Lock()
			if ki.named {
				ki.mu.Unlock()
				gone = append(gone, m.Stash) // detached into a pack since it was hashed
				continue
			}
		}
		if _, inPack := s.lookup(m.ID); inPack {
			if ki != nil {
				ki.mu.Unlock()
			}
			gone = append(gone, m.Stash)
			continue
		}
		hook("kept:moving", filepath.Join(s.dir, keptDirName, m.Stash))
		todo = append(todo, one{m: m, ki: ki, old: append([]byte(m.Stash), 0), new: append([]byte(m.ID.String()), 0)})
	}
	if len(todo) == 0 {
		return gone, false, nil
	}
	ops := make([]sqe, len(todo))
	for i, o := range todo {
		ops[i] = sqe{opcode: ioringOpRenameat, fd: int32(kfd), addr: uint64(uintptrOf(o.old)), len: uint32(kfd),
			off: uint64(uintptrOf(o.new)), opFlags: unix.RENAME_NOREPLACE}
	}
	res := make([]int32, len(ops))
	err := r.run(ops, res)
	runtime.KeepAlive(todo)
	for i, o := range todo {
		if err != nil {
			// What the ring did is unknown: each is moved (or found
			// moved) one by one.
			if o.ki != nil {
				o.ki.mu.Unlock()
			}
			again = append(again, o.m)
			continue
		}
		var rerr error
		if res[i] < 0 {
			rerr = unix.Errno(-res[i])
		}
		ok, merr := s.movedStash(dir, o.m, o.ki, rerr)
		if o.ki != nil {
			o.ki.mu.Unlock()
		}
		switch {
		case merr != nil:
			again = append(again, o.m) // its error comes again from moveStash
		case ok:
			moved = true
		default:
			gone = append(gone, o.m.Stash)
		}
	}
	if err != nil {
		s.ringOff()
	}
	return gone, moved, again
}
