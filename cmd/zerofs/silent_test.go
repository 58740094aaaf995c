package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/zerofs/zerofs/internal/testsupport"
)

// The shell that runs `cd ws && zerofs mount .` still stands in the
// directory under the mount: mount, status and step say so, with the way
// into the mount.
func TestMountFromBackingDirWarns(t *testing.T) {
	built.NeedFUSE(t)
	ws := filepath.Join(t.TempDir(), "ws")
	writeFile(t, filepath.Join(ws, "a.txt"), "a\n")
	t.Cleanup(func() { unmountT(t, ws) })
	cmd := exec.Command("/bin/sh", "-c", `
		cd "$WS"
		"$ZEROFS" mount . 2>mount.err || { cat mount.err; exit 1; }
		"$ZEROFS" status >/dev/null 2>status.err
		"$ZEROFS" step edit 2>step.err
		cd "$PWD"
		"$ZEROFS" status >/dev/null 2>inside.err
		echo inside >> a.txt
		cat mount.err; echo ---; cat status.err; echo ---; cat step.err; echo ---; cat inside.err`)
	cmd.Env = append(os.Environ(), "WS="+ws, "ZEROFS="+binary)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	parts := strings.Split(string(out), "---\n")
	if len(parts) != 4 {
		t.Fatalf("output: %q", out)
	}
	const want = "zerofs: warning: this shell's working directory is the directory under the mount, not the mount: nothing changed from here is recorded; enter the mount with: cd \"$PWD\"\n"
	for i, name := range []string{"mount", "status", "step"} {
		if parts[i] != want {
			t.Errorf("%s from the backing directory: stderr %q, want %q", name, parts[i], want)
		}
	}
	if parts[3] != "" {
		t.Errorf("status inside the mount: stderr %q, want nothing", parts[3])
	}
	// The files the test shell wrote into the backing directory are not
	// the mount's business; the one written inside is recorded.
	if stat := binOK(t, ws, "log", "--stat"); !strings.Contains(stat, "modified  a.txt") {
		t.Errorf("the change made inside the mount is not in the log:\n%s", stat)
	}
}

// With /dev/fuse closed to the user, go-fuse says only "fusermount exited
// with code 256": mount passes on fusermount's own reason and points to the
// daemon's log.
func TestMountWithoutFuseAccessSaysWhy(t *testing.T) {
	built.NeedFUSE(t)
	fi, err := os.Stat("/dev/fuse")
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm()&0o006 != 0 {
		t.Skip("/dev/fuse is open to every user here: nothing to refuse")
	}
	testsupport.RequireSetpriv(t)
	ws, bin := nobodysDir(t, "ws")
	t.Cleanup(func() { unmountT(t, ws) })
	cmd := exec.Command("setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", bin, "mount", ws)
	cmd.Dir = "/"
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatalf("mount as nobody without /dev/fuse access succeeded: %s", out)
	}
	got := string(out)
	logPath := filepath.Join(ws, ".zero", "daemon.log")
	if !strings.Contains(got, "failed to open /dev/fuse: Permission denied") || !strings.Contains(got, "(see "+logPath+")") ||
		strings.Count(got, "\n") != 1 || !strings.HasPrefix(got, "zerofs: ") {
		t.Errorf("mount as nobody: %q, want one line with fusermount's reason and the log's path", got)
	}
}
