package blobstore

import (
	"errors"
	"fmt"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// Cloned blobs: on a filesystem with reflinks (XFS with reflink=1, btrfs),
// a large file about to be written is captured by FICLONE into an
// anonymous file in kept/ (O_TMPFILE), which is then hashed and linked as
// kept/<sha256>: no bytes are copied, and the clone shares the file's
// extents until the workspace writes them. The clone is private (no
// workspace name, no handle), so what was hashed is what stays. A cloned
// blob is a kept blob to every reader. The first clone the filesystem
// refuses turns cloning off (CloneMode).

// cloneState is the store's cloning (see Store.kmu).
type cloneState struct {
	// off says why cloning is off ("" while it is on or untried).
	off string
	// works: a clone succeeded, so the store's filesystem shares extents
	// (Prune then leaves large kept blobs unpacked).
	works bool
}

// CloneMode says whether Clone reflinks files (ok) or why not.
func (s *Store) CloneMode() (ok bool, why string) {
	s.kmu.Lock()
	defer s.kmu.Unlock()
	switch {
	case s.opts.ReadOnly:
		return false, "store open read-only"
	case s.kept.dir == nil:
		return false, "no kept directory"
	case s.clone.off != "":
		return false, s.clone.off
	}
	return true, ""
}

// Clone stores the content of f, an open regular workspace file about to
// be written, as a reflink of it (FICLONE) when f is larger than
// Options.ChunkAbove and the store's filesystem can: it returns the blob's
// ID and size, with ok false (nothing stored; the caller copies with Put)
// when it cannot. With Options.Sync the clone and its entry are durable
// when Clone returns; without it, Sync makes them so.
func (s *Store) Clone(f *os.File) (id ID, n int64, ok bool, err error) {
	if s.opts.ReadOnly {
		return ID{}, 0, false, ErrReadOnly
	}
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		return ID{}, 0, false, fmt.Errorf("blobstore: clone: %w", err)
	}
	s.kmu.Lock()
	dir, off, dev := s.kept.dir, s.clone.off, s.kept.dev
	s.kmu.Unlock()
	limit := s.opts.ChunkAbove
	if dir == nil || off != "" || st.Mode&unix.S_IFMT != unix.S_IFREG || st.Dev != dev || limit < 0 || st.Size <= limit {
		return ID{}, 0, false, nil
	}
	tfd, err := unix.Openat(int(dir.Fd()), ".", unix.O_TMPFILE|unix.O_RDWR|unix.O_CLOEXEC, 0o600)
	if err != nil {
		s.cloneOff("no O_TMPFILE in the store: " + err.Error())
		return ID{}, 0, false, nil
	}
	t := os.NewFile(uintptr(tfd), "clone")
	defer t.Close()
	if err := unix.IoctlFileClone(tfd, int(f.Fd())); err != nil {
		if errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.ENOTTY) || errors.Is(err, unix.EINVAL) || errors.Is(err, unix.EXDEV) || errors.Is(err, unix.ENOSYS) {
			s.cloneOff("no reflinks on the store's filesystem")
		}
		return ID{}, 0, false, nil
	}
	s.kmu.Lock()
	s.clone.works = true
	s.kmu.Unlock()
	if id, n, err = HashFile(t); err != nil {
		return ID{}, 0, false, fmt.Errorf("blobstore: clone: read: %w", err)
	}
	if s.opts.MaxSize > 0 && n > s.opts.MaxSize {
		return ID{}, 0, false, fmt.Errorf("blobstore: clone: %w (%d bytes)", ErrTooLarge, s.opts.MaxSize)
	}
	if _, inPack := s.lookup(id); inPack {
		if s.opts.Sync {
			if err := s.settle([]ID{id}); err != nil {
				return ID{}, 0, false, err
			}
		}
		return id, n, true, nil
	}
	err = unix.Linkat(unix.AT_FDCWD, "/proc/self/fd/"+strconv.Itoa(tfd), int(dir.Fd()), id.String(), unix.AT_SYMLINK_FOLLOW)
	switch {
	case errors.Is(err, unix.EEXIST):
		// Stored already; its entry is made durable below like a new one.
	case err != nil:
		return ID{}, 0, false, fmt.Errorf("blobstore: clone: link: %w", err)
	default:
		hook("kept:linked", s.keptPath(id))
		s.kmu.Lock()
		var tst unix.Stat_t
		if unix.Fstat(tfd, &tst) == nil {
			s.kept.ino[tst.Ino] = &keptInode{ino: tst.Ino, id: id, n: n, linked: true}
		}
		s.kmu.Unlock()
		s.mu.Lock()
		s.looseBytes += n
		s.mu.Unlock()
	}
	if s.opts.Sync {
		if err := fdatasync(t); err != nil {
			return ID{}, 0, false, fmt.Errorf("blobstore: clone: %w", err)
		}
		if err := syncDirFile(dir); err != nil {
			return ID{}, 0, false, fmt.Errorf("blobstore: clone: %w", err)
		}
	} else {
		s.kmu.Lock()
		s.kept.pending = append(s.kept.pending, id.String())
		s.kmu.Unlock()
	}
	return id, n, true, nil
}

// cloneOff turns cloning off, saying why.
func (s *Store) cloneOff(why string) {
	s.kmu.Lock()
	if s.clone.off == "" {
		s.clone.off = why
	}
	s.kmu.Unlock()
}

// probeClone finds out, once at Open, whether the store's filesystem
// clones (a reflink of one block between two anonymous files in kept/),
// so that CloneMode is right from the start and Prune knows whether kept
// blobs may share extents.
func (s *Store) probeClone() {
	d := s.kept.dir
	if d == nil {
		return
	}
	open := func() (*os.File, error) {
		fd, err := unix.Openat(int(d.Fd()), ".", unix.O_TMPFILE|unix.O_RDWR|unix.O_CLOEXEC, 0o600)
		if err != nil {
			return nil, err
		}
		return os.NewFile(uintptr(fd), "probe"), nil
	}
	a, err := open()
	if err != nil {
		s.clone.off = "no O_TMPFILE in the store: " + err.Error()
		return
	}
	defer a.Close()
	b, err := open()
	if err != nil {
		s.clone.off = "no O_TMPFILE in the store: " + err.Error()
		return
	}
	defer b.Close()
	if _, err := a.Write(make([]byte, 4096)); err != nil {
		s.clone.off = "cannot write in the store: " + err.Error()
		return
	}
	if err := unix.IoctlFileClone(int(b.Fd()), int(a.Fd())); err != nil {
		s.clone.off = "no reflinks on the store's filesystem"
		return
	}
	s.clone.works = true
}
