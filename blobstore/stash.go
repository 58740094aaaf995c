package blobstore

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"sync/atomic"

	"golang.org/x/sys/unix"

	"github.com/zerofs/zerofs/internal/durable"
	"github.com/zerofs/zerofs/record"
)

// Stashes: a workspace file about to lose its last name is linked into
// kept/ under a name of its own (kept/p-<32 hex digits>) without being read,
// so that a removal costs a link on the request path, not a read and a hash.
// Its sha256 is computed later (Name, by the caller's hasher), which links
// the same inode as the blob kept/<sha256>; once the caller has recorded the
// name durably, Unstash removes the stash's own link. A stash is the
// before-state only through the caller's record of its name: Stash does not
// make it a blob, and List, Prune and verification never see it.
//
// Everything Keep guards against holds for a stash too (kept.go): the inode
// is registered before the writer check, and Detach hashes an unnamed
// stash before anything can write to it.

// A stash's name in kept/ is record.StashPrefix and 32 lower-case hex
// digits (record.IsStashName). A name read back from the store is
// untrusted; anything else is damage.

// newStashName is a fresh random stash name.
func newStashName() string {
	var b [16]byte
	rand.Read(b[:])
	return record.StashPrefix + hex.EncodeToString(b[:])
}

// Stash links f, an open regular workspace file about to lose its last name,
// into the store under a new stash name, without reading it; n is its size.
// ok is false, and nothing is stored, when Keep would refuse it (another
// link, open for writing, another filesystem, a refused link, or larger
// than Options.MaxSize); the caller copies it instead.
//
// With Options.Sync the file's data and its entry in kept/ are durable
// when Stash returns; without it, Sync makes them so.
func (s *Store) Stash(f *os.File, writing func(dev, ino uint64) bool) (name string, n int64, ok bool, err error) {
	return s.stash(int(f.Fd()), f, writing)
}

// StashFd is Stash of the file open at fd, which stays the caller's, for a
// store without Options.Sync (where a stash needs no fsync of its own): it
// spares an rm -rf an *os.File per removed file (the runtime's fcntl, and
// its poller's epoll_ctl for a descriptor opened O_NONBLOCK).
func (s *Store) StashFd(fd int, writing func(dev, ino uint64) bool) (name string, n int64, ok bool, err error) {
	if s.opts.Sync {
		return "", 0, false, errors.New("blobstore: StashFd on a store with Sync")
	}
	return s.stash(fd, nil, writing)
}

// stash is Stash of the file open at fd (f, if not nil, is it).
func (s *Store) stash(fd int, f *os.File, writing func(dev, ino uint64) bool) (name string, n int64, ok bool, err error) {
	if s.opts.ReadOnly {
		return "", 0, false, ErrReadOnly
	}
	st, ki, forget, err := s.claimInode(fd, true, writing)
	if err != nil {
		return "", 0, false, fmt.Errorf("blobstore: stash: %w", err)
	}
	if ki == nil {
		return "", 0, false, nil
	}
	defer ki.mu.Unlock()
	name = newStashName()
	err = unix.Linkat(unix.AT_FDCWD, "/proc/self/fd/"+strconv.Itoa(fd), int(s.kept.dir.Fd()), name, unix.AT_SYMLINK_FOLLOW)
	switch {
	case errors.Is(err, unix.EXDEV):
		forget()
		s.KeepOff("store on another filesystem")
		return "", 0, false, nil
	case err != nil:
		forget()
		return "", 0, false, nil
	}
	hook("kept:stashed", filepath.Join(s.dir, keptDirName, name))
	ki.stash, ki.stashBytes, ki.stashStored = name, st.Size, st.Size
	ki.stashStat = &st
	s.kmu.Lock()
	s.kept.stash[name] = ki
	if !s.opts.Sync {
		s.kept.pending = append(s.kept.pending, name)
	}
	s.kmu.Unlock()
	s.mu.Lock()
	s.looseBytes += st.Size
	s.mu.Unlock()
	if !s.opts.Sync {
		if st.Size >= DefaultChunkAbove {
			unix.SyncFileRange(fd, 0, 0, unix.SYNC_FILE_RANGE_WRITE) // as durable.StartWriteback
		}
		return name, st.Size, true, nil
	}
	if err := fdatasync(f); err != nil {
		return "", 0, false, fmt.Errorf("blobstore: stash: %w", err)
	}
	if err := syncDirFile(s.kept.dir); err != nil {
		return "", 0, false, fmt.Errorf("blobstore: stash: %w", err)
	}
	return name, st.Size, true, nil
}

// Name hashes the stash name and makes its content a blob: the same inode
// linked as kept/<sha256>, unless that blob is stored already. The stash
// keeps its own link until Unstash. A stash named before (by Detach, or an
// earlier Name) returns what it hashed to then: its inode may have been
// written since. After a restart the stash is read from the store, which is
// untrusted: a name that is not a stash's, or not a regular file, is
// ErrCorrupt; a stash that is not there is ErrNotFound.
//
// With Options.Sync the blob's entry in kept/ is durable when Name returns;
// without it, Sync makes it so.
func (s *Store) Name(name string) (ID, int64, error) {
	h, err := s.hashStash(name)
	if err != nil || h.done {
		if h.ki != nil {
			h.ki.mu.Unlock()
		}
		return h.id, h.n, err
	}
	if h.ki != nil {
		defer h.ki.mu.Unlock()
	}
	if h.f != nil {
		defer h.f.Close()
	}
	return s.nameHashed(name, h.dir, h.ki, &h.st, h.id, h.n, h.f)
}

// HashStash is the first half of naming the stash name by a move
// (MoveStashes): what its content hashes to, with nothing linked, so the
// caller can record the name durably before the stash becomes its blob.
// Its errors are Name's. Until MoveStashes the stash is still one: an
// open for writing of its inode detaches it (Detach) as before.
func (s *Store) HashStash(name string) (ID, int64, error) {
	h, err := s.hashStash(name)
	if h.ki != nil {
		h.ki.mu.Unlock()
	}
	if h.f != nil {
		h.f.Close()
	}
	return h.id, h.n, err
}

// hashed is what hashStash found.
type hashed struct {
	id   ID
	n    int64
	done bool       // named before, or stored into a pack (sparse): nothing to link
	ki   *keptInode // the stash's, locked (nil: not this Store's own)
	dir  *os.File
	st   unix.Stat_t
	f    *os.File // the stash open, for a large file (nil: closed)
}

// hashStash hashes the stash name (Name's first half). The returned
// keptInode, when not nil, is locked; the caller unlocks it (and closes
// f).
func (s *Store) hashStash(name string) (h hashed, err error) {
	if s.opts.ReadOnly {
		return h, ErrReadOnly
	}
	if !record.IsStashName(name) {
		return h, fmt.Errorf("%w: %q is not a stash name", ErrCorrupt, name)
	}
	s.kmu.Lock()
	ki := s.kept.stash[name]
	dir := s.kept.dir
	s.kmu.Unlock()
	if dir == nil {
		return h, fmt.Errorf("blobstore: name stash %s: no kept directory", name)
	}
	h.dir = dir
	if ki != nil {
		ki.mu.Lock()
		h.ki = ki
		if ki.named {
			h.id, h.n, h.done = ki.id, ki.stashBytes, true
			return h, nil
		}
	}
	fd, err := unix.Openat(int(dir.Fd()), name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	switch {
	case errors.Is(err, unix.ENOENT):
		return h, fmt.Errorf("%w: stash %s", ErrNotFound, name)
	case errors.Is(err, unix.ELOOP):
		return h, fmt.Errorf("%w: stash %s is a symlink", ErrCorrupt, name)
	case err != nil:
		return h, fmt.Errorf("blobstore: name stash %s: %w", name, err)
	}
	path := filepath.Join(s.dir, keptDirName, name)
	hook("kept:naming", path) // what it holds while it hashes, held
	if ki != nil && ki.stashStat != nil {
		h.st = *ki.stashStat // this process linked it, and nothing wrote it since
	} else if err := unix.Fstat(fd, &h.st); err != nil {
		unix.Close(fd)
		return h, fmt.Errorf("blobstore: name stash %s: %w", name, err)
	}
	if h.st.Mode&unix.S_IFMT != unix.S_IFREG {
		unix.Close(fd)
		return h, fmt.Errorf("%w: stash %s is not a regular file", ErrCorrupt, name)
	}
	if !mostlyHoles(&h.st) && h.st.Size <= hashSmall {
		// Most of an rm -rf: one pread, and no *os.File (its fcntl).
		id, n, grew, err := hashSmallFd(fd, &h.st)
		if err == nil && !grew {
			unix.Close(fd)
			h.id, h.n = id, n
			return h, nil
		}
		if err != nil {
			unix.Close(fd)
			return h, fmt.Errorf("blobstore: name stash %s: %w", name, err)
		}
	}
	f := os.NewFile(uintptr(fd), path)
	if mostlyHoles(&h.st) && (s.opts.MaxSize <= 0 || h.st.Size <= s.opts.MaxSize) {
		// A large sparse file (StashCopy's copies, or an unlinked one) is
		// stored with its holes recorded, not linked: a blob that is a
		// list is read, verified and restored by its data alone.
		defer f.Close()
		id, n, err := s.Put(f)
		if err != nil {
			return h, fmt.Errorf("blobstore: name stash %s: %w", name, err)
		}
		if ki != nil {
			ki.id, ki.named = id, true
		}
		h.id, h.n, h.done = id, n, true
		return h, nil
	}
	id, n, err := hashFileStat(f, &h.st)
	if err != nil {
		f.Close()
		return h, fmt.Errorf("blobstore: name stash %s: %w", name, err)
	}
	h.id, h.n, h.f = id, n, f
	return h, nil
}

// nameHashed is the rest of Name once stash name (inode st, lstat'ed or
// as linked) hashed to id: its link as the blob. f is the stash open, for
// Options.Sync's fdatasync (nil: it is opened again for that).
func (s *Store) nameHashed(name string, dir *os.File, ki *keptInode, st *unix.Stat_t, id ID, n int64, f *os.File) (ID, int64, error) {
	linked := false
	_, inPack := s.lookup(id)
	if !inPack {
		err := unix.Linkat(int(dir.Fd()), name, int(dir.Fd()), id.String(), 0)
		switch {
		case err == nil:
			linked = true
		case errors.Is(err, unix.EEXIST):
			// Kept already (another file of the same content).
		default:
			return ID{}, 0, fmt.Errorf("blobstore: name stash %s: %w", name, err)
		}
	}
	if linked {
		s.kmu.Lock()
		k := ki
		if k == nil {
			k = s.kept.ino[st.Ino]
		}
		if k == nil {
			k = &keptInode{ino: st.Ino}
			s.kept.ino[st.Ino] = k
			s.mu.Lock()
			s.looseBytes += n
			s.mu.Unlock()
		}
		k.id, k.n, k.linked = id, n, true
		if !s.opts.Sync {
			// Only the new entry needs to be durable: the inode's data
			// is the stash's, made durable with it.
			s.kept.dirDirty = true
		}
		s.kmu.Unlock()
		if s.opts.Sync {
			if f == nil {
				g, err := os.OpenFile(filepath.Join(s.dir, keptDirName, name), os.O_RDONLY|unix.O_NOFOLLOW, 0)
				if err != nil {
					return ID{}, 0, fmt.Errorf("blobstore: name stash %s: %w", name, err)
				}
				defer g.Close()
				f = g
			}
			if err := fdatasync(f); err != nil {
				return ID{}, 0, fmt.Errorf("blobstore: name stash %s: %w", name, err)
			}
			if err := syncDirFile(dir); err != nil {
				return ID{}, 0, fmt.Errorf("blobstore: name stash %s: %w", name, err)
			}
		}
	} else if inPack && s.opts.Sync {
		if err := s.settle([]ID{id}); err != nil {
			return ID{}, 0, err
		}
	}
	if ki != nil {
		ki.id, ki.named = id, true
	}
	return id, n, nil
}

// Moved is a stash and the blob its content hashed to (HashStash), for
// MoveStashes.
type Moved struct {
	Stash string
	ID    ID
}

// MoveStashes makes each stash its blob by renaming it to kept/<id>: one
// rename where Name's link and Unstash's unlink were two calls. The caller
// has recorded each stash's blob durably first (the rename takes the
// stash's name away, and only that record says what it was). A stash
// whose blob the store holds already (kept, packed, or copied into a pack
// by Detach since it was hashed) is removed instead. A stash that is gone
// is no error (moved before: a recovery finishing a batch). The moves
// need no fsync of their own in batch mode (Sync makes kept/ durable; a
// move undone by a crash leaves the stash, which the caller's recovery
// moves again); with Options.Sync kept/ is fsynced once before
// MoveStashes returns. On an error the others are still moved, and the
// first error is returned.
func (s *Store) MoveStashes(moves []Moved) error {
	if s.opts.ReadOnly {
		return ErrReadOnly
	}
	s.kmu.Lock()
	dir := s.kept.dir
	s.kmu.Unlock()
	if dir == nil {
		return nil
	}
	var first error
	var gone []string
	moved := false
	if r := s.uring(); r != nil {
		// Through io_uring, up to ringEntries renames an io_uring_enter
		// (renameRing); what it leaves goes one by one below.
		s.ringMu.Lock()
		var rest []Moved
		for len(moves) > 0 {
			k := min(len(moves), ringEntries)
			g, m, again := s.renameRing(r, dir, moves[:k])
			gone = append(gone, g...)
			moved = moved || m
			rest = append(rest, again...)
			moves = moves[k:]
		}
		s.ringMu.Unlock()
		moves = rest
	}
	for _, m := range moves {
		if !record.IsStashName(m.Stash) {
			continue
		}
		ok, err := s.moveStash(dir, m)
		if err != nil {
			if first == nil {
				first = err
			}
			continue
		}
		if ok {
			moved = true
		} else {
			gone = append(gone, m.Stash)
		}
	}
	if len(gone) > 0 {
		if err := s.Unstash(gone); err != nil && first == nil {
			first = err
		}
	}
	if moved && s.opts.Sync {
		if err := syncDirFile(dir); err != nil && first == nil {
			first = fmt.Errorf("blobstore: move stashes: %w", err)
		}
	}
	return first
}

// moveStash renames m.Stash to its blob; ok is false when it is to be
// removed instead (the blob is stored already).
func (s *Store) moveStash(dir *os.File, m Moved) (ok bool, err error) {
	s.kmu.Lock()
	ki := s.kept.stash[m.Stash]
	s.kmu.Unlock()
	if ki != nil {
		ki.mu.Lock()
		defer ki.mu.Unlock()
		if ki.named {
			return false, nil // detached into a pack since it was hashed
		}
	}
	if _, inPack := s.lookup(m.ID); inPack {
		return false, nil
	}
	hook("kept:moving", filepath.Join(s.dir, keptDirName, m.Stash))
	err = unix.Renameat2(int(dir.Fd()), m.Stash, int(dir.Fd()), m.ID.String(), unix.RENAME_NOREPLACE)
	return s.movedStash(dir, m, ki, err)
}

// movedStash is the rest of moveStash once the rename of m.Stash (ki its
// keptInode, locked, or nil) returned err.
func (s *Store) movedStash(dir *os.File, m Moved, ki *keptInode, err error) (ok bool, _ error) {
	switch {
	case errors.Is(err, unix.EEXIST):
		return false, nil // kept already (another file of the same content)
	case errors.Is(err, unix.ENOENT):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("blobstore: move stash %s: %w", m.Stash, err)
	}
	s.kmu.Lock()
	delete(s.kept.stash, m.Stash)
	k := ki
	if k == nil {
		// A stash found at Open: its inode is registered as it would be
		// at the next Open.
		var st unix.Stat_t
		if err := unix.Fstatat(int(dir.Fd()), m.ID.String(), &st, unix.AT_SYMLINK_NOFOLLOW); err == nil {
			if k = s.kept.ino[st.Ino]; k == nil {
				k = &keptInode{ino: st.Ino, n: st.Size}
				s.kept.ino[st.Ino] = k
				s.mu.Lock()
				s.looseBytes += st.Size
				s.mu.Unlock()
			}
		}
	}
	if k != nil {
		// The stash's bytes, counted when it was stashed, are the blob's
		// now.
		k.id, k.linked = m.ID, true
		if k == ki {
			k.n, k.named, k.stash = ki.stashBytes, true, ""
		}
	}
	if !s.opts.Sync {
		s.kept.dirDirty = true
	}
	s.kmu.Unlock()
	return true, nil
}

// detachStashLocked names the unnamed stash ki (its mutex held) by copying
// its content into a pack, before its inode is written: the pack holds the
// before-state from then on, and Name returns its id.
func (s *Store) detachStashLocked(ki *keptInode) error {
	f, err := os.OpenFile(filepath.Join(s.dir, keptDirName, ki.stash), os.O_RDONLY|unix.O_NOFOLLOW, 0)
	if err != nil {
		return fmt.Errorf("blobstore: detach stash %s: %w", ki.stash, err)
	}
	defer f.Close()
	id, _, err := s.Put(f)
	if err != nil {
		return fmt.Errorf("blobstore: detach stash %s: %w", ki.stash, err)
	}
	ki.id, ki.named = id, true
	return nil
}

// Unstash removes the stash links names (their names recorded, or never
// named by anything the caller keeps). A name already gone is no error; one
// that cannot be removed (not a file: the store was tampered with) is left,
// the others removed, and the first such error returned.
// The removals need no fsync: a link that comes back after a crash is a
// stash the caller's recovery finds named, or naming nothing.
func (s *Store) Unstash(names []string) error {
	s.kmu.Lock()
	dir := s.kept.dir
	s.kmu.Unlock()
	if dir == nil {
		return nil
	}
	var first error
	for _, name := range names {
		if !record.IsStashName(name) {
			continue
		}
		if err := unix.Unlinkat(int(dir.Fd()), name, 0); err != nil && !errors.Is(err, unix.ENOENT) {
			if first == nil {
				first = fmt.Errorf("blobstore: unstash %s: %w", name, err)
			}
			continue
		}
		s.kmu.Lock()
		ki := s.kept.stash[name]
		delete(s.kept.stash, name)
		if ki != nil && !ki.linked {
			if s.kept.ino[ki.ino] == ki {
				delete(s.kept.ino, ki.ino)
			}
			s.mu.Lock()
			s.looseBytes -= ki.stashStored
			s.mu.Unlock()
		}
		s.kmu.Unlock()
	}
	return first
}

// Stashes lists the stash names in kept/ (for a recovery to name those its
// records name and Unstash the others). Other names are left out.
func (s *Store) Stashes() ([]string, error) {
	ents, err := os.ReadDir(filepath.Join(s.dir, keptDirName))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("blobstore: %w", err)
	}
	var out []string
	for _, e := range ents {
		if record.IsStashName(e.Name()) {
			out = append(out, e.Name())
		}
	}
	return out, nil
}

// HasStash reports whether the store holds the stash name as a regular
// file (a read-only check, for verify).
func (s *Store) HasStash(name string) bool {
	if !record.IsStashName(name) {
		return false
	}
	var st unix.Stat_t
	err := unix.Lstat(filepath.Join(s.dir, keptDirName, name), &st)
	return err == nil && st.Mode&unix.S_IFMT == unix.S_IFREG
}

// A workspace file about to be written that is large and mostly holes (a
// disk image, a sparse database) is stashed by a copy of its data, not
// hashed: its sha256 covers its whole logical length, holes hashed as
// zeros, seconds for 10 GiB, which a writer's open would wait for.
// StashCopy copies its data extents (SEEK_DATA/SEEK_HOLE,
// copy_file_range) into a new file of the store's, kept/p-<hex>, sets its
// length, and registers it as a stash: the caller records it by that name
// and names it later (Name), as it does an unlinked file's stash. The
// copy's inode is the store's alone: nothing writes it, so it is never
// detached.

// sparseStashFrom is the least size of a file StashCopy copies.
const sparseStashFrom = 64 << 20

// mostlyHoles reports whether st is a regular file of at least
// sparseStashFrom bytes of which at most a quarter is allocated.
func mostlyHoles(st *unix.Stat_t) bool {
	return st.Mode&unix.S_IFMT == unix.S_IFREG && st.Size >= sparseStashFrom && st.Blocks*512 <= st.Size/4
}

// stashCopied counts the bytes StashCopy copied (tests read it).
var stashCopied atomic.Int64

// StashCopy stashes a copy of f, an open regular workspace file about to
// be written, when f is large and mostly holes: only its data is read and
// copied, nothing is hashed, and the copy keeps f's holes. n is f's size.
// ok is false, and nothing is stored, for any other file (or a store with
// no kept directory, or a file larger than Options.MaxSize): the caller
// stores it with Put.
//
// With Options.Sync the copy's data and its entry in kept/ are durable
// when StashCopy returns; without it, Sync makes them so.
func (s *Store) StashCopy(f *os.File) (name string, n int64, ok bool, err error) {
	if s.opts.ReadOnly {
		return "", 0, false, ErrReadOnly
	}
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		return "", 0, false, fmt.Errorf("blobstore: stash copy: %w", err)
	}
	if !mostlyHoles(&st) || (s.opts.MaxSize > 0 && st.Size > s.opts.MaxSize) {
		return "", 0, false, nil
	}
	s.kmu.Lock()
	dir := s.kept.dir
	s.kmu.Unlock()
	if dir == nil {
		return "", 0, false, nil
	}
	name = newStashName()
	fd, err := unix.Openat(int(dir.Fd()), name, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return "", 0, false, fmt.Errorf("blobstore: stash copy: %w", err)
	}
	out := os.NewFile(uintptr(fd), filepath.Join(s.dir, keptDirName, name))
	defer out.Close()
	fail := func(err error) (string, int64, bool, error) {
		unix.Unlinkat(int(dir.Fd()), name, 0)
		return "", 0, false, fmt.Errorf("blobstore: stash copy of %s: %w", f.Name(), err)
	}
	size := st.Size
	exts, _ := dataExtents(f, size)
	var data int64
	for _, e := range exts {
		if err := copyRange(out, f, e.off, e.n); err != nil {
			return fail(err)
		}
		data += e.n
	}
	if err := out.Truncate(size); err != nil {
		return fail(err)
	}
	// What was copied is the file's content only if nothing follows.
	var b [1]byte
	if k, _ := f.ReadAt(b[:], size); k > 0 {
		return fail(errors.New("it grew while it was copied"))
	}
	stashCopied.Add(data)
	var ost unix.Stat_t
	if err := unix.Fstat(fd, &ost); err != nil {
		return fail(err)
	}
	if s.opts.Sync {
		if err := fdatasync(out); err != nil {
			return fail(err)
		}
		if err := syncDirFile(dir); err != nil {
			return fail(err)
		}
	} else if data >= DefaultChunkAbove {
		durable.StartWriteback(out)
	}
	hook("kept:copied", out.Name())
	// The store's size counts what the copy allocates, not its length:
	// a 10 GiB copy of a few blocks must not look like 10 GiB to
	// --max-store-size.
	stored := ost.Blocks * 512
	ki := &keptInode{ino: ost.Ino, stash: name, stashBytes: size, stashStored: stored}
	s.kmu.Lock()
	s.kept.stash[name] = ki
	if s.kept.ino[ost.Ino] == nil {
		s.kept.ino[ost.Ino] = ki
	}
	if !s.opts.Sync {
		s.kept.pending = append(s.kept.pending, name)
	}
	s.kmu.Unlock()
	s.mu.Lock()
	s.looseBytes += stored
	s.mu.Unlock()
	return name, size, true, nil
}

// copyRange copies [off, off+n) of src to the same place in dst, with
// copy_file_range where the kernel can, else by reading and writing.
func copyRange(dst, src *os.File, off, n int64) error {
	roff, woff := off, off
	end := off + n
	for roff < end {
		k, err := unix.CopyFileRange(int(src.Fd()), &roff, int(dst.Fd()), &woff, int(min(end-roff, 1<<30)), 0)
		if err != nil {
			if errors.Is(err, unix.EINTR) {
				continue
			}
			if errors.Is(err, unix.EXDEV) || errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOSYS) || errors.Is(err, unix.EOPNOTSUPP) {
				break // copied by hand from roff
			}
			return err
		}
		if k == 0 {
			return fmt.Errorf("read %d bytes of a %d-byte extent (the file shrank)", roff-off, n)
		}
	}
	if roff >= end {
		return nil
	}
	buf := make([]byte, min(end-roff, 1<<20))
	for roff < end {
		b := buf[:min(int64(len(buf)), end-roff)]
		k, err := src.ReadAt(b, roff)
		if k < len(b) && err != nil {
			if err == io.EOF {
				return fmt.Errorf("read %d bytes of a %d-byte extent (the file shrank)", roff+int64(k)-off, n)
			}
			return err
		}
		if _, err := dst.WriteAt(b, roff); err != nil {
			return err
		}
		roff += int64(len(b))
	}
	return nil
}
