package rewind

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/zerofs/zerofs/record"
	"golang.org/x/sys/unix"
)

// ErrUntrustedStore: the store or its log belongs to another user, or
// others may write it; its records (owners, setuid bits) are not to be
// trusted by this user's rewinds.
var ErrUntrustedStore = errors.New("rewind: store is not the opening user's")

// Owners and times: every before-state records its uid, gid and mtime, and
// a rewind puts them back. A setuid or setgid bit only ever comes back
// together with the owner it belonged to: restoring an owner needs root, and
// a daemon that cannot (or a record that names no owner) strips the bit
// rather than hand its own identity to whoever runs the file. The order
// never lets a file be setuid with the wrong owner, even for an instant:
// a restored file is written 0600, then chowned, then chmodded, then timed,
// and only then renamed into place; an existing path is chowned before it
// is chmodded.

// canChown reports whether the daemon may give files to other users; tests
// set it to act as an unprivileged daemon would.
var canChown = func() bool { return os.Geteuid() == 0 }

// setMeta fills st's owner and mtime from a stat of the path.
func setMeta(st *record.FileState, from *unix.Stat_t) {
	uid, gid := from.Uid, from.Gid
	mtime := time.Unix(from.Mtim.Unix()).UTC()
	st.UID, st.GID, st.MTime = &uid, &gid, &mtime
}

// safeMode is the permission bits to give a restored path now owned by
// uid:gid: want's bits, less a setuid bit unless uid is the recorded owner
// and a setgid bit unless gid is the recorded group.
func safeMode(want record.FileState, uid, gid uint32) uint32 {
	m := want.Mode & 0o7777
	if want.UID == nil || *want.UID != uid {
		m &^= unix.S_ISUID
	}
	if want.GID == nil || *want.GID != gid {
		m &^= unix.S_ISGID
	}
	return m
}

// confined is want as a rewind may put it into the directory open at dirfd:
// without its setuid and setgid bits and its capability when the directory
// belongs to a user other than root and the file's recorded owner (issue
// 14: a file with several names restored under each of them would
// otherwise put a copy of a setuid-root program into another user's
// directory, beyond the reach of root's later fixes to the original). A
// directory that cannot be stat'ed counts as another user's.
func confined(want record.FileState, dirfd int) record.FileState {
	var st unix.Stat_t
	if unix.Fstat(dirfd, &st) == nil && (st.Uid == 0 || (want.UID != nil && *want.UID == st.Uid)) {
		return want
	}
	want.Mode &^= unix.S_ISUID | unix.S_ISGID
	if _, ok := want.Xattrs[record.XattrCapability]; ok {
		xs := maps.Clone(want.Xattrs)
		delete(xs, record.XattrCapability)
		want.Xattrs = xs
	}
	return want
}

// copyMode is the mode for a copy of want made by this process, which owns
// what it creates (a fork): want's bits, less a setuid or setgid bit the
// copy's owner did not have.
func copyMode(want record.FileState) uint32 {
	return safeMode(want, uint32(os.Geteuid()), uint32(os.Getegid()))
}

// shownState is the mode and owner of a path as a directory shows it (a
// view, for a fork made from one).
func shownState(fi os.FileInfo) record.FileState {
	st := record.FileState{Mode: uint32(fi.Mode().Perm()) | modeBits(fi.Mode())}
	if sys, ok := fi.Sys().(*syscall.Stat_t); ok {
		uid, gid := sys.Uid, sys.Gid
		st.UID, st.GID = &uid, &gid
	}
	return st
}

// ownerFor is the owner a restore of want leaves a path with that is now
// owned by uid:gid: the recorded one when the daemon may set it.
func ownerFor(want record.FileState, uid, gid uint32) (uint32, uint32) {
	if want.Owned() && canChown() {
		return *want.UID, *want.GID
	}
	return uid, gid
}

// metaDiffers reports whether the live state have differs from want in
// what a rewind restores besides content: permission bits (as safeMode
// would set them), the owner (where the daemon may set it) and the mtime.
func metaDiffers(have, want record.FileState) bool {
	if have.UID == nil || have.GID == nil {
		return have.Mode != want.Mode
	}
	uid, gid := ownerFor(want, *have.UID, *have.GID)
	if uid != *have.UID || gid != *have.GID {
		return true
	}
	if want.Kind != record.KindSymlink && have.Mode != safeMode(want, uid, gid) {
		return true
	}
	return want.MTime != nil && (have.MTime == nil || !have.MTime.Equal(*want.MTime))
}

// metaDiffers is metaDiffers, and whether the path's xattrs differ from
// those want records.
func (e *Engine) metaDiffers(have, want record.FileState) bool {
	if metaDiffers(have, want) {
		return true
	}
	if want.Xattrs == nil || want.Kind == record.KindSymlink {
		return false
	}
	differ := true // cannot tell: restore
	e.ws.withNode(want.Path, func(fd int) error {
		d, err := xattrsDiffer(fd, want)
		if err == nil {
			differ = d
		}
		return err
	})
	return differ
}

// cannot reports whether err means the daemon is not allowed to set an
// owner or a time here (not root, a root-squashing or id-mapped
// filesystem): the restore goes on without it.
func cannot(err error) bool {
	return errors.Is(err, unix.EPERM) || errors.Is(err, unix.EINVAL) || errors.Is(err, unix.EOPNOTSUPP)
}

// mtimeSpec is the utimensat argument that sets mtime and leaves atime.
func mtimeSpec(mtime time.Time) ([]unix.Timespec, error) {
	ts, err := unix.TimeToTimespec(mtime)
	if err != nil {
		return nil, err
	}
	return []unix.Timespec{{Nsec: unix.UTIME_OMIT}, ts}, nil
}

// finishFile gives a restored file, open at fd and still 0600 under its
// temporary name, its owner, then its mode, then its mtime.
func finishFile(fd int, want record.FileState) error {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return err
	}
	uid, gid := ownerFor(want, st.Uid, st.Gid)
	if uid != st.Uid || gid != st.Gid {
		if err := unix.Fchown(fd, int(uid), int(gid)); err != nil && !cannot(err) {
			return err
		}
		if err := unix.Fstat(fd, &st); err != nil {
			return err
		}
	}
	if err := unix.Fchmod(fd, safeMode(want, st.Uid, st.Gid)); err != nil {
		return err
	}
	if err := restoreXattrs(fd, want); err != nil {
		return err
	}
	if want.MTime != nil {
		ts, err := mtimeSpec(*want.MTime)
		if err != nil {
			return err
		}
		if err := unix.UtimesNanoAt(unix.AT_FDCWD, fmt.Sprintf("/proc/self/fd/%d", fd), ts, 0); err != nil && !cannot(err) {
			return err
		}
	}
	return nil
}

// finishSymlink gives a restored symlink, still under its temporary name
// tmp in dirfd, its owner and mtime (a symlink has no mode of its own).
func finishSymlink(dirfd int, tmp string, want record.FileState) error {
	var st unix.Stat_t
	if err := unix.Fstatat(dirfd, tmp, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return err
	}
	if uid, gid := ownerFor(want, st.Uid, st.Gid); uid != st.Uid || gid != st.Gid {
		if err := unix.Fchownat(dirfd, tmp, int(uid), int(gid), unix.AT_SYMLINK_NOFOLLOW); err != nil && !cannot(err) {
			return err
		}
	}
	if want.MTime != nil {
		ts, err := mtimeSpec(*want.MTime)
		if err != nil {
			return err
		}
		if err := unix.UtimesNanoAt(dirfd, tmp, ts, unix.AT_SYMLINK_NOFOLLOW); err != nil && !cannot(err) {
			return err
		}
	}
	return nil
}

// lchown sets p's owner, never following a symlink.
func (w *workspace) lchown(p string, uid, gid uint32) error {
	if p == "" {
		return unix.Fchown(int(w.root.Fd()), int(uid), int(gid))
	}
	return w.withParent(p, func(fd int, name string) error {
		return unix.Fchownat(fd, name, int(uid), int(gid), unix.AT_SYMLINK_NOFOLLOW)
	})
}

// utimens sets p's mtime (leaving its atime), never following a symlink.
func (w *workspace) utimens(p string, mtime time.Time) error {
	ts, err := mtimeSpec(mtime)
	if err != nil {
		return err
	}
	if p == "" {
		return unix.UtimesNanoAt(unix.AT_FDCWD, fmt.Sprintf("/proc/self/fd/%d", w.root.Fd()), ts, 0)
	}
	return w.withParent(p, func(fd int, name string) error {
		return unix.UtimesNanoAt(fd, name, ts, unix.AT_SYMLINK_NOFOLLOW)
	})
}

// restoreMeta gives the existing path want.Path the owner, then the mode,
// then the mtime want records.
func (e *Engine) restoreMeta(want record.FileState) error {
	p := want.Path
	if p != "" {
		if err := e.ws.withParent(p, func(dirfd int, _ string) error {
			want = confined(want, dirfd)
			return nil
		}); err != nil {
			return fmt.Errorf("rewind: %q: %w", p, err)
		}
	}
	st, err := e.ws.lstat(p)
	if err != nil {
		return fmt.Errorf("rewind: stat %q: %w", p, err)
	}
	uid, gid := ownerFor(want, st.Uid, st.Gid)
	if uid != st.Uid || gid != st.Gid {
		if err := e.ws.lchown(p, uid, gid); err != nil && !cannot(err) {
			return fmt.Errorf("rewind: chown %q: %w", p, err)
		}
		if st, err = e.ws.lstat(p); err != nil {
			return fmt.Errorf("rewind: stat %q: %w", p, err)
		}
	}
	if st.Mode&unix.S_IFMT != unix.S_IFLNK {
		if err := e.ws.chmod(p, safeMode(want, st.Uid, st.Gid)); err != nil {
			return fmt.Errorf("rewind: chmod %q: %w", p, err)
		}
		if err := e.ws.withNode(p, func(fd int) error { return restoreXattrs(fd, want) }); err != nil {
			return fmt.Errorf("rewind: xattrs of %q: %w", p, err)
		}
	}
	if want.MTime != nil {
		if err := e.ws.utimens(p, *want.MTime); err != nil && !cannot(err) {
			return fmt.Errorf("rewind: set mtime of %q: %w", p, err)
		}
	}
	return nil
}

// checkStoreOwner refuses a store that another user could have written: a
// rewind gives files the owners and setuid bits the log names, so a log
// forged by another user (a workspace's owner can replace the .zero in it
// while it is unmounted) would make a root daemon create setuid-root files
// of the forger's choosing. The store directory and its log must belong to
// the opening user and be writable by no one else, as sshd asks of
// authorized_keys. Blobs need no such check: each is verified against its
// name.
func checkStoreOwner(dir string) error {
	for _, p := range []string{dir, filepath.Join(dir, record.LogName), filepath.Join(dir, intentName)} {
		var st unix.Stat_t
		err := unix.Lstat(p, &st)
		if p != dir && errors.Is(err, unix.ENOENT) {
			continue
		}
		if p == dir && err == nil {
			// The store may be named by a /proc/self/fd link: stat what it
			// leads to.
			err = unix.Stat(p, &st)
		}
		if err != nil {
			return fmt.Errorf("rewind: store: %w", err)
		}
		want, kind := uint32(unix.S_IFREG), "regular file"
		if p == dir {
			want, kind = unix.S_IFDIR, "directory"
		}
		if err := checkOwned(p, &st, want, kind); err != nil {
			return err
		}
	}
	return nil
}
