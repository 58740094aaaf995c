package testsupport

import (
	"errors"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestMain(m *testing.M) {
	RunChild(map[string]func(string) int{
		"echo": func(arg string) int {
			os.Stdout.WriteString(arg + " " + strconv.FormatUint(ChildRand().Uint64(), 10) + "\n")
			Die()
			return 0
		},
		"count": func(arg string) int {
			n, _ := strconv.Atoi(arg)
			for i := range n {
				os.Stdout.WriteString("ack " + strconv.Itoa(i) + "\n")
			}
			Die()
			return 0
		},
	})
	os.Exit(m.Run())
}

// The child gets its argument and its parent's seed, prints, and dies by
// SIGKILL; the same seed gives the same choices.
func TestChild(t *testing.T) {
	want := "hello " + strconv.FormatUint(NewRand(7).Uint64(), 10)
	for range 2 {
		c := StartChild(t, "echo", "hello", ChildOptions{Seed: 7})
		if got := c.Expect(t, "hello "); got != want {
			t.Errorf("child printed %q, want %q", got, want)
		}
		WaitKilled(t, c.Cmd)
	}
}

// TestChildLinesAfterWait: every line a child printed before it was
// killed is read, also when the parent waits for it before its reader got
// to them (rewind/TestMaxStoreSizeCrash reads its last acknowledgements
// after Wait; with cmd.StdoutPipe, Wait closed the pipe under the reader
// and they were lost at high load).
func TestChildLinesAfterWait(t *testing.T) {
	waited := make(chan struct{})
	beforeChildRead = func() { <-waited }
	t.Cleanup(func() { beforeChildRead = nil })
	const n = 1000 // 9 KiB: all of it fits in the pipe before anyone reads
	c := StartChild(t, "count", strconv.Itoa(n), ChildOptions{})
	WaitKilled(t, c.Cmd)
	close(waited)
	got := 0
	for l := range c.Lines {
		if want := "ack " + strconv.Itoa(got); l != want {
			t.Fatalf("line %d: got %q, want %q", got, l, want)
		}
		got++
	}
	if got != n {
		t.Errorf("read %d lines after Wait, want %d", got, n)
	}
}

func TestSeedReplays(t *testing.T) {
	t.Setenv(SeedEnv, "42")
	if a, b := Rand(t).Uint64(), NewRand(42).Uint64(); a != b {
		t.Errorf("ZEROFS_SEED=42 gave %d, want %d", a, b)
	}
}

func TestPoll(t *testing.T) {
	n := 0
	if err := Poll(time.Second, func() bool { n++; return n == 3 }); err != nil || n != 3 {
		t.Errorf("Poll: %v after %d calls, want nil after 3", err, n)
	}
	if err := Poll(10*time.Millisecond, func() bool { return false }); !errors.Is(err, ErrTimeout) {
		t.Errorf("Poll of a false condition: %v, want ErrTimeout", err)
	}
}

func TestFUSEMounted(t *testing.T) {
	if FUSEMounted(t.TempDir()) || FUSEMounted("/") {
		t.Error("a plain directory counts as a FUSE mount")
	}
}

// Run reports what a command printed and how it exited, and bounds it.
func TestRun(t *testing.T) {
	tests := []struct {
		name     string
		o        RunOptions
		script   string
		stdout   string
		stderr   string
		code     int
		timedOut bool
	}{
		{name: "ok", script: "echo out; echo err >&2", stdout: "out\n", stderr: "err\n"},
		{name: "exit 3", script: "echo no >&2; exit 3", stderr: "no\n", code: 3},
		{name: "stdin and env", o: RunOptions{Stdin: "in\n", Env: []string{"X=y"}}, script: "cat; echo $X", stdout: "in\ny\n"},
		{name: "dir", o: RunOptions{Dir: "/"}, script: "pwd", stdout: "/\n"},
		{name: "combined", o: RunOptions{Combined: true}, script: "echo a; echo b >&2; echo c", stdout: "a\nb\nc\n"},
		{name: "timeout", o: RunOptions{Timeout: 100 * time.Millisecond}, script: "exec sleep 10", code: -1, timedOut: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := Run(t, tc.o, "/bin/sh", "-c", tc.script)
			if r.Stdout != tc.stdout || r.Stderr != tc.stderr || r.Code != tc.code {
				t.Errorf("got stdout %q, stderr %q, code %d (%v); want %q, %q, %d", r.Stdout, r.Stderr, r.Code, r.Err, tc.stdout, tc.stderr, tc.code)
			}
			if (r.Err != nil) != (tc.code != 0) {
				t.Errorf("err %v with code %d", r.Err, r.Code)
			}
			if timedOut := r.Err != nil && strings.Contains(r.Err.Error(), "timed out"); timedOut != tc.timedOut {
				t.Errorf("err %v: timed out %v, want %v", r.Err, timedOut, tc.timedOut)
			}
		})
	}
}
