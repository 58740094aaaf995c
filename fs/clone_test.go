package fs

import (
	"bytes"
	"crypto/rand"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// xfsT mounts a fresh XFS filesystem with reflinks (a loop device over an
// image under t.TempDir) and returns its mountpoint; cleanup unmounts it
// and detaches the loop device, also on failure. It skips, saying why,
// without root, mkfs.xfs or a loop device, unless ZEROFS_REQUIRE_FUSE=1
// (CI, which installs xfsprogs) makes that a failure. (rewind's tests have
// the same helper.)
func xfsT(t *testing.T) string {
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

// TestCloneThroughMount: on XFS with reflinks, a large file opened with
// O_TRUNC through the mount and one truncated by path are captured as
// clones in the store (kept/<sha256>, inodes of their own), and @T gives
// their old content back byte for byte.
func TestCloneThroughMount(t *testing.T) {
	requireFUSE(t)
	x := xfsT(t)
	ws := filepath.Join(x, "ws")
	if err := os.Mkdir(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	m := mountT(t, Options{Workspace: ws})
	mp := m.Mountpoint()
	old := map[string][]byte{"opened": make([]byte, 5<<20), "truncated": make([]byte, 3<<20)}
	for n, b := range old {
		rand.Read(b)
		if err := os.WriteFile(filepath.Join(mp, n), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	stepT(t, mp, "edit")
	// The step's own sequence, not the head: the boundary may have
	// captured the files whose writes' RELEASE was still in flight, in
	// checkpoints after the step began.
	T := stepSeqOf(t, mp)
	writeFile(t, filepath.Join(mp, "opened"), "rewritten\n") // O_TRUNC
	if err := os.Truncate(filepath.Join(mp, "truncated"), 10); err != nil {
		t.Fatal(err)
	}
	if err := m.Engine().Sync(); err != nil {
		t.Fatal(err)
	}
	var st struct {
		Captures string `json:"captures"`
	}
	readJSON(t, ctlRead(t, mp, "status"), &st)
	if !strings.Contains(st.Captures, "clone large files about to be written") {
		t.Errorf(".zero/status captures %q, want clones named", st.Captures)
	}
	for n, b := range old {
		p := filepath.Join(ws, ".zero", "blobs", "kept", sumHex(string(b)))
		if got := inoOf(t, p); got == inoOf(t, filepath.Join(ws, n)) {
			t.Errorf("kept %s is the workspace file's own inode, want a clone", n)
		}
		got, err := os.ReadFile(filepath.Join(view(mp, T), n))
		if err != nil || !bytes.Equal(got, b) {
			t.Errorf("@%d/%s: %d bytes (%v), want its %d bytes before the write", T, n, len(got), err, len(b))
		}
	}
}
