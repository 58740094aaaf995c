package testsupport

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// MountXFS mounts a fresh XFS filesystem with reflinks, for the captures
// that clone files (a loop device over an image under t.TempDir), and
// returns its mountpoint; cleanup unmounts it and detaches the loop device,
// also on failure. Without root, mkfs.xfs or a loop device it ends the test
// (see Unavailable; CI installs xfsprogs).
func MountXFS(t *testing.T) string {
	t.Helper()
	missing := func(why string) {
		t.Helper()
		Unavailable(t, "cannot make an XFS loop mount: "+why)
	}
	if os.Geteuid() != 0 {
		missing("not root")
	}
	for _, tool := range []string{"mkfs.xfs", "losetup", "mount", "umount"} {
		if _, err := exec.LookPath(tool); err != nil {
			missing(tool + " not found (Debian: xfsprogs, util-linux)")
		}
	}
	dir := t.TempDir()
	img, mnt := filepath.Join(dir, "xfs.img"), filepath.Join(dir, "mnt")
	if err := os.Mkdir(mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(img, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(img, 320<<20); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("mkfs.xfs", "-q", "-m", "reflink=1", img).CombinedOutput(); err != nil {
		t.Fatalf("mkfs.xfs: %v\n%s", err, out)
	}
	out, err := exec.Command("losetup", "-f", "--show", img).CombinedOutput()
	if err != nil {
		missing("losetup: " + strings.TrimSpace(string(out)))
	}
	dev := strings.TrimSpace(string(out))
	t.Cleanup(func() {
		if out, err := exec.Command("losetup", "-d", dev).CombinedOutput(); err != nil {
			t.Errorf("losetup -d %s: %v\n%s", dev, err, out)
		}
	})
	if out, err := exec.Command("mount", dev, mnt).CombinedOutput(); err != nil {
		t.Fatalf("mount %s: %v\n%s", dev, err, out)
	}
	t.Cleanup(func() {
		// Polled: the engine's files may close late.
		var err error
		if Poll(5*time.Second, func() bool { err = syscall.Unmount(mnt, 0); return err == nil }) != nil {
			syscall.Unmount(mnt, syscall.MNT_DETACH)
			t.Errorf("umount %s: %v (detached)", mnt, err)
		}
	})
	return mnt
}
