package e2e

import (
	"bytes"
	"github.com/zerofs/zerofs/internal/testsupport"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// busyLoops starts n shell busy loops (a loaded machine) in a process
// group of their own and stops them when the test ends.
func busyLoops(t *testing.T, n int) {
	t.Helper()
	for range n {
		c := exec.Command("/bin/sh", "-c", "while :; do :; done")
		c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			syscall.Kill(-c.Process.Pid, syscall.SIGKILL)
			c.Wait()
		})
	}
}

// TestUmountAfterReplacedDeadMountUnderLoad: issue 14, defect 10. Mount,
// write, kill -9 the daemon, mount again (replacing the dead mount), and
// `zerofs umount`: at load ~4, in 6 of 12 rounds umount said "is not a
// zerofs mount" or "the daemon ... was gone; detached the dead mount"
// while the new daemon ran on with its mount detached. Each round must
// unmount the new mount and wait for its daemon.
func TestUmountAfterReplacedDeadMountUnderLoad(t *testing.T) {
	built.NeedFUSE(t)
	busyLoops(t, 4)
	ws := filepath.Join(t.TempDir(), "ws")
	os.Mkdir(ws, 0o755)
	last := 0
	t.Cleanup(func() { unmountT(t, ws, last) })
	for round := range 12 {
		if out, err := zerofs(t, "/", "mount", ws); err != nil {
			t.Fatalf("round %d: mount: %v\n%s", round, err, out)
		}
		first := testsupport.DaemonPID(t, ws)
		last = first
		os.WriteFile(filepath.Join(ws, "a.txt"), []byte("x\n"), 0o644)
		syscall.Kill(first, syscall.SIGKILL)
		if out, err := zerofs(t, "/", "mount", ws); err != nil {
			t.Fatalf("round %d: mount after kill -9: %v\n%s", round, err, out)
		}
		// The new daemon, found without asking the mount (umount must
		// be the first to look, as in the reproduction).
		second := daemonOf(ws, first)
		last = second
		out, err := zerofs(t, "/", "umount", ws)
		if err != nil || strings.Contains(out, "detached the dead mount") {
			t.Errorf("round %d: umount: %v\n%s", round, err, out)
		}
		if n := fuseMountCount(t, ws); n != 0 {
			t.Fatalf("round %d: %d FUSE mounts left at %s after umount", round, n, ws)
		}
		if second > 0 && processAlive(second) {
			t.Fatalf("round %d: umount returned while the new daemon %d runs", round, second)
		}
	}
}

// daemonOf is the pid of a running zerofs daemon serving ws other than
// not, from /proc (0 when none).
func daemonOf(ws string, not int) int {
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid := 0
		for _, c := range e.Name() {
			if c < '0' || c > '9' {
				pid = -1
				break
			}
			pid = pid*10 + int(c-'0')
		}
		if pid <= 0 || pid == not {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		args := bytes.Split(bytes.TrimRight(b, "\x00"), []byte{0})
		if len(args) > 2 && string(args[1]) == "mount" && string(args[len(args)-1]) == ws && processAlive(pid) {
			return pid
		}
	}
	return 0
}
