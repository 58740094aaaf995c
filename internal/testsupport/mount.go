package testsupport

import (
	"strings"
	"testing"
	"time"

	"github.com/moby/sys/mountinfo"
	"golang.org/x/sys/unix"
)

// MountsAt lists the mounts at dir (an absolute, clean path), stacked ones
// in mount order, as this process's mount table says; nil if it cannot be
// read.
func MountsAt(dir string) []*mountinfo.Info {
	infos, _ := mountinfo.GetMounts(func(m *mountinfo.Info) (skip, stop bool) {
		return m.Mountpoint != dir, false
	})
	return infos
}

// FUSEMountCount counts the FUSE mounts stacked at dir.
func FUSEMountCount(dir string) int {
	n := 0
	for _, m := range MountsAt(dir) {
		if m.FSType == "fuse" || strings.HasPrefix(m.FSType, "fuse.") {
			n++
		}
	}
	return n
}

// FUSEMounted reports whether a FUSE filesystem is mounted at dir.
func FUSEMounted(dir string) bool { return FUSEMountCount(dir) > 0 }

// Detach lazily unmounts dir (umount -l) until no FUSE mount is left there,
// for up to 10 s, and fails t if one stays.
func Detach(t testing.TB, dir string) {
	t.Helper()
	err := Poll(10*time.Second, func() bool {
		if !FUSEMounted(dir) {
			return true
		}
		unix.Unmount(dir, unix.MNT_DETACH)
		return false
	})
	if err != nil {
		t.Errorf("umount -l %s: still mounted", dir)
	}
}

// Unmount runs unmount (an in-process mount's own Unmount) and makes sure
// nothing stays mounted at dir: if unmount fails, or has not returned after
// timeout (a hung request), or the mount is still listed 5 s after it
// returned, the failure goes to t and the mount is detached. It never
// leaves a mount behind, and never hangs the test on one.
func Unmount(t testing.TB, dir string, timeout time.Duration, unmount func() error) {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- unmount() }()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("unmount %s: %v", dir, err)
		}
	case <-time.After(timeout):
		t.Errorf("unmount %s: still running after %v; detaching", dir, timeout)
	}
	if Poll(5*time.Second, func() bool { return !FUSEMounted(dir) }) != nil {
		t.Errorf("%s still mounted; detaching lazily", dir)
		Detach(t, dir)
	}
}
