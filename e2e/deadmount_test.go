package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/zerofs/zerofs/internal/testsupport"
)

// fuseMountCount counts the FUSE mounts stacked at dir.
func fuseMountCount(t *testing.T, dir string) int { return testsupport.FUSEMountCount(dir) }

// processAlive reports whether pid runs (a zombie does not).
func processAlive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	i := bytes.LastIndexByte(b, ')')
	return i < 0 || i+2 >= len(b) || (b[i+2] != 'Z' && b[i+2] != 'X')
}

// deadMount stacks a dead FUSE mount at dir, as a killed zerofs leaves
// one: a connection whose daemon side is closed, so every request fails
// with ENOTCONN.
func deadMount(t *testing.T, dir string) { deadMountOf(t, dir, "fuse.zerofs") }

// deadMountOf stacks a dead FUSE mount of filesystem type fstype at dir.
func deadMountOf(t *testing.T, dir, fstype string) {
	t.Helper()
	fd, err := unix.Open("/dev/fuse", unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	opts := fmt.Sprintf("fd=%d,rootmode=40000,user_id=0,group_id=0", fd)
	err = unix.Mount("dead", dir, fstype, unix.MS_NOSUID|unix.MS_NODEV, opts)
	unix.Close(fd)
	if err != nil {
		t.Fatalf("mount a dead FUSE mount at %s: %v", dir, err)
	}
	t.Cleanup(func() {
		for range 16 {
			if unix.Unmount(dir, unix.MNT_DETACH) != nil {
				return
			}
		}
	})
}

// After kill -9 of the daemon, an immediate `zerofs mount` failed with
// "transport endpoint is not connected" or stacked a new mount over the
// dead one. It replaces the dead mount: one mount, served by a new daemon,
// and `zerofs umount` then unmounts it and waits for that daemon.
func TestKilledDaemonMountReplacedAtOnce(t *testing.T) {
	built.NeedFUSE(t)
	for _, inPlace := range []bool{true, false} {
		name := "separate mountpoint"
		if inPlace {
			name = "in place"
		}
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			ws, mp := filepath.Join(dir, "ws"), filepath.Join(dir, "mnt")
			os.Mkdir(ws, 0o755)
			os.Mkdir(mp, 0o755)
			args := []string{"mount", ws, mp}
			if inPlace {
				mp, args = ws, []string{"mount", ws}
			}
			pids := []int{0}
			t.Cleanup(func() { unmountT(t, mp, pids[len(pids)-1]) })
			if out, err := zerofs(t, "/", args...); err != nil {
				t.Fatalf("zerofs mount: %v\n%s", err, out)
			}
			pids = append(pids, testsupport.DaemonPID(t, mp))
			os.WriteFile(filepath.Join(mp, "a.txt"), []byte("kept\n"), 0o644)

			if err := syscall.Kill(pids[1], syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			out, err := zerofs(t, "/", args...) // at once: no wait for the daemon to die
			if err != nil || strings.Contains(out, "not connected") {
				t.Fatalf("zerofs mount right after kill -9 of the daemon: %v\n%s", err, out)
			}
			if n := fuseMountCount(t, mp); n != 1 {
				t.Fatalf("%d FUSE mounts at %s after remounting, want 1 (a new mount stacked over the dead one?)", n, mp)
			}
			pids = append(pids, testsupport.DaemonPID(t, mp))
			if pids[2] == pids[1] {
				t.Fatalf("the new mount names the killed daemon %d", pids[1])
			}
			if b, err := os.ReadFile(filepath.Join(mp, "a.txt")); err != nil || string(b) != "kept\n" {
				t.Fatalf("a.txt through the new mount: %q, %v", b, err)
			}
			if out, err := zerofs(t, "/", "umount", mp); err != nil {
				t.Fatalf("zerofs umount: %v\n%s", err, out)
			}
			if n := fuseMountCount(t, mp); n != 0 {
				t.Fatalf("%d FUSE mounts left at %s after umount", n, mp)
			}
			if processAlive(pids[2]) {
				t.Fatalf("zerofs umount returned while its daemon %d still runs", pids[2])
			}
		})
	}
}

// With a dead mount stacked over the live one, `zerofs umount` detached the
// dead one, said it succeeded, and left the live mount and its daemon
// running. It unmounts what it names: the dead mount is detached, the live
// one under it unmounted, its daemon waited for; nothing is left.
func TestUmountUnmountsLiveMountUnderDeadOne(t *testing.T) {
	ws := mountT(t)
	pid := testsupport.DaemonPID(t, ws)
	os.WriteFile(filepath.Join(ws, "a.txt"), []byte("x\n"), 0o644)
	deadMount(t, ws)
	if n := fuseMountCount(t, ws); n != 2 {
		t.Fatalf("%d FUSE mounts at %s, want the live one and a dead one over it", n, ws)
	}
	out, err := zerofsCtx(t, 60*time.Second, "/", "umount", ws)
	if err != nil {
		t.Fatalf("zerofs umount: %v\n%s", err, out)
	}
	if n := fuseMountCount(t, ws); n != 0 {
		t.Fatalf("zerofs umount said %q but left %d FUSE mounts at %s", out, n, ws)
	}
	if processAlive(pid) {
		t.Fatalf("zerofs umount said %q but the live mount's daemon %d still runs", out, pid)
	}
	if b, err := os.ReadFile(filepath.Join(ws, "a.txt")); err != nil || string(b) != "x\n" {
		t.Fatalf("a.txt in the unmounted workspace: %q, %v", b, err)
	}
}

// The same for an ordinary user, whose mounts go through fusermount3: after
// kill -9 of nobody's daemon, nobody's next `zerofs mount` replaces the dead
// mount, and nobody's `zerofs umount` unmounts the new one.
func TestKilledUnprivilegedDaemonMountReplaced(t *testing.T) {
	ws, bin, asUser := userMount(t)
	out, err := asUser("cat", ".zero/status")
	if err != nil {
		t.Fatalf("cat .zero/status: %v\n%s", err, out)
	}
	var st struct {
		PID int `json:"pid"`
	}
	if err := json.Unmarshal([]byte(out), &st); err != nil || st.PID <= 0 {
		t.Fatalf(".zero/status = %q: %v", out, err)
	}
	if err := syscall.Kill(st.PID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if out, err := asUser(bin, "mount", ws); err != nil {
		t.Fatalf("zerofs mount as uid %d right after kill -9 of its daemon: %v\n%s", nobody, err, out)
	}
	if n := fuseMountCount(t, ws); n != 1 {
		t.Fatalf("%d FUSE mounts at %s after remounting, want 1", n, ws)
	}
	if out, err := asUser("cat", "f"); err != nil || out != "one\n" {
		t.Fatalf("f through the new mount: %q, %v", out, err)
	}
	if out, err := asUser(bin, "umount", ws); err != nil {
		t.Fatalf("zerofs umount as uid %d: %v\n%s", nobody, err, out)
	}
	if n := fuseMountCount(t, ws); n != 0 {
		t.Fatalf("%d FUSE mounts left at %s after umount", n, ws)
	}
}

// A dead mount of another filesystem is not zerofs's to take: umount says
// so and leaves it.
func TestUmountLeavesAnotherFilesystemsDeadMount(t *testing.T) {
	built.NeedFUSE(t)
	dir := t.TempDir()
	deadMountOf(t, dir, "fuse.sshfs")
	out, err := zerofs(t, "/", "umount", dir)
	if err == nil || !strings.Contains(out, "not a zerofs mount") {
		t.Fatalf("zerofs umount of a dead sshfs mount: %v\n%s; want exit 1, not a zerofs mount", err, out)
	}
	if n := fuseMountCount(t, dir); n != 1 {
		t.Fatalf("%d FUSE mounts at %s, want the sshfs one left alone", n, dir)
	}
}
