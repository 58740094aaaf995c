package blobstore

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/zerofs/zerofs/internal/durable"
)

// Kept blobs: a workspace file about to lose its last name (unlink, or the
// victim of a rename) need not be copied. Its inode is hard-linked into
// DIR/kept/<sha256>, one flat directory, so that a batch of them costs one
// directory fsync, and the link is the blob. Nothing can change that inode
// through the mount afterwards: its workspace name is about to go, it had
// no other, and the caller checked that no handle holds it open for
// writing. A kept blob is otherwise a loose blob: read and verified by its
// sha256 like any other, listed, counted and pruned.
//
// The races with an open for writing are closed by an order both sides
// keep: Keep registers the inode as being kept, then asks whether a writer
// holds it; an open for writing registers its writer, then calls Detach,
// which copies a kept inode's content into a pack before the handle is
// handed out. Each side sees the other (the registrations are under
// mutexes), so a writer never writes to a kept blob's inode.

// keptDirName is the directory of kept blobs, under the store's directory.
const keptDirName = "kept"

// packDirName and tmpDirName are the store's directories of packs and of
// temporary files.
const (
	packDirName = "packs"
	tmpDirName  = "tmp"
)

// keptInode is one inode kept (or being kept).
type keptInode struct {
	mu  sync.Mutex // held while the inode is being kept or detached; guards the rest
	ino uint64
	id  ID
	n   int64
	// linked: the link kept/<id> names this inode.
	linked bool
	// detached: its content was copied into a pack (Detach); the link
	// goes once that pack is durable.
	detached bool
	// stash is the inode's name in kept/ while it is a stash (stash.go):
	// "" when it is none. named says id is its content's hash; stashBytes
	// is its size as Stash counted it; stashStored is what the stash
	// adds to the store's size (its length, or a sparse copy's allocated
	// bytes), taken off again by Unstash.
	stash       string
	named       bool
	stashBytes  int64
	stashStored int64
	// stashStat is the stash's lstat as this process linked it (nil when
	// unknown: a stash found at Open): Name trusts it rather than
	// reading it again, since nothing writes a stash before it is named.
	stashStat *unix.Stat_t
}

// keptState is the store's kept blobs (see Store.kmu).
type keptState struct {
	dir *os.File // DIR/kept, opened by a writer's Open (nil: no keeping)
	dev uint64   // the device of DIR/kept
	// mnt is the mount id of DIR/kept (statx's STATX_MNT_ID; 0 when the
	// kernel does not say): a file on another mount cannot be renamed
	// into it (PrepareMove).
	mnt uint64
	// off says why keeping is off ("" when it is on).
	off string
	// ino: kept inodes and inodes being kept, by inode number.
	ino map[uint64]*keptInode
	// pending: the names in kept/ linked since the last Sync (blob ids
	// and stashes); their data and entries are not yet known durable
	// (batch mode).
	pending []string
	// stash: the stashes this Store made or named, by name (stash.go).
	stash map[string]*keptInode
	// dirDirty: entries were added to kept/ whose inodes' data is
	// durable already (a stash named): one fsync of kept/ makes them so.
	dirDirty bool
	// detached: copied into a pack; their links go after the next Sync.
	detached []*keptInode
}

// openKept opens DIR/kept for a writer, creating it, and indexes the
// kept inodes it holds.
func (s *Store) openKept() error {
	s.kept.ino = map[uint64]*keptInode{}
	s.kept.stash = map[string]*keptInode{}
	dir := filepath.Join(s.dir, keptDirName)
	if !s.opts.ReadOnly {
		if err := os.Mkdir(dir, 0o700); err == nil {
			if err := durable.SyncDir(s.dir); err != nil {
				return fmt.Errorf("blobstore: %w", err)
			}
		} else if !errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("blobstore: %w", err)
		}
		d, err := os.Open(dir)
		if err != nil {
			return fmt.Errorf("blobstore: %w", err)
		}
		var st unix.Stat_t
		if err := unix.Fstat(int(d.Fd()), &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFDIR {
			d.Close()
			return fmt.Errorf("blobstore: %s is not a directory", dir)
		}
		s.kept.dir, s.kept.dev = d, st.Dev
		var sx unix.Statx_t
		if unix.Statx(int(d.Fd()), "", unix.AT_EMPTY_PATH, unix.STATX_MNT_ID, &sx) == nil && sx.Mask&unix.STATX_MNT_ID != 0 {
			s.kept.mnt = sx.Mnt_id
		}
		s.probeClone()
	}
	ents, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("blobstore: %w", err)
	}
	for _, e := range ents {
		id, err := ParseID(e.Name())
		if err != nil || !e.Type().IsRegular() {
			continue
		}
		var st unix.Stat_t
		if unix.Lstat(filepath.Join(dir, e.Name()), &st) != nil {
			continue
		}
		s.kept.ino[st.Ino] = &keptInode{ino: st.Ino, id: id, n: st.Size, linked: true}
	}
	return nil
}

// keptPath is where kept blob id lives.
func (s *Store) keptPath(id ID) string {
	return filepath.Join(s.dir, keptDirName, id.String())
}

// KeepOff tells the store not to keep or clone files (Keep and Clone
// return false), and why: the workspace is on another filesystem.
// KeepMode and CloneMode report it.
func (s *Store) KeepOff(why string) {
	s.kmu.Lock()
	if s.kept.off == "" {
		s.kept.off = why
	}
	if s.clone.off == "" {
		s.clone.off = why
	}
	s.kmu.Unlock()
}

// KeepMode says whether Keep links files (ok) or why not.
func (s *Store) KeepMode() (ok bool, why string) {
	s.kmu.Lock()
	defer s.kmu.Unlock()
	switch {
	case s.opts.ReadOnly:
		return false, "store open read-only"
	case s.kept.off != "":
		return false, s.kept.off
	}
	return true, ""
}

// claimInode registers f's inode as being kept, locked (the caller unlocks
// ki.mu; forget unregisters it): ki is nil, and nothing is registered, when
// f cannot be kept: not a regular file with one link on the store's
// filesystem, kept already, kept off, larger than Options.MaxSize where
// bySize says so (its size is not read otherwise), or open for writing
// (writing is asked once the inode is registered: see the order above).
func (s *Store) claimInode(fd int, bySize bool, writing func(dev, ino uint64) bool) (st unix.Stat_t, ki *keptInode, forget func(), err error) {
	if err := unix.Fstat(fd, &st); err != nil {
		return st, nil, nil, err
	}
	ki, forget = s.claimStat(&st, 1, bySize, writing)
	return st, ki, forget, nil
}

// claimStat is claimInode of the inode st describes, which must have
// exactly links links (1 for a workspace file's last name; 2 once the
// store has linked it already, StashAt).
func (s *Store) claimStat(st *unix.Stat_t, links uint64, bySize bool, writing func(dev, ino uint64) bool) (ki *keptInode, forget func()) {
	s.kmu.Lock()
	if s.kept.dir == nil || s.kept.off != "" || st.Mode&unix.S_IFMT != unix.S_IFREG || uint64(st.Nlink) != links || st.Dev != s.kept.dev || s.kept.ino[st.Ino] != nil ||
		(bySize && s.opts.MaxSize > 0 && st.Size > s.opts.MaxSize) {
		s.kmu.Unlock()
		return nil, nil
	}
	ino := st.Ino
	ki = &keptInode{ino: ino}
	ki.mu.Lock()
	s.kept.ino[ino] = ki
	s.kmu.Unlock()
	forget = func() {
		s.kmu.Lock()
		delete(s.kept.ino, ino)
		s.kmu.Unlock()
	}
	if writing != nil && writing(st.Dev, ino) {
		forget()
		ki.mu.Unlock()
		return nil, nil
	}
	return ki, forget
}

// Keep stores the content of f, an open regular workspace file about to
// lose its last name, by hard-linking its inode into the store as the blob
// of its sha256 (which it reads f to compute). writing reports whether a
// handle holds the file (device and inode number, as Keep's fstat of f
// found them) open for writing; it is asked after the inode is registered
// as being kept (see the order above). ok is false, and nothing
// is stored, when the file cannot be kept: it has another link, is open
// for writing, is on another filesystem than the store (the first EXDEV
// turns keeping off: KeepMode), or the link is refused; the caller copies
// it with Put instead.
//
// With Options.Sync the file's data and its entry in kept/ are durable
// when Keep returns; without it, Sync makes them so.
func (s *Store) Keep(f *os.File, writing func(dev, ino uint64) bool) (id ID, n int64, ok bool, err error) {
	if s.opts.ReadOnly {
		return ID{}, 0, false, ErrReadOnly
	}
	_, ki, forget, err := s.claimInode(int(f.Fd()), false, writing)
	if err != nil {
		return ID{}, 0, false, fmt.Errorf("blobstore: keep: %w", err)
	}
	if ki == nil {
		return ID{}, 0, false, nil
	}
	defer ki.mu.Unlock()
	// HashFile reads only the data (a sparse file's holes are hashed as
	// zeros from memory).
	id, n, err = HashFile(f)
	if err != nil {
		forget()
		return ID{}, 0, false, fmt.Errorf("blobstore: keep: read: %w", err)
	}
	if s.opts.MaxSize > 0 && n > s.opts.MaxSize {
		forget()
		return ID{}, 0, false, fmt.Errorf("blobstore: keep: %w (%d bytes)", ErrTooLarge, s.opts.MaxSize)
	}
	if _, inPack := s.lookup(id); inPack {
		// Already stored: nothing to link.
		forget()
		if s.opts.Sync {
			if err := s.settle([]ID{id}); err != nil {
				return ID{}, 0, false, err
			}
		}
		return id, n, true, nil
	}
	name := id.String()
	err = unix.Linkat(unix.AT_FDCWD, "/proc/self/fd/"+strconv.Itoa(int(f.Fd())), int(s.kept.dir.Fd()), name, unix.AT_SYMLINK_FOLLOW)
	switch {
	case errors.Is(err, unix.EEXIST):
		// The same content is kept already (another file, or an earlier
		// crash's link that no checkpoint named yet): that is the blob.
		forget()
		if s.opts.Sync {
			if err := syncDirFile(s.kept.dir); err != nil {
				return ID{}, 0, false, fmt.Errorf("blobstore: keep: %w", err)
			}
		} else {
			s.kmu.Lock()
			s.kept.pending = append(s.kept.pending, id.String())
			s.kmu.Unlock()
		}
		return id, n, true, nil
	case errors.Is(err, unix.EXDEV):
		forget()
		s.KeepOff("store on another filesystem")
		return ID{}, 0, false, nil
	case err != nil:
		// EPERM (protected_hardlinks), EMLINK, ...: copy instead.
		forget()
		return ID{}, 0, false, nil
	}
	hook("kept:linked", s.keptPath(id))
	ki.id, ki.n, ki.linked = id, n, true
	s.mu.Lock()
	s.looseBytes += n
	s.mu.Unlock()
	if !s.opts.Sync {
		// Its data must reach the disk within the flusher's window. A
		// large file's writeback starts now, so the Sync that waits for
		// it has less left to do; small ones are left to that Sync (one
		// syncfs for an rm -rf's many), not written one by one on the
		// request path.
		if n >= DefaultChunkAbove {
			durable.StartWriteback(f)
		}
		s.kmu.Lock()
		s.kept.pending = append(s.kept.pending, id.String())
		s.kmu.Unlock()
	}
	if s.opts.Sync {
		if err := fdatasync(f); err != nil {
			return ID{}, 0, false, fmt.Errorf("blobstore: keep: %w", err)
		}
		if err := syncDirFile(s.kept.dir); err != nil {
			return ID{}, 0, false, fmt.Errorf("blobstore: keep: %w", err)
		}
	}
	return id, n, true, nil
}

// Detach is called before the workspace file open at fd (any descriptor of
// it, O_PATH too) is written: if its inode is a kept blob (a hard link, or
// a rename or unlink that failed after the file was kept), the content is
// first copied into a pack (durable per Options.Sync), so the blob stops
// depending on the inode; its link in kept/ goes after the next Sync. It
// waits for a Keep of the same inode under way. A kept inode whose content
// no longer hashes to its name (changed behind the store's back) is
// ErrCorrupt.
//
// An inode that is a stash not yet named (an unlink that failed after
// Stash) is hashed first, then copied the same way: stash is its name,
// for the caller to record what it hashed to (Name returns it) before
// the write can change the stash's content.
func (s *Store) Detach(fd int) (stash string, err error) {
	if s.opts.ReadOnly {
		return "", nil
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return "", fmt.Errorf("blobstore: detach: %w", err)
	}
	s.kmu.Lock()
	ki := s.kept.ino[st.Ino]
	same := st.Dev == s.kept.dev
	s.kmu.Unlock()
	if ki == nil || !same {
		return "", nil
	}
	ki.mu.Lock()
	defer ki.mu.Unlock()
	if ki.stash != "" && !ki.named {
		return ki.stash, s.detachStashLocked(ki)
	}
	if !ki.linked || ki.detached {
		return "", nil
	}
	if _, ok := s.lookup(ki.id); !ok {
		f, err := os.Open(s.keptPath(ki.id))
		if err != nil {
			return "", fmt.Errorf("blobstore: detach %s: %w", ki.id.Short(), err)
		}
		id, _, err := s.Put(f)
		f.Close()
		if err != nil {
			return "", fmt.Errorf("blobstore: detach %s: %w", ki.id.Short(), err)
		}
		if id != ki.id {
			// Changed behind the store's back: the blob is damaged already
			// (verify reports it). Not detached again.
			ki.detached = true
			return "", fmt.Errorf("%w: kept %s (content hashes to %s)", ErrCorrupt, ki.id, id.Short())
		}
	} else if s.opts.Sync {
		if err := s.settle([]ID{ki.id}); err != nil {
			return "", err
		}
	}
	ki.detached = true
	s.kmu.Lock()
	s.kept.detached = append(s.kept.detached, ki)
	s.kmu.Unlock()
	return "", nil
}

// syncKept makes the kept blobs linked since the last call durable (their
// data and their entries in kept/), then removes the links of detached
// ones, whose packed copies the caller has just made durable.
func (s *Store) syncKept() error {
	s.kmu.Lock()
	pending, detached, dirDirty := s.kept.pending, s.kept.detached, s.kept.dirDirty
	s.kept.pending, s.kept.detached, s.kept.dirDirty = nil, nil, false
	dir := s.kept.dir
	s.kmu.Unlock()
	if dir == nil {
		return nil
	}
	if len(pending) > 0 {
		hook("kept:syncing", dir.Name())
	}
	restore := func() {
		s.kmu.Lock()
		s.kept.pending = append(pending, s.kept.pending...)
		s.kept.detached = append(detached, s.kept.detached...)
		s.kept.dirDirty = s.kept.dirDirty || dirDirty
		s.kmu.Unlock()
	}
	switch {
	case s.wholeFS(dir, pending):
		// Many files (an rm -rf of a tree written just before): one
		// syncfs of the store's filesystem, their data and entries in
		// one journal commit (syncmany.go).
		if err := syncFS(dir); err != nil {
			restore()
			return fmt.Errorf("blobstore: sync kept blobs: %w", err)
		}
	case len(pending) > 0:
		// Each file's own data, not the whole filesystem's (syncmany.go),
		// then their entries: through io_uring (syncring.go), or one
		// system call at a time.
		if handled, err := s.syncKeptRing(dir, pending); handled {
			if err != nil {
				restore()
				return err
			}
			break
		}
		if err := s.syncEachFile(dir, pending); err != nil {
			restore()
			return err
		}
		if err := syncDirFile(dir); err != nil {
			restore()
			return fmt.Errorf("blobstore: sync kept blobs: %w", err)
		}
	case dirDirty:
		if err := syncDirFile(dir); err != nil {
			restore()
			return fmt.Errorf("blobstore: sync kept blobs: %w", err)
		}
	}
	for _, ki := range detached {
		ki.mu.Lock()
		if ki.linked {
			if err := os.Remove(s.keptPath(ki.id)); err == nil || errors.Is(err, fs.ErrNotExist) {
				ki.linked = false
				s.mu.Lock()
				s.looseBytes -= ki.n
				s.mu.Unlock()
				s.kmu.Lock()
				if s.kept.ino[ki.ino] == ki {
					delete(s.kept.ino, ki.ino)
				}
				s.kmu.Unlock()
			}
		}
		ki.mu.Unlock()
	}
	return nil
}

// forgetKept drops the kept inodes whose links (naming ids) Prune removed.
func (s *Store) forgetKept(ids map[ID]bool) {
	if len(ids) == 0 {
		return
	}
	s.kmu.Lock()
	defer s.kmu.Unlock()
	for ino, ki := range s.kept.ino {
		if ids[ki.id] {
			delete(s.kept.ino, ino)
		}
	}
}

// Kept says how many links of the file open at fd are the store's own,
// which the workspace never sees: its link in kept/ as a kept blob (also
// detached, until the next Sync removes the link) and its stash's link
// (stash.go), until Unstash.
func (s *Store) Kept(fd int) int {
	var st unix.Stat_t
	if unix.Fstat(fd, &st) != nil {
		return 0
	}
	s.kmu.Lock()
	ki := s.kept.ino[st.Ino]
	same := st.Dev == s.kept.dev
	s.kmu.Unlock()
	if ki == nil || !same {
		return 0
	}
	ki.mu.Lock()
	defer ki.mu.Unlock()
	n := 0
	if ki.linked {
		n++
	}
	if ki.stash != "" {
		n++
	}
	return n
}
