package blobstore

import (
	"errors"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// A stash by a move: an unlink's file is renamed into kept/ as its stash,
// one renameat where StashAt's linkat and the unlink were two. The stash
// cannot exist before the caller's record of it (the rename is the
// unlink), so the order is: PrepareMove looks at the file and registers
// its inode; the caller records the stash's name; Move.Do renames the
// file into the store. A crash between the record and the rename leaves a
// record naming a stash that is not there while the file is still in the
// workspace as recorded: the caller's naming then stores the file itself
// (rewind's nameBatch).

// moveRefused are the file attributes (statx) with which a rename would
// fail where an unlink might not, or fail like it: such a file is stashed
// as StashAt would.
const moveRefused = unix.STATX_ATTR_IMMUTABLE | unix.STATX_ATTR_APPEND | unix.STATX_ATTR_MOUNT_ROOT

// Move is a stash prepared by PrepareMove: its inode registered (locked
// against Detach until Do or Cancel), its name not yet in the store.
type Move struct {
	s      *Store
	ki     *keptInode
	forget func()
	kfd    int
	// Stash is the stash's name, for the caller's record.
	Stash string
	done  bool
}

// PrepareMove is StashAt's check without the link: name in the directory
// open at dirfd is a regular file with no other link, on the store's
// filesystem and mount, that a rename can move (not immutable, append-only
// or a mount point), not larger than Options.MaxSize, that no handle holds open
// for writing (asked after its inode is registered, as Keep does). st is
// its lstat, one statx. ok is false, and nothing is registered, when it is
// not (the caller captures name as it would without PrepareMove; a name
// that is gone is not ok either). On ok the caller records m.Stash, then
// calls m.Do to move the file (or m.Cancel when the record failed); until
// then an open for writing of the inode waits (Detach). For a store
// without Options.Sync only, as StashAt.
func (s *Store) PrepareMove(dirfd int, name string, writing func(dev, ino uint64) bool) (m *Move, st unix.Stat_t, ok bool, err error) {
	if s.opts.ReadOnly {
		return nil, st, false, ErrReadOnly
	}
	if s.opts.Sync {
		return nil, st, false, errors.New("blobstore: PrepareMove on a store with Sync")
	}
	s.kmu.Lock()
	dir, off, mnt := s.kept.dir, s.kept.off, s.kept.mnt
	s.kmu.Unlock()
	if dir == nil || off != "" {
		return nil, st, false, nil
	}
	var sx unix.Statx_t
	for {
		err = unix.Statx(dirfd, name, unix.AT_SYMLINK_NOFOLLOW|unix.AT_STATX_SYNC_AS_STAT, unix.STATX_BASIC_STATS|unix.STATX_MNT_ID, &sx)
		if err != unix.EINTR {
			break
		}
	}
	if err != nil || sx.Attributes&moveRefused != 0 {
		return nil, st, false, nil
	}
	if mnt != 0 && sx.Mask&unix.STATX_MNT_ID != 0 && sx.Mnt_id != mnt {
		// Another mount (of the same filesystem, a bind mount): a rename
		// or a link into the store fails with EXDEV; StashAt's link
		// finds that and turns keeping off.
		return nil, st, false, nil
	}
	st = statOf(&sx)
	ki, forget := s.claimStat(&st, 1, true, writing)
	if ki == nil {
		return nil, st, false, nil
	}
	stat := st
	ki.stashStat = &stat // moved, the inode is as it was: Name trusts it
	return &Move{s: s, ki: ki, forget: forget, kfd: int(dir.Fd()), Stash: newStashName()}, st, true, nil
}

// statOf is the lstat that statx sx describes (the fields the store and a
// record read).
func statOf(sx *unix.Statx_t) unix.Stat_t {
	return unix.Stat_t{
		Dev:     unix.Mkdev(sx.Dev_major, sx.Dev_minor),
		Ino:     sx.Ino,
		Nlink:   uint64(sx.Nlink),
		Mode:    uint32(sx.Mode),
		Uid:     sx.Uid,
		Gid:     sx.Gid,
		Rdev:    unix.Mkdev(sx.Rdev_major, sx.Rdev_minor),
		Size:    int64(sx.Size),
		Blksize: int64(sx.Blksize),
		Blocks:  int64(sx.Blocks),
		Atim:    unix.Timespec{Sec: sx.Atime.Sec, Nsec: int64(sx.Atime.Nsec)},
		Mtim:    unix.Timespec{Sec: sx.Mtime.Sec, Nsec: int64(sx.Mtime.Nsec)},
		Ctim:    unix.Timespec{Sec: sx.Ctime.Sec, Nsec: int64(sx.Ctime.Nsec)},
	}
}

// Do moves name, in the directory open at dirfd, into the store as the
// stash m.Stash: the file's unlink. Should the rename fail, Do stashes as
// StashAt does, a link and then the unlink, and returns the unlink's error
// (a unix.Errno, for the unlink's reply): the name then stays, sharing its
// inode with the stash, and the caller names the stash at once, before
// anything writes it. If the link fails too, stashed is false, err is the
// rename's error, and nothing changed: the name is still there and the
// stash is not. EXDEV (the store on another mount of the filesystem, on a
// kernel whose statx gives no mount id) also turns keeping off, as
// StashAt's does. Do or Cancel is called once.
func (m *Move) Do(dirfd int, name string) (stashed bool, err error) {
	if m.done {
		return false, errors.New("blobstore: a stash moved twice")
	}
	m.done = true
	s, ki := m.s, m.ki
	defer ki.mu.Unlock()
	err = unix.Renameat2(dirfd, name, m.kfd, m.Stash, unix.RENAME_NOREPLACE)
	if err != nil {
		// StashAt's way: a link, then the unlink.
		if lerr := unix.Linkat(dirfd, name, m.kfd, m.Stash, 0); lerr != nil {
			m.forget()
			if errors.Is(err, unix.EXDEV) || errors.Is(lerr, unix.EXDEV) {
				s.KeepOff("store on another filesystem")
			}
			return false, err
		}
		err = unix.Unlinkat(dirfd, name, 0)
	}
	hook("kept:stashed", filepath.Join(s.dir, keptDirName, m.Stash))
	if err != nil {
		// Linked, not moved: the stash's own lstat.
		var st unix.Stat_t
		if unix.Fstatat(m.kfd, m.Stash, &st, unix.AT_SYMLINK_NOFOLLOW) == nil {
			ki.stashStat = &st
		}
	}
	size := ki.stashStat.Size
	ki.stash, ki.stashBytes, ki.stashStored = m.Stash, size, size
	s.kmu.Lock()
	s.kept.stash[m.Stash] = ki
	s.kept.pending = append(s.kept.pending, m.Stash)
	s.kmu.Unlock()
	s.mu.Lock()
	s.looseBytes += size
	s.mu.Unlock()
	if size >= DefaultChunkAbove {
		// Its writeback started now, as Stash does (durable.StartWriteback).
		if fd, err := unix.Openat(m.kfd, m.Stash, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0); err == nil {
			unix.SyncFileRange(fd, 0, 0, unix.SYNC_FILE_RANGE_WRITE)
			unix.Close(fd)
		}
	}
	return true, err
}

// Cancel gives up a prepared move whose record was never written: the
// inode is no longer registered and nothing is in the store.
func (m *Move) Cancel() {
	if m.done {
		return
	}
	m.done = true
	m.forget()
	m.ki.mu.Unlock()
}
