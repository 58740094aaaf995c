package rewind

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"

	"github.com/zerofs/zerofs/record"
)

// storeTreeDepth bounds how deep checkStoreTree looks: the store's own
// directories are at most three levels down (blobs/kept, blobs/ab).
const storeTreeDepth = 4

// CheckStoreDir refuses the store directory open at fd (named name in
// errors) unless it is a directory of the user opening it that no one
// else may write: what a store holds decides what a rewind creates, and
// with what owner (checkStoreOwner). Callers check it before they write
// anything in the store, its daemon.log included.
func CheckStoreDir(fd int, name string) error {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return fmt.Errorf("rewind: store: %w", err)
	}
	return checkOwned(name, &st, unix.S_IFDIR, "directory")
}

// checkOwned refuses st (of p) unless it is of type want, belongs to the
// effective user and is writable by no one else.
func checkOwned(p string, st *unix.Stat_t, want uint32, kind string) error {
	euid := uint32(os.Geteuid())
	switch {
	case st.Mode&unix.S_IFMT != want:
		return fmt.Errorf("%w: %s is not a %s", ErrUntrustedStore, p, kind)
	case st.Uid != euid:
		return fmt.Errorf("%w: %s belongs to uid %d, not to uid %d who opens it (chown it to trust its history)", ErrUntrustedStore, p, st.Uid, euid)
	case st.Mode&0o022 != 0:
		return fmt.Errorf("%w: %s is writable by others (mode %04o)", ErrUntrustedStore, p, st.Mode&0o7777)
	}
	return nil
}

// checkStoreTree refuses a store in which anything is a symlink, or in
// which a directory belongs to another user or is writable by others.
// The store's files are reached by name beneath the store directory; a
// symlink there (blobs/packs pointing elsewhere) would send new packs,
// stashes or the log outside the store, and a directory another user owns
// lets them plant one at any time. Every directory is opened beneath its
// parent's descriptor, never following a symlink; with every directory
// the opening user's and closed to others, no one else can change what a
// name in the store leads to afterwards.
func checkStoreTree(dir string) error {
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("rewind: store: %w", err)
	}
	return walkStoreTree(fd, "", dir, 0)
}

// walkStoreTree checks the entries of directory fd (rel beneath the store
// named dir) and closes fd.
func walkStoreTree(fd int, rel, dir string, depth int) error {
	d := os.NewFile(uintptr(fd), filepath.Join(dir, rel))
	defer d.Close()
	ents, err := d.ReadDir(-1)
	if err != nil {
		return fmt.Errorf("rewind: store: %w", err)
	}
	for _, e := range ents {
		p := filepath.Join(rel, e.Name())
		switch {
		case e.Type()&fs.ModeSymlink != 0:
			return fmt.Errorf("%w: %s is a symlink (nothing in a store is reached through one)", ErrUntrustedStore, filepath.Join(dir, p))
		case !e.IsDir() || depth+1 >= storeTreeDepth:
			continue
		case filepath.Dir(rel) == record.BranchesName:
			// A branch's copy-up layer holds the branch's own tree (its
			// symlinks, its users' directories), and its store is checked
			// by the branch's daemon: neither is this store's.
			continue
		}
		cfd, err := unix.Openat(fd, e.Name(), unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if errors.Is(err, unix.ENOENT) {
			continue // removed meanwhile (a pack's temporary directory)
		}
		if err != nil {
			return fmt.Errorf("%w: %s: %v", ErrUntrustedStore, filepath.Join(dir, p), err)
		}
		var st unix.Stat_t
		if err := unix.Fstat(cfd, &st); err != nil {
			unix.Close(cfd)
			return fmt.Errorf("rewind: store: %w", err)
		}
		if err := checkOwned(filepath.Join(dir, p), &st, unix.S_IFDIR, "directory"); err != nil {
			unix.Close(cfd)
			return err
		}
		if err := walkStoreTree(cfd, p, dir, depth+1); err != nil {
			return err
		}
	}
	return nil
}
