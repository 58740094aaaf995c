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

	"github.com/zerofs/zerofs/internal/testsupport"
)

// nobody is the unprivileged user the test mounts as.
const nobody = 65534

// userMount mounts a workspace as nobody through fusermount3 (Debian's
// fuse3) and returns it and a function running a command in it as nobody.
// Debian makes /dev/fuse 0666; some machines (these sandboxes among them)
// make it 0600, so it is opened up for the test's duration and its mode put
// back. The workspace holds f ("one\n"), and bin is a copy of zerofs nobody
// can run.
func userMount(t *testing.T) (ws, bin string, asUser func(name string, args ...string) (string, error)) {
	t.Helper()
	built.NeedFUSE(t)
	if _, err := exec.LookPath("fusermount3"); err != nil {
		testsupport.Unavailable(t, "fusermount3 not found (package fuse3); .ci/run installs it")
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
	ws = filepath.Join(dir, "ws")
	os.Chmod(dir, 0o755)
	os.Mkdir(ws, 0o755)
	os.WriteFile(filepath.Join(ws, "f"), []byte("one\n"), 0o644)
	bin = built.CopyTo(t, dir)
	for _, p := range []string{ws, filepath.Join(ws, "f")} {
		os.Chown(p, nobody, nobody)
	}
	// Without --allow-other only the mounting user may enter the mount
	// (not even root), so every step runs as the user.
	asUser = func(name string, args ...string) (string, error) {
		ctx, cancel := context.WithTimeout(context.Background(), cmdTimeout)
		defer cancel()
		cmd := exec.CommandContext(ctx, name, args...)
		cmd.Dir = ws
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody}}
		cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=" + dir}
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	if out, err := asUser(bin, "mount", ws); err != nil {
		t.Fatalf("zerofs mount as uid %d: %v\n%s", nobody, err, out)
	}
	t.Cleanup(func() {
		if testsupport.FUSEMounted(ws) {
			asUser(bin, "umount", ws)
		}
		if testsupport.FUSEMounted(ws) {
			testsupport.Detach(t, ws)
		}
	})
	return ws, bin, asUser
}

// mustAs is asUser (userMount's) for a command that has to succeed: it
// returns the command's output, and fails the test otherwise.
func mustAs(t *testing.T, asUser func(name string, args ...string) (string, error)) func(name string, args ...string) string {
	return func(name string, args ...string) string {
		t.Helper()
		out, err := asUser(name, args...)
		if err != nil {
			t.Fatalf("%s %s as uid %d: %v\n%s", name, strings.Join(args, " "), nobody, err, out)
		}
		return out
	}
}

// An ordinary user mounts through fusermount3, captures, rewinds and
// unmounts.
func TestUnprivilegedMount(t *testing.T) {
	ws, bin, asUser := userMount(t)
	must := mustAs(t, asUser)
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
	if err := testsupport.Poll(10*time.Second, func() bool { return !testsupport.FUSEMounted(ws) }); err != nil {
		t.Fatalf("still mounted after umount: %v", err)
	}
}

// The control files are the mounting user's, also when that user is not
// root: nobody, who mounted, owns them (0600, head 0644), begins steps,
// reads the log and status, rewinds and collects garbage through them.
func TestControlFilesWorkForTheMountingUser(t *testing.T) {
	_, _, asUser := userMount(t)
	must := func(script string) string {
		t.Helper()
		out, err := asUser("sh", "-ec", script)
		if err != nil {
			t.Fatalf("as uid %d: %s: %v\n%s", nobody, script, err, out)
		}
		return out
	}
	// Only nobody may enter its mount (no --allow-other), so stat runs as
	// nobody.
	got := must("cd .zero && stat -c '%n %u:%g %a' step rewind gc log status head")
	want := "step 65534:65534 600\nrewind 65534:65534 600\ngc 65534:65534 600\n" +
		"log 65534:65534 600\nstatus 65534:65534 600\nhead 65534:65534 644\n"
	if got != want {
		t.Errorf("the control files' owners and modes:\n%s\nwant\n%s", got, want)
	}
	must("echo mine > .zero/step")
	seq, label, _ := strings.Cut(strings.TrimSpace(must("cat .zero/step")), " ")
	if label != "mine" {
		t.Fatalf(".zero/step = %q %q, want label mine", seq, label)
	}
	must("echo two > f")
	if log := must("cat .zero/log"); !strings.Contains(log, `"name":"mine"`) || !strings.Contains(log, `"path":"f"`) {
		t.Fatalf(".zero/log lacks the step or its capture:\n%s", log)
	}
	if st := must("cat .zero/status"); !strings.Contains(st, `"pid"`) {
		t.Fatalf(".zero/status = %q", st)
	}
	must("echo " + seq + " > .zero/rewind")
	if got := must("cat f"); got != "one\n" {
		t.Fatalf("after the rewind f = %q, want one", got)
	}
	if r := must("cat .zero/rewind"); !strings.Contains(r, `"restored":1`) {
		t.Fatalf(".zero/rewind = %q", r)
	}
	must("echo 0 > .zero/gc")
}
