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
