package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/zerofs/zerofs/internal/testsupport"
)

// branchE2E makes dir a branch of the mounted workspace ws; cleanup takes
// off its zerofs (live or dead) and its overlay.
func branchE2E(t *testing.T, ws, dir string) {
	t.Helper()
	t.Cleanup(func() {
		if testsupport.FUSEMounted(dir) {
			if out, err := exec.Command(binary, "umount", dir).CombinedOutput(); err != nil {
				t.Logf("umount %s: %v %s", dir, err, out)
				testsupport.Detach(t, dir)
			}
		}
		for range 8 {
			if err := unix.Unmount(dir, 0); err == unix.EINVAL || err == unix.ENOENT {
				break
			} else if err != nil {
				unix.Unmount(dir, unix.MNT_DETACH)
			}
		}
	})
	zerofsOK(t, ws, "branch", dir)
}

// TestCrashDuringBranchMerge: SIGKILL the workspace's daemon while it
// merges a branch that changed 1,500 files, then mount the workspace
// again: every file is merged or none is (the merge's intent is finished
// or rolled back by the next mount, as for a fork).
func TestCrashDuringBranchMerge(t *testing.T) {
	built.NeedFUSE(t)
	dir := t.TempDir()
	ws, b := filepath.Join(dir, "ws"), filepath.Join(dir, "b")
	os.Mkdir(ws, 0o755)
	const n = 1500
	name := func(i int) string { return filepath.Join("d"+strconv.Itoa(i%30), "f"+strconv.Itoa(i)) }
	for i := range n {
		os.MkdirAll(filepath.Dir(filepath.Join(ws, name(i))), 0o755)
		writeFile(t, filepath.Join(ws, name(i)), "line 1\nline 2\n", 0o644)
	}
	m := mountForeground(t, ws)
	branchE2E(t, ws, b)
	for i := range n {
		if err := os.WriteFile(filepath.Join(b, name(i)), []byte("line 1\nline 2\nbranch "+strconv.Itoa(i)+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	killMidMerge(t, m, ws, b)
	m2 := mountForeground(t, ws)
	defer m2.crash(t, ws)
	merged, unmerged := countMerged(t, ws, n, name, "branch")
	if merged != 0 && unmerged != 0 {
		t.Fatalf("after a SIGKILL during a branch's merge and a remount: %d files merged, %d not", merged, unmerged)
	}
	t.Logf("after the remount: %d of %d files merged", merged, n)
	// The branch mounts again over the new mount, whole.
	zerofsOK(t, ws, "branch", b)
	if c, err := os.ReadFile(filepath.Join(b, name(7))); err != nil || string(c) != "line 1\nline 2\nbranch 7\n" {
		t.Errorf("the branch after the remount: %q %v", c, err)
	}
}

// TestCrashDuringBranchCopyUp: SIGKILL a branch's daemon while a write
// to a large file of its base is under way (its before-state being
// captured, or the kernel copying it up), at three moments, and mount the
// branch again each time: zerofs verify passes in the branch, and the
// file now and at every state of the branch's history is either the
// base's content or the base's with the write: never torn.
func TestCrashDuringBranchCopyUp(t *testing.T) {
	built.NeedFUSE(t)
	dir := t.TempDir()
	ws, b := filepath.Join(dir, "ws"), filepath.Join(dir, "b")
	os.Mkdir(ws, 0o755)
	big := make([]byte, 64<<20)
	for i := range big {
		big[i] = byte(i*7 + i>>13)
	}
	if err := os.WriteFile(filepath.Join(ws, "big"), big, 0o644); err != nil {
		t.Fatal(err)
	}
	m := mountForeground(t, ws)
	defer m.crash(t, ws)
	branchE2E(t, ws, b)
	for round, delay := range []time.Duration{20 * time.Millisecond, 300 * time.Millisecond, 1500 * time.Millisecond, 4 * time.Second} {
		var st struct {
			PID int `json:"pid"`
		}
		json.Unmarshal([]byte(zerofsOK(t, b, "status", "--json")), &st)
		zerofsOK(t, b, "step", fmt.Sprintf("write %d", round))
		w := exec.Command("/bin/sh", "-c", "echo tail >> big")
		w.Dir = b
		if err := w.Start(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(delay)
		syscall.Kill(st.PID, syscall.SIGKILL)
		w.Wait()
		testsupport.Poll(10*time.Second, func() bool { return syscall.Kill(st.PID, 0) != nil })
		zerofsOK(t, ws, "branch", b) // mounts it again
		if out, err := exec.Command(binary, "-C", b, "verify").CombinedOutput(); err != nil {
			t.Fatalf("round %d: verify in the branch: %v\n%s", round, err, out)
		}
		check := func(p string) {
			c, err := os.ReadFile(p)
			if err != nil {
				t.Fatalf("round %d: %v", round, err)
			}
			rest, ok := bytes.CutPrefix(c, big)
			if !ok || strings.ReplaceAll(string(rest), "tail\n", "") != "" || strings.Count(string(rest), "tail\n") > round+1 {
				t.Fatalf("round %d: %s is torn (%d bytes)", round, p, len(c))
			}
		}
		check(filepath.Join(b, "big"))
		head := int(head(t, b))
		for at := 0; at <= head; at++ {
			check(filepath.Join(b, "@"+strconv.Itoa(at), "big"))
		}
		fi, _ := os.Stat(filepath.Join(b, "big"))
		t.Logf("round %d (kill after %v): head %d in the branch, big has %d bytes past the base's", round, delay, head, fi.Size()-int64(len(big)))
	}
}
