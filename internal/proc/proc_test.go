package proc

import (
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/zerofs/zerofs/internal/testsupport"
)

// TestParseStat: the start time is field 22 counted after the last ")" (a
// command name may hold ") "), a zombie or dead process does not run, and
// a short or garbled line is no process.
func TestParseStat(t *testing.T) {
	for _, tc := range []struct {
		name, line string
		start      uint64
		running    bool
	}{
		{"plain", "42 (zerofs) S 1 42 42 0 -1 4194560 1 0 0 0 0 0 0 0 20 0 9 0 123456 1 2 3", 123456, true},
		{"name with ) ", "42 (a) b) R 1 42 42 0 -1 4194560 1 0 0 0 0 0 0 0 20 0 9 0 777 1 2 3", 777, true},
		{"zombie", "42 (zerofs) Z 1 42 42 0 -1 4194560 1 0 0 0 0 0 0 0 20 0 9 0 123456 1 2 3", 0, false},
		{"dead", "42 (zerofs) X 1 42 42 0 -1 4194560 1 0 0 0 0 0 0 0 20 0 9 0 123456 1 2 3", 0, false},
		{"short", "42 (zerofs) S 1 42", 0, false},
		{"no name", "42 zerofs S 1", 0, false},
		{"bad start", "42 (zerofs) S 1 42 42 0 -1 4194560 1 0 0 0 0 0 0 0 20 0 9 0 x 1 2 3", 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			start, running := parseStat([]byte(tc.line))
			if start != tc.start || running != tc.running {
				t.Errorf("parseStat: %d, %v; want %d, %v", start, running, tc.start, tc.running)
			}
		})
	}
}

// TestSame: this process is itself at its own start time and not at
// another; a child is running until it exits, a zombie until reaped is not
// running, and a reaped child's pid is no longer the same process.
func TestSame(t *testing.T) {
	self := SelfStart()
	if self == 0 {
		t.Fatal("SelfStart: 0, want this process's start time")
	}
	if !Same(os.Getpid(), self) || !Same(os.Getpid(), 0) || Same(os.Getpid(), self+1) {
		t.Errorf("Same(self): at its start %v, at 0 %v, at another %v; want true, true, false",
			Same(os.Getpid(), self), Same(os.Getpid(), 0), Same(os.Getpid(), self+1))
	}
	if Same(0, 0) || Same(-1, 0) {
		t.Error("Same of pid 0 or -1: true, want false")
	}
	cmd := exec.Command("sleep", "60")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	start, running := Start(pid)
	if !running || start == 0 {
		t.Fatalf("Start(child): %d, %v; want a start time, running", start, running)
	}
	cmd.Process.Kill()
	// Killed, not reaped: a zombie does not run.
	if err := testsupport.Poll(10*time.Second, func() bool { return !Same(pid, start) }); err != nil {
		t.Fatal("a killed child still runs after 10s")
	}
	cmd.Wait()
	if Same(pid, start) {
		t.Error("a reaped child's pid is the same process")
	}
}
