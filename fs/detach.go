package fs

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// Detach unmounts the FUSE mount at mp lazily: it disappears from the
// namespace at once and goes away when the last process using it lets go.
// Root does it with umount2(MNT_DETACH); an ordinary user may not, and goes
// through fusermount3 -u -z (setuid root), as for mounting.
func Detach(mp string) error {
	err := unix.Unmount(mp, unix.MNT_DETACH)
	if !errors.Is(err, unix.EPERM) {
		return err
	}
	for _, prog := range []string{"fusermount3", "fusermount"} {
		path, lerr := exec.LookPath(prog)
		if lerr != nil {
			continue
		}
		out, xerr := exec.Command(path, "-u", "-z", mp).CombinedOutput()
		if xerr != nil {
			return fmt.Errorf("%s -u -z %s: %v: %s", prog, mp, xerr, strings.TrimSpace(string(out)))
		}
		return nil
	}
	return err
}

// fuseCtl is where the fusectl filesystem is mounted: one directory per
// FUSE connection, named by the minor number of the mount's device.
const fuseCtl = "/sys/fs/fuse/connections"

// fuseCtlMagic is fusectl's statfs type (FUSE_CTL_SUPER_MAGIC).
const fuseCtlMagic = 0x65735543

// AbortConnection ends the FUSE connection whose mounts have device minor
// number minor (mountinfo's MAJOR:MINOR, or a stat's st_dev), through
// fusectl: every request waiting on it fails, a process stuck waiting for
// an answer (a killed daemon closing a file of its own mount) goes on, and
// the mount answers ENOTCONN from then on. fusectl is mounted at its usual
// place first when nothing did, and left there, as systemd mounts it: an
// unmount could pull it from under another zerofs aborting a connection.
func AbortConnection(minor uint32) error {
	p := fuseCtl + "/" + strconv.FormatUint(uint64(minor), 10) + "/abort"
	if _, err := os.Stat(p); errors.Is(err, os.ErrNotExist) {
		var st unix.Statfs_t
		if unix.Statfs(fuseCtl, &st) != nil || st.Type != fuseCtlMagic {
			if err := unix.Mount("fusectl", fuseCtl, "fusectl", 0, ""); err != nil && !errors.Is(err, unix.EBUSY) {
				return fmt.Errorf("mount fusectl at %s: %w", fuseCtl, err)
			}
		}
	}
	if err := os.WriteFile(p, []byte("1"), 0); err != nil {
		return fmt.Errorf("abort FUSE connection %d: %w", minor, err)
	}
	return nil
}
