package testsupport

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// RunOptions says where and how Run runs a command.
type RunOptions struct {
	// Dir is the working directory ("" is the test's).
	Dir string
	// Stdin is the command's standard input.
	Stdin string
	// Env is added to the test's environment.
	Env []string
	// Timeout bounds the run (0: no bound), so a deadlock fails the test
	// with the command's name instead of hanging the suite.
	Timeout time.Duration
	// Combined sends stderr into Stdout, interleaved as a terminal shows it.
	Combined bool
}

// Output is what one run of a command gave.
type Output struct {
	Stdout, Stderr string
	// Code is the exit status: 0 on success, -1 when the command did not
	// exit normally (killed, timed out, not started).
	Code int
	// Err is nil on exit 0; otherwise the *exec.ExitError, the start
	// failure, or a timeout wrapping them.
	Err error
}

// Run runs name with args as o says and returns what it printed and how it
// exited. It never fails t itself: the caller decides what is a failure.
func Run(t testing.TB, o RunOptions, name string, args ...string) Output {
	t.Helper()
	ctx := context.Background()
	if o.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, o.Timeout)
		defer cancel()
	}
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = o.Dir
	cmd.Stdin = strings.NewReader(o.Stdin)
	if o.Env != nil {
		cmd.Env = append(os.Environ(), o.Env...)
	}
	cmd.WaitDelay = 5 * time.Second
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if o.Combined {
		cmd.Stderr = &out
	}
	err := cmd.Run()
	if ctx.Err() != nil {
		err = fmt.Errorf("timed out after %v (deadlock?): %w", o.Timeout, err)
	}
	code := 0
	var xe *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &xe) && ctx.Err() == nil:
		code = xe.ExitCode()
	default:
		code = -1
	}
	return Output{Stdout: out.String(), Stderr: errb.String(), Code: code, Err: err}
}

// Run runs the binary with args as o says (see the function Run). It
// fails t when the binary did not build.
func (b *Binary) Run(t testing.TB, o RunOptions, args ...string) Output {
	t.Helper()
	b.Need(t)
	return Run(t, o, b.Path, args...)
}

// mountTimeout and umountTimeout bound `zerofs mount` in Mount and `zerofs
// umount` in Unmount: a hung daemon fails the test (and is detached)
// instead of hanging the suite. They are no speed bounds.
const (
	mountTimeout  = 4 * time.Minute
	umountTimeout = 30 * time.Second
)

// Mount mounts the workspace ws in place with the binary's daemon (`zerofs
// mount FLAGS... WS`) and returns the daemon's pid. The test's cleanup
// unmounts it whatever happens to the test (Unmount), registered before the
// mount is checked, so a mount that half-succeeded is cleaned up too. It
// ends t (see RequireFUSE) when the machine cannot mount.
func (b *Binary) Mount(t testing.TB, ws string, flags ...string) int {
	t.Helper()
	b.NeedFUSE(t)
	args := append(append([]string{"mount"}, flags...), ws)
	pid := 0
	t.Cleanup(func() { b.Unmount(t, ws, pid) })
	if r := b.Run(t, RunOptions{Dir: "/", Timeout: mountTimeout}, args...); r.Err != nil {
		t.Fatalf("zerofs %s: %v\n%s%s", strings.Join(args, " "), r.Err, r.Stdout, r.Stderr)
	}
	// The daemon's pid is read now, while the mount answers: cleanup may
	// find it hung, and reading .zero/status then would hang too.
	pid = DaemonPID(t, ws)
	return pid
}

// DaemonPID reads the pid of the daemon serving the mount mp from its
// .zero/status.
func DaemonPID(t testing.TB, mp string) int {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(mp, ".zero", "status"))
	if err != nil {
		t.Fatalf("read .zero/status: %v", err)
	}
	var st struct {
		PID int `json:"pid"`
	}
	if err := json.Unmarshal(b, &st); err != nil || st.PID <= 0 {
		t.Fatalf(".zero/status = %q: no pid (%v)", b, err)
	}
	return st.PID
}

// Unmount unmounts mp with `zerofs umount`; if that fails or the mount
// stays, it detaches the mount and kills the daemon pid (when known), so no
// test ever leaves a mount behind. After a failed test it first asks the
// daemon for its goroutines (DumpDaemon). Nothing mounted at mp: nothing
// to do.
func (b *Binary) Unmount(t testing.TB, mp string, pid int) {
	t.Helper()
	if !FUSEMounted(mp) {
		return
	}
	if t.Failed() && pid > 0 {
		DumpDaemon(t, mp, pid)
		return
	}
	if r := b.Run(t, RunOptions{Dir: "/", Timeout: umountTimeout, Combined: true}, "umount", mp); r.Err != nil {
		t.Errorf("zerofs umount %s: %v\n%s", mp, r.Err, r.Stdout)
	}
	if !FUSEMounted(mp) {
		return
	}
	Detach(t, mp)
	if pid > 0 {
		syscall.Kill(pid, syscall.SIGKILL)
	}
	if FUSEMounted(mp) {
		t.Errorf("%s is still mounted after umount -l", mp)
	}
}

// DumpDaemon, for a test that failed with its daemon still mounted at mp,
// asks the daemon for its goroutines (SIGQUIT: the Go runtime prints every
// goroutine's stack to the daemon's log and exits), detaches the mount and
// logs the dump. A test that failed for "deadlock?" (a writer that did not
// finish, a command that timed out) then says where the daemon waited, or
// shows that it waited nowhere and the machine was only slow. The log is
// read from the default store, mp/.zero, once detached.
func DumpDaemon(t testing.TB, mp string, pid int) {
	t.Helper()
	logPath := filepath.Join(mp, ".zero", "daemon.log")
	syscall.Kill(pid, syscall.SIGQUIT)
	if Poll(10*time.Second, func() bool { return syscall.Kill(pid, 0) != nil }) != nil {
		syscall.Kill(pid, syscall.SIGKILL)
	}
	Detach(t, mp)
	b, err := os.ReadFile(logPath)
	if err != nil {
		t.Logf("the daemon's log after SIGQUIT: %v", err)
		return
	}
	const most = 256 << 10
	if i := bytes.LastIndex(b, []byte("SIGQUIT")); i >= 0 {
		b = b[i:]
	}
	if len(b) > most {
		b = b[:most]
	}
	t.Logf("the daemon's goroutines (pid %d, SIGQUIT after the test failed):\n%s", pid, b)
}
