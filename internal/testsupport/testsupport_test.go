package testsupport

import (
	"errors"
	"os"
	"strconv"
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
