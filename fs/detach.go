package fs

import (
	"errors"
	"fmt"
	"os/exec"
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
