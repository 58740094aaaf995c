package wsdir

import (
	"os"

	"golang.org/x/sys/unix"
)

// RemoveBeneath removes everything in directory fd, never following a
// symlink: what a failed fork or restore wrote beneath a descriptor it
// created goes with it, whatever another user swapped in by name.
func RemoveBeneath(fd int) {
	unix.Fchmod(fd, 0o700)
	dup, err := unix.Openat(fd, ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return
	}
	d := os.NewFile(uintptr(dup), ".")
	names, _ := d.Readdirnames(-1)
	d.Close()
	for _, n := range names {
		if unix.Unlinkat(fd, n, 0) == nil {
			continue
		}
		sub, err := unix.Openat(fd, n, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			continue
		}
		RemoveBeneath(sub)
		unix.Close(sub)
		unix.Unlinkat(fd, n, unix.AT_REMOVEDIR)
	}
}
