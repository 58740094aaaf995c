package blobstore

import (
	"errors"
	"fmt"
	"path/filepath"
	"strconv"

	"golang.org/x/sys/unix"
)

// StashAt is Stash of the file name in the directory open at dirfd, linked
// by its name rather than through a descriptor: an unlink's capture then
// costs a linkat and an lstat of the new link, where opening the file
// would cost an openat, an fstat and a close more (a third of an rm -rf's
// system calls). The link is made first and checked after: st is the
// stash's own lstat, so it describes exactly the inode the store now
// holds, whatever happened to name meanwhile. ok is false, and nothing is
// stored, when that is no regular file whose only other link is name, or
// Stash would refuse it (open for writing, larger than Options.MaxSize,
// another filesystem, keeping off); the caller then captures name as it
// would without StashAt. For a store without Options.Sync only, as
// StashFd.
//
// The inode is registered only after its link, unlike Stash's: a handle
// that opens it for writing in between is registered before its Detach
// looks (rewind's OpenForWrite), so either StashAt's writer check sees it
// and removes the stash, or Detach finds the inode registered and copies
// the stash before the write.
func (s *Store) StashAt(dirfd int, name string, writing func(dev, ino uint64) bool) (stash string, st unix.Stat_t, ok bool, err error) {
	if s.opts.ReadOnly {
		return "", st, false, ErrReadOnly
	}
	if s.opts.Sync {
		return "", st, false, errors.New("blobstore: StashAt on a store with Sync")
	}
	s.kmu.Lock()
	dir, off := s.kept.dir, s.kept.off
	s.kmu.Unlock()
	if dir == nil || off != "" {
		return "", st, false, nil
	}
	kfd := int(dir.Fd())
	stash = newStashName()
	err = unix.Linkat(dirfd, name, kfd, stash, 0)
	switch {
	case errors.Is(err, unix.EXDEV):
		s.KeepOff("store on another filesystem")
		return "", st, false, nil
	case err != nil:
		// Gone, a directory, or a link refused: the caller's own
		// capture says which.
		return "", st, false, nil
	}
	if err := unix.Fstatat(kfd, stash, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		unix.Unlinkat(kfd, stash, 0)
		return "", st, false, fmt.Errorf("blobstore: stash: %w", err)
	}
	ki, forget := s.claimStat(&st, 2, true, writing)
	if ki == nil {
		if err := unix.Unlinkat(kfd, stash, 0); err != nil {
			return "", st, false, fmt.Errorf("blobstore: stash: remove a refused link: %w", err)
		}
		return "", st, false, nil
	}
	_ = forget // registered until Unstash
	defer ki.mu.Unlock()
	hook("kept:stashed", filepath.Join(s.dir, keptDirName, stash))
	ki.stash, ki.stashBytes, ki.stashStored = stash, st.Size, st.Size
	stat := st
	ki.stashStat = &stat
	s.kmu.Lock()
	s.kept.stash[stash] = ki
	s.kept.pending = append(s.kept.pending, stash)
	s.kmu.Unlock()
	s.mu.Lock()
	s.looseBytes += st.Size
	s.mu.Unlock()
	if st.Size >= DefaultChunkAbove {
		// Its writeback started now, as Stash does (durable.StartWriteback).
		if fd, err := unix.Openat(kfd, stash, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0); err == nil {
			unix.SyncFileRange(fd, 0, 0, unix.SYNC_FILE_RANGE_WRITE)
			unix.Close(fd)
		}
	}
	return stash, st, true, nil
}

// StashPath is a path that reaches stash name in the store's kept
// directory through the directory's descriptor (for reading its xattrs).
func (s *Store) StashPath(name string) string {
	s.kmu.Lock()
	dir := s.kept.dir
	s.kmu.Unlock()
	if dir == nil {
		return filepath.Join(s.dir, keptDirName, name)
	}
	return "/proc/self/fd/" + strconv.Itoa(int(dir.Fd())) + "/" + name
}
