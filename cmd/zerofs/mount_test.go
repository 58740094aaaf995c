package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/zerofs/zerofs/history"
	"github.com/zerofs/zerofs/internal/testsupport"
)

// binary is the zerofs built once by TestMain for the mounted tests: a
// FUSE mount is never served by the test process that also runs tools in
// it (go-fuse's "Deadlocks").
var (
	binary string
	built  *testsupport.Binary
)

func TestMain(m *testing.M) {
	if script := os.Getenv("ZEROFS_TEST_AGENT"); script != "" {
		// A stand-in agent process (TestParallelSessionsMounted): not a
		// shell, it runs the script as an agent runs its hooks and tools.
		cmd := exec.Command("/bin/sh", "-ec", script)
		cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
		if err := cmd.Run(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	built = testsupport.BuildZerofs()
	binary = built.Path
	code := m.Run()
	built.Remove()
	os.Exit(code)
}

// bin runs the built zerofs from cwd.
func bin(t *testing.T, cwd, stdin string, args ...string) result {
	t.Helper()
	r := built.Run(t, testsupport.RunOptions{Dir: cwd, Stdin: stdin}, args...)
	if xe := (*exec.ExitError)(nil); r.Err != nil && !errors.As(r.Err, &xe) {
		t.Fatal(r.Err) // it did not run
	}
	return result{r.Stdout, r.Stderr, r.Code}
}

func binOK(t *testing.T, cwd string, args ...string) string {
	t.Helper()
	r := bin(t, cwd, "", args...)
	if r.code != 0 {
		t.Fatalf("zerofs %s: exit %d, stderr %q", strings.Join(args, " "), r.code, r.stderr)
	}
	return r.stdout
}

// sh runs a shell script in dir, as a tool under the mount would.
func sh(t *testing.T, dir, script string) string {
	t.Helper()
	cmd := exec.Command("/bin/sh", "-ec", script)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("sh %q: %v\n%s", script, err, out)
	}
	return string(out)
}

// mountT mounts ws in place with the daemon mode of the binary and always
// unmounts it at the end of the test, detaching it if zerofs umount fails
// (testsupport's Binary.Mount).
func mountT(t *testing.T, ws string, args ...string) string {
	t.Helper()
	built.Mount(t, ws, args...)
	return ws
}

// mountedWS makes an empty workspace, mounts it in place (mountT, with
// flags) and returns its path.
func mountedWS(t *testing.T, flags ...string) string {
	t.Helper()
	ws := filepath.Join(t.TempDir(), "ws")
	if err := os.Mkdir(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	return mountT(t, ws, flags...)
}

// unmountT unmounts mp if it is mounted, detaching it if zerofs umount
// fails.
func unmountT(t *testing.T, mp string) {
	t.Helper()
	built.Unmount(t, mp, 0)
}

// nobodysDir makes the directory name, nobody's (uid 65534), in a new
// directory nobody can walk, with a copy of zerofs beside it nobody can
// run; it returns both paths.
func nobodysDir(t *testing.T, name string) (dir, bin string) {
	t.Helper()
	top := t.TempDir()
	os.Chmod(filepath.Dir(top), 0o755)
	os.Chmod(top, 0o755)
	dir = filepath.Join(top, name)
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(dir, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	return dir, built.CopyTo(t, top)
}

func readTrim(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		return "<" + err.Error() + ">"
	}
	return strings.TrimSpace(string(b))
}

func TestMounted(t *testing.T) {
	built.NeedFUSE(t)
	ws := filepath.Join(t.TempDir(), "ws")
	os.MkdirAll(filepath.Join(ws, "src"), 0o755)
	writeFile(t, filepath.Join(ws, "a.txt"), "hello\n")
	writeFile(t, filepath.Join(ws, "src", "main.go"), "package main\n")
	mountT(t, ws)

	// Mounting again is refused, clearly.
	if r := bin(t, "/", "", "mount", ws); r.code != 1 || !strings.Contains(r.stderr, "already mounted by zerofs") {
		t.Errorf("second mount: exit %d, stderr %q", r.code, r.stderr)
	}

	binOK(t, ws, "step", "Edit")
	sh(t, ws, "echo world >> a.txt; echo new > b.txt")
	binOK(t, filepath.Join(ws, "src"), "step", "Bash")
	sh(t, ws, "mv b.txt c.txt; chmod 755 a.txt; sed -i s/main/zerofs/ src/main.go")
	hook := `{"session_id":"s1","hook_event_name":"PreToolUse","tool_name":"Read","tool_input":{"file_path":"a.txt"}}`
	if r := bin(t, ws, hook, "step", "--hook"); r.code != 0 {
		t.Fatalf("step --hook: exit %d: %s", r.code, r.stderr)
	}
	var entries []history.Entry
	json.Unmarshal([]byte(binOK(t, ws, "log", "--json", "--all")), &entries)
	var hp map[string]any
	json.Unmarshal(entries[0].Payload, &hp)
	in, _ := hp["input"].(map[string]any)
	if entries[0].Label != "Read a.txt" || hp["agentSession"] != "s1" || hp["hookEvent"] != "PreToolUse" || in["file_path"] != "a.txt" ||
		hp["tool"] != "Read" || hp["agent"] != "claude" {
		t.Errorf("hook step: label %q payload %v", entries[0].Label, hp)
	}

	stat := binOK(t, ws, "log", "--stat", "--all")
	for _, want := range []string{"Read a.txt", "Bash", "Edit", "renamed   b.txt -> c.txt", "mode      a.txt", "modified  src/main.go", "added     b.txt"} {
		if !strings.Contains(stat, want) {
			t.Errorf("log --stat lacks %q:\n%s", want, stat)
		}
	}
	diff := binOK(t, ws, "diff", "0")
	for _, want := range []string{"+world", "old mode 100644", "new mode 100755", "+++ b/c.txt\t(now)", "-package main", "+package zerofs"} {
		if !strings.Contains(diff, want) {
			t.Errorf("diff 0 lacks %q:\n%s", want, diff)
		}
	}
	if got := binOK(t, filepath.Join(ws, "src"), "show", "0", "main.go"); got != "package main\n" {
		t.Errorf("show 0 main.go = %q", got)
	}
	if r := bin(t, ws, "", "show", "0", "c.txt"); r.code != 1 || r.stderr != "zerofs: c.txt did not exist at 0\n" {
		t.Errorf("show 0 c.txt: exit %d, stderr %q", r.code, r.stderr)
	}

	// undo rolls back Bash (Read changed nothing), redo brings it back.
	binOK(t, ws, "undo")
	if readTrim(t, filepath.Join(ws, "b.txt")) != "new" || readTrim(t, filepath.Join(ws, "src/main.go")) != "package main" {
		t.Errorf("after undo: b.txt %q main.go %q", readTrim(t, filepath.Join(ws, "b.txt")), readTrim(t, filepath.Join(ws, "src/main.go")))
	}
	binOK(t, ws, "redo")
	if readTrim(t, filepath.Join(ws, "c.txt")) != "new" {
		t.Errorf("after redo: c.txt %q", readTrim(t, filepath.Join(ws, "c.txt")))
	}
	out := binOK(t, ws, "rewind", "0")
	if !strings.HasPrefix(out, "rewound to 0: ") || readTrim(t, filepath.Join(ws, "a.txt")) != "hello" {
		t.Errorf("rewind 0: %q, a.txt %q", out, readTrim(t, filepath.Join(ws, "a.txt")))
	}
	if r := bin(t, ws, "", "rewind", "99999"); r.code != 1 || !strings.Contains(r.stderr, "no sequence 99999") {
		t.Errorf("rewind 99999: exit %d, stderr %q", r.code, r.stderr)
	}

	// run: a step of its own, the command's exit status passed on and
	// recorded (log marks the step failed).
	if r := bin(t, ws, "", "run", "--label", "make", "--", "sh", "-c", "echo built > out.txt; exit 3"); r.code != 3 {
		t.Errorf("run: exit %d, want 3 (stderr %q)", r.code, r.stderr)
	}
	if log := binOK(t, ws, "log", "--stat"); !strings.Contains(log, "make  failed (exit 3, ") || !strings.Contains(log, "\n    added     out.txt") {
		t.Errorf("log after run:\n%s", log)
	}

	st := binOK(t, ws, "status")
	for _, want := range []string{"mounted:   at " + ws, "steps:     4", "make"} {
		if !strings.Contains(st, want) {
			t.Errorf("status lacks %q:\n%s", want, st)
		}
	}
	if out := binOK(t, ws, "verify"); !strings.HasPrefix(out, "ok: ") {
		t.Errorf("verify: %q", out)
	}
	if out := binOK(t, ws, "gc", "--before", "1"); !strings.HasPrefix(out, "pruned history before 1: ") {
		t.Errorf("gc: %q", out)
	}

	// umount returns only once the daemon is gone.
	pid := daemonPIDOf(t, ws)
	binOK(t, "/", "umount", ws)
	if history.ProcessAlive(pid) {
		t.Errorf("daemon %d still alive after umount", pid)
	}
	if testsupport.FUSEMounted(ws) {
		t.Errorf("%s still mounted after umount", ws)
	}
	if _, err := os.Stat(filepath.Join(ws, ".zero", "daemon.pid")); !os.IsNotExist(err) {
		t.Errorf("daemon.pid left behind: %v", err)
	}
	// The history is readable unmounted, and agrees.
	if out := binOK(t, ws, "log"); !strings.Contains(out, "make") {
		t.Errorf("log unmounted:\n%s", out)
	}
	if out := binOK(t, ws, "verify"); !strings.HasPrefix(out, "ok: ") {
		t.Errorf("verify unmounted: %q", out)
	}
}

// A directory's rename is one rename record by default, and
// --rename-records=false reaches the daemon and captures everything beneath
// the directory instead (log --stat names each file's rename).
func TestRenameRecordsDefault(t *testing.T) {
	built.NeedFUSE(t)
	for _, tc := range []struct {
		flags []string
		want  []string
	}{
		{nil, []string{"renamed   src -> dst/"}},
		{[]string{"--rename-records=false"}, []string{"renamed   src/a -> dst/a", "renamed   src/d/b -> dst/d/b", "deleted   src/d/"}},
	} {
		ws := filepath.Join(t.TempDir(), "ws")
		os.MkdirAll(filepath.Join(ws, "src", "d"), 0o755)
		writeFile(t, filepath.Join(ws, "src", "a"), "a\n")
		writeFile(t, filepath.Join(ws, "src", "d", "b"), "b\n")
		mountT(t, ws, tc.flags...)
		binOK(t, ws, "step", "mv")
		sh(t, ws, "mv src dst")
		stat := binOK(t, ws, "log", "--stat")
		for _, want := range tc.want {
			if !strings.Contains(stat, want) {
				t.Errorf("mount %v: log --stat lacks %q:\n%s", tc.flags, want, stat)
			}
		}
		if len(tc.flags) == 0 && strings.Contains(stat, "src/a") {
			t.Errorf("mount without flags captured the files beneath the renamed directory:\n%s", stat)
		}
		binOK(t, "/", "umount", ws)
	}
}

func daemonPIDOf(t *testing.T, ws string) int {
	t.Helper()
	st, ok := history.ReadStatus(ws)
	if !ok {
		t.Fatalf("%s is not mounted", ws)
	}
	return st.PID
}

// TestForeground runs `mount -f` at a separate mountpoint as a child and
// stops it with SIGTERM, as Ctrl-C or a service manager would.
func TestForeground(t *testing.T) {
	built.NeedFUSE(t)
	dir := t.TempDir()
	ws, mp := filepath.Join(dir, "ws"), filepath.Join(dir, "mnt")
	os.Mkdir(ws, 0o755)
	os.Mkdir(mp, 0o755)
	cmd := exec.Command(binary, "mount", "-f", "--sync", "always", ws, mp)
	var logb bytes.Buffer
	cmd.Stderr = &logb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		unmountT(t, mp)
	})
	if testsupport.Poll(20*time.Second, func() bool { _, ok := history.ReadStatus(mp); return ok }) != nil {
		t.Fatalf("mount -f never got ready:\n%s", logb.String())
	}
	sh(t, mp, "echo one > f")
	binOK(t, mp, "step", "second")
	sh(t, mp, "echo two > f")
	if out := binOK(t, mp, "show", "2", "f"); out != "one\n" {
		t.Errorf("show 2 f = %q", out)
	}
	if out := binOK(t, mp, "status"); !strings.Contains(out, "sync always") || !strings.Contains(out, "workspace "+ws) {
		t.Errorf("status:\n%s", out)
	}
	// The backing side is not the mount: commands there find the store
	// locked by the daemon and say so.
	if r := bin(t, ws, "", "log"); r.code != 1 || !strings.Contains(r.stderr, "in use by a running zerofs (pid "+strconv.Itoa(cmd.Process.Pid)+")") {
		t.Errorf("log on the backing side: exit %d, stderr %q", r.code, r.stderr)
	}
	cmd.Process.Signal(syscall.SIGTERM)
	if err := cmd.Wait(); err != nil {
		t.Errorf("mount -f after SIGTERM: %v\n%s", err, logb.String())
	}
	if testsupport.FUSEMounted(mp) {
		t.Errorf("%s still mounted after SIGTERM", mp)
	}
	if !strings.Contains(logb.String(), "unmounted cleanly") {
		t.Errorf("log:\n%s", logb.String())
	}
}

// TestUmountDeadDaemon: a daemon killed with SIGKILL leaves a dead mount;
// umount detaches it and says so, and the next mount works.
func TestUmountDeadDaemon(t *testing.T) {
	built.NeedFUSE(t)
	ws := mountedWS(t)
	pid := daemonPIDOf(t, ws)
	syscall.Kill(pid, syscall.SIGKILL)
	testsupport.Poll(2*time.Second, func() bool { return !history.ProcessAlive(pid) })
	r := bin(t, "/", "", "umount", ws)
	if r.code != 0 || !strings.Contains(r.stderr, "detached") {
		t.Errorf("umount of a dead mount: exit %d, stderr %q", r.code, r.stderr)
	}
	if testsupport.FUSEMounted(ws) {
		t.Fatalf("%s still mounted", ws)
	}
	// The pid file the dead daemon left names no live process: no obstacle.
	mountT(t, ws)
	binOK(t, ws, "status")
}

func TestParseSize(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int64
		ok   bool
	}{
		{"0", 0, true}, {"4096", 4096, true}, {"512K", 512 << 10, true}, {"20M", 20 << 20, true},
		{"3G", 3 << 30, true}, {"1T", 1 << 40, true}, {"2GiB", 2 << 30, true}, {"1.5G", 3 << 29, true},
		{"10MB", 10 << 20, true}, {"", 0, false}, {"G", 0, false}, {"-1G", 0, false}, {"5X", 0, false},
	} {
		got, err := parseSize(tc.in)
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("parseSize(%q) = %d, %v; want %d, ok %v", tc.in, got, err, tc.want, tc.ok)
		}
	}
}
