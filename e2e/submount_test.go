package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/moby/sys/mountinfo"
	"github.com/zerofs/zerofs/internal/testsupport"
	"golang.org/x/sys/unix"
)

// submountSource names the tmpfs these tests mount, so cleanup finds
// exactly theirs wherever a rename moved it.
const submountSource = "zerofs-test-submount"

// submounts lists the test's tmpfs mounts under dir, by mount point.
func submounts(dir string) []string {
	infos, _ := mountinfo.GetMounts(mountinfo.PrefixFilter(dir))
	var out []string
	for _, m := range infos {
		if m.Source == submountSource && m.FSType == "tmpfs" {
			out = append(out, m.Mountpoint)
		}
	}
	return out
}

// TestRewindKeepsFilesystemsMountedBeneath (issue 27, section 4): a rewind
// that changed a directory holding a mount point detached the filesystem
// mounted there: the kernel's d_invalidate, which the cache invalidation of
// a changed name triggers, drops every mount beneath the entry, and its
// content was gone from the workspace. A rewind that changes such a
// directory's mode keeps the mount (and shows the restored mode); one that
// would remove the directory (a rename taken back) is refused, naming the
// mount, as removing a mount point is natively (EBUSY), and changes nothing.
func TestRewindKeepsFilesystemsMountedBeneath(t *testing.T) {
	for _, tc := range []struct {
		name, change, moved string
	}{
		{"mode", "chmod 700 keep", ""},
		{"rename", "mv keep moved", "moved"},
		{"parent rename", "mkdir outer && mv keep outer/", "outer/keep"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ws := mountT(t)
			inner := filepath.Join(ws, "keep", "inner")
			if err := os.MkdirAll(inner, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := unix.Mount(submountSource, inner, "tmpfs", 0, "size=1m"); err != nil {
				t.Fatalf("mount tmpfs at %s: %v", inner, err)
			}
			// Before the zerofs mount's own cleanup (cleanups run last first).
			t.Cleanup(func() {
				for _, mp := range submounts(ws) {
					if err := unix.Unmount(mp, unix.MNT_DETACH); err != nil {
						t.Errorf("unmount the test's tmpfs at %s: %v", mp, err)
					}
				}
			})
			writeFile(t, filepath.Join(inner, "data"), "kept\n", 0o644)
			s := step(t, ws, tc.name)
			sh(t, ws, tc.change)
			h := head(t, ws)
			out, err := zerofs(t, ws, "rewind", itoa(s))
			at := inner
			if tc.moved != "" {
				at = filepath.Join(ws, tc.moved, "inner")
				if err == nil || !strings.Contains(out, "a filesystem is mounted on "+tc.moved+"/inner") || strings.Contains(out, "store") {
					t.Errorf("rewind over a directory holding a mount: %v, %q; want a refusal naming the mount", err, out)
				}
				if got := head(t, ws); got != h {
					t.Errorf("the refused rewind recorded something: head %d -> %d", h, got)
				}
			} else if err != nil {
				t.Fatalf("rewind: %v\n%s", err, out)
			}
			if got := submounts(ws); len(got) != 1 || got[0] != at {
				t.Fatalf("after the rewind the tmpfs is mounted at %v, want only at %s", got, at)
			}
			if b, err := os.ReadFile(filepath.Join(at, "data")); err != nil || string(b) != "kept\n" {
				t.Errorf("the tmpfs's data after the rewind: %q, %v", b, err)
			}
			if tc.moved == "" {
				if fi, err := os.Stat(filepath.Join(ws, "keep")); err != nil || fi.Mode().Perm() != 0o755 {
					t.Errorf("keep after the rewind: %v, %v; want mode 0755", fi, err)
				}
			}
		})
	}
}

// TestFailedRewindSaysWhatFailedAndLeavesNoStep (issue 27, section 4): a
// rewind that cannot change the workspace (a directory it must remove is a
// mount point on the backing side: EBUSY) said "the store failed ... zerofs
// verify checks the store"; it says what failed. And its checkpoint, left
// in the log when it rolled back, made the step open at the time (which had
// changed nothing) a step with changes: the next undo undid that empty
// step. The undo takes back the step that changed something, also after a
// remount, which reads the log afresh.
func TestFailedRewindSaysWhatFailedAndLeavesNoStep(t *testing.T) {
	built.NeedFUSE(t)
	dir := t.TempDir()
	ws, mnt := filepath.Join(dir, "ws"), filepath.Join(dir, "mnt")
	for _, d := range []string{ws, mnt} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	writeFile(t, filepath.Join(ws, "a"), "a\n", 0o644)
	mount := func() {
		t.Helper()
		out, err := zerofs(t, "/", "mount", ws, mnt)
		pid := 0
		t.Cleanup(func() { unmountT(t, mnt, pid) })
		if err != nil {
			t.Fatalf("zerofs mount: %v\n%s", err, out)
		}
		pid = testsupport.DaemonPID(t, mnt)
	}
	mount()
	s1 := step(t, mnt, "s1")
	sh(t, mnt, "echo b > a && mkdir sub")
	sub := filepath.Join(ws, "sub") // on the backing side
	if err := unix.Mount(submountSource, sub, "tmpfs", 0, "size=1m"); err != nil {
		t.Fatalf("mount tmpfs at %s: %v", sub, err)
	}
	t.Cleanup(func() { unix.Unmount(sub, unix.MNT_DETACH) })
	zerofsOK(t, mnt, "step", "s2") // changes nothing

	out, err := zerofs(t, mnt, "rewind", itoa(s1))
	if err == nil || !strings.Contains(out, "the workspace could not be changed") || !strings.Contains(out, "device or resource busy") ||
		!strings.Contains(out, `"sub"`) || strings.Contains(out, "store failed") {
		t.Errorf("rewind over a busy mount point: %v\n%s\nwant it to say the workspace could not be changed, and why", err, out)
	}
	if b, _ := os.ReadFile(filepath.Join(mnt, "a")); string(b) != "b\n" {
		t.Errorf("a after the failed rewind: %q, want it rolled back to \"b\\n\"", b)
	}
	want := `would undo step ` + itoa(s1) + ` "s1"`
	if out := zerofsOK(t, mnt, "undo", "--dry-run"); !strings.Contains(out, want) {
		t.Errorf("undo --dry-run after the failed rewind:\n%s\nwant %q", out, want)
	}
	if err := unix.Unmount(sub, 0); err != nil {
		t.Fatal(err)
	}
	zerofsOK(t, "/", "umount", mnt)
	mount()
	if out := zerofsOK(t, mnt, "undo", "--dry-run"); !strings.Contains(out, want) {
		t.Errorf("undo --dry-run after a remount:\n%s\nwant %q", out, want)
	}
	if out := zerofsOK(t, mnt, "undo"); !strings.Contains(out, `undid step `+itoa(s1)) {
		t.Errorf("undo: %s", out)
	}
	if b, _ := os.ReadFile(filepath.Join(mnt, "a")); string(b) != "a\n" || exists(filepath.Join(mnt, "sub")) {
		t.Errorf("after the undo: a = %q, sub exists %v", b, exists(filepath.Join(mnt, "sub")))
	}
}
