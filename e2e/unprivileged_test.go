package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// nobody is the unprivileged user the test mounts as.
const nobody = 65534

// An ordinary user mounts through fusermount3 (Debian's fuse3), captures,
// rewinds and unmounts. Debian makes /dev/fuse 0666; some machines (these
// sandboxes among them) make it 0600, so the test opens it up for its
// duration and puts the mode back.
func TestUnprivilegedMount(t *testing.T) {
	needFUSE(t)
	if _, err := exec.LookPath("fusermount3"); err != nil {
		if os.Getenv("ZEROFS_REQUIRE_FUSE") == "1" {
			t.Fatal("fusermount3 not found (package fuse3); .ci/run installs it")
		}
		t.Skip("fusermount3 not found (package fuse3)")
	}
	fi, err := os.Stat("/dev/fuse")
	if err != nil {
		t.Fatal(err)
	}
	if mode := fi.Mode().Perm(); mode&0o006 != 0o006 {
		if err := os.Chmod("/dev/fuse", mode|0o006); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.Chmod("/dev/fuse", mode) })
	}
	// Everything the user needs: a workspace it owns, on a path it can
	// walk, and a copy of the binary it can run.
	dir, err := os.MkdirTemp("", "zerofs-user-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	ws, bin := filepath.Join(dir, "ws"), filepath.Join(dir, "zerofs")
	os.Chmod(dir, 0o755)
	os.Mkdir(ws, 0o755)
	os.WriteFile(filepath.Join(ws, "f"), []byte("one\n"), 0o644)
	b, err := os.ReadFile(binary)
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(bin, b, 0o755)
	for _, p := range []string{ws, filepath.Join(ws, "f")} {
		os.Chown(p, nobody, nobody)
	}
	// Without --allow-other only the mounting user may enter the mount
	// (not even root), so every step runs as the user.
	asUser := func(name string, args ...string) (string, error) {
		ctx, cancel := context.WithTimeout(context.Background(), cmdTimeout)
		defer cancel()
		cmd := exec.CommandContext(ctx, name, args...)
		cmd.Dir = ws
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody}}
		cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=" + dir}
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	must := func(name string, args ...string) string {
		t.Helper()
		out, err := asUser(name, args...)
		if err != nil {
			t.Fatalf("%s %s as uid %d: %v\n%s", name, strings.Join(args, " "), nobody, err, out)
		}
		return out
	}
	must(bin, "mount", ws)
	t.Cleanup(func() {
		if fuseMounted(ws) {
			asUser(bin, "umount", ws)
		}
		if fuseMounted(ws) {
			detach(t, ws)
		}
	})
	must(bin, "step", "edit")
	seq := strings.TrimSpace(must("cat", ".zero/head"))
	must("sh", "-c", "echo two > f")
	if got := must("cat", "@"+seq+"/f"); got != "one\n" {
		t.Fatalf("@%s/f = %q, want one", seq, got)
	}
	if out := must(bin, "undo"); !strings.Contains(out, "restored 1") {
		t.Fatalf("zerofs undo: %s", out)
	}
	if got := must("cat", "f"); got != "one\n" {
		t.Fatalf("after undo f = %q, want one", got)
	}
	must(bin, "umount", ws)
	if err := poll(10*time.Second, func() bool { return !fuseMounted(ws) }); err != nil {
		t.Fatalf("still mounted after umount: %v", err)
	}
}
