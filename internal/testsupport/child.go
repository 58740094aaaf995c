package testsupport

import (
	"bufio"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Child processes: the test binary re-executed with ZEROFS_TEST_CHILD naming
// a function to run (the pattern of Go's os/exec tests), so a crash test can
// SIGKILL a process in the middle of a write. The child reports on stdout,
// one line per fact; the parent reads the lines and kills it.
const (
	childEnv     = "ZEROFS_TEST_CHILD"
	childArgEnv  = "ZEROFS_TEST_CHILD_ARG"
	childSeedEnv = "ZEROFS_TEST_CHILD_SEED"
)

// RunChild is called first thing in TestMain: if this process is a child, it
// runs children[name] with its argument and exits with what it returns; if
// not, it returns and TestMain goes on.
func RunChild(children map[string]func(arg string) int) {
	name := os.Getenv(childEnv)
	if name == "" {
		return
	}
	fn, ok := children[name]
	if !ok {
		fmt.Fprintf(os.Stderr, "unknown child %q\n", name)
		os.Exit(3)
	}
	os.Exit(fn(os.Getenv(childArgEnv)))
}

// ChildRand is a child's generator, seeded by its parent (Child.Seed), so a
// replayed parent replays its children's choices too.
func ChildRand() *rand.Rand {
	seed, _ := strconv.ParseUint(os.Getenv(childSeedEnv), 10, 64)
	return NewRand(seed)
}

// Die SIGKILLs the calling process: a crash point.
func Die() {
	syscall.Kill(os.Getpid(), syscall.SIGKILL)
	select {}
}

// Child is a running child process.
type Child struct {
	Cmd *exec.Cmd
	// Lines are its stdout lines, closed at EOF.
	Lines <-chan string
}

// ChildOptions are StartChild's optional settings.
type ChildOptions struct {
	Seed   uint64    // seeds the child's ChildRand
	Env    []string  // added to the environment
	Stderr io.Writer // the child's stderr; os.Stderr if nil
}

// beforeChildRead, when set, runs before StartChild's reader reads the
// child's first line: a test seam to hold the reader back.
var beforeChildRead func()

// StartChild runs children[name](arg) in a new process of this test binary.
// Cleanup kills it if it is still running.
func StartChild(t testing.TB, name, arg string, o ChildOptions) *Child {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+name, childArgEnv+"="+arg,
		childSeedEnv+"="+strconv.FormatUint(o.Seed, 10))
	cmd.Env = append(cmd.Env, o.Env...)
	cmd.Stderr = o.Stderr
	if cmd.Stderr == nil {
		cmd.Stderr = os.Stderr
	}
	// A pipe of our own, not cmd.StdoutPipe: Wait closes that one's read
	// end, and the lines still in it are lost to a reader that had not
	// got to them yet (a parent that waits for a killed child and then
	// reads its last acknowledgements). Ours is read to EOF, whenever
	// Wait runs.
	out, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout = w
	err = cmd.Start()
	w.Close() // the child has its copy: EOF when it ends
	if err != nil {
		out.Close()
		t.Fatal(err)
	}
	lines := make(chan string, 1<<16)
	go func() {
		defer close(lines)
		defer out.Close()
		if beforeChildRead != nil {
			beforeChildRead()
		}
		sc := bufio.NewScanner(out)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	return &Child{Cmd: cmd, Lines: lines}
}

// Expect waits up to 30 s for the child's next line and checks that it
// starts with want.
func (c *Child) Expect(t testing.TB, want string) string {
	t.Helper()
	select {
	case line, ok := <-c.Lines:
		if !ok {
			t.Fatalf("child exited before printing %q", want)
		}
		if !strings.HasPrefix(line, want) {
			t.Fatalf("child printed %q, want %q", line, want)
		}
		return line
	case <-time.After(30 * time.Second):
		t.Fatalf("child printed nothing in 30 s, want %q", want)
	}
	return ""
}

// Kill SIGKILLs the child and waits for it to end by that signal.
func (c *Child) Kill(t testing.TB) {
	t.Helper()
	c.Cmd.Process.Signal(syscall.SIGKILL)
	WaitKilled(t, c.Cmd)
}

// WaitKilled waits for cmd and fails t unless SIGKILL ended it.
func WaitKilled(t testing.TB, cmd *exec.Cmd) {
	t.Helper()
	err := cmd.Wait()
	if !KilledBySIGKILL(cmd.ProcessState) {
		t.Fatalf("child ended with %v, want killed by SIGKILL", err)
	}
}

// KilledBySIGKILL reports whether ps is a process that SIGKILL ended.
func KilledBySIGKILL(ps *os.ProcessState) bool {
	if ps == nil {
		return false
	}
	ws, ok := ps.Sys().(syscall.WaitStatus)
	return ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL
}
