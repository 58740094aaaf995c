// Package xfstest gives tests an XFS filesystem with reflinks, for the
// captures that clone files (rewind, fs): a loop device over an image under
// the test's temporary directory, unmounted and detached at cleanup.
package xfstest

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Mount mounts a fresh XFS filesystem with reflinks (a loop device over an
// image under t.TempDir) and returns its mountpoint; cleanup unmounts it
// and detaches the loop device, also on failure. It skips, saying why,
// without root, mkfs.xfs or a loop device, unless ZEROFS_REQUIRE_FUSE=1
// (CI, which installs xfsprogs) makes that a failure.
func Mount(t *testing.T) string {
	t.Helper()
	missing := func(why string) {
		t.Helper()
		if os.Getenv("ZEROFS_REQUIRE_FUSE") == "1" {
			t.Fatalf("cannot make an XFS loop mount: %s (ZEROFS_REQUIRE_FUSE=1)", why)
		}
		t.Skipf("cannot make an XFS loop mount: %s", why)
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
		for i := 0; ; i++ {
			err := syscall.Unmount(mnt, 0)
			if err == nil {
				return
			}
			if i == 50 {
				syscall.Unmount(mnt, syscall.MNT_DETACH)
				t.Errorf("umount %s: %v (detached)", mnt, err)
				return
			}
			time.Sleep(100 * time.Millisecond) // polled: the engine's files may close late
		}
	})
	return mnt
}
