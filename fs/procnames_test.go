package fs

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/zerofs/zerofs/internal/testsupport"
	"github.com/zerofs/zerofs/rewind"
)

// TestProcessOfFollowsTheTask: the cached answer for a thread id is its
// process's name now (an exec changes it), and never a dead process's
// name for an id since reused: the cache's descriptors are bound to the
// task, so once it is gone the id is resolved again.
func TestProcessOfFollowsTheTask(t *testing.T) {
	self := processOf(os.Getpid())
	comm, _ := os.ReadFile("/proc/self/comm")
	if self.PID != os.Getpid() || self.Comm != strings.TrimSpace(string(comm)) {
		t.Fatalf("processOf(self) = %+v, want pid %d comm %q", self, os.Getpid(), strings.TrimSpace(string(comm)))
	}

	// A child that says when it is ready, then execs into sleep on a line
	// of input.
	cmd := exec.Command("sh", "-c", "echo ready; read x; exec sleep 30")
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	if _, err := bufio.NewReader(out).ReadString('\n'); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	if who := processOf(pid); who.PID != pid || who.Comm != "sh" {
		t.Fatalf("processOf(child) = %+v, want pid %d comm sh", who, pid)
	}
	io.WriteString(in, "go\n")
	var who rewind.Caller
	if err := testsupport.Poll(10*time.Second, func() bool {
		who = processOf(pid)
		return who.Comm != "sh" // sh until the exec
	}); err != nil || who.Comm != "sleep" {
		t.Fatalf("processOf(child) after exec = %+v (%v), want comm sleep", who, err)
	}

	// Gone: the entry is dropped, not answered from the dead task (once
	// its last name is older than commFresh: only a live thread asks).
	cmd.Process.Kill()
	cmd.Wait()
	time.Sleep(commFresh)
	if who := processOf(pid); who.Comm == "sleep" {
		t.Fatalf("processOf(dead child) = %+v: a dead process's name", who)
	}
	procCache.mu.Lock()
	_, cached := procCache.m[pid]
	procCache.mu.Unlock()
	if cached {
		t.Fatalf("a dead thread's entry stayed in the cache")
	}
}

// TestProcessOfThread: a thread other than the leader is named by its
// process (pid and comm), as before the cache.
func TestProcessOfThread(t *testing.T) {
	ents, err := os.ReadDir("/proc/self/task")
	if err != nil {
		t.Fatal(err)
	}
	comm, _ := os.ReadFile("/proc/self/comm")
	seen := 0
	for _, e := range ents {
		var tid int
		if _, err := fmt.Sscan(e.Name(), &tid); err != nil || tid == os.Getpid() {
			continue
		}
		who := processOf(tid)
		if who.PID == tid && who.Comm == "" {
			continue // exited meanwhile
		}
		seen++
		if who.PID != os.Getpid() || who.Comm != strings.TrimSpace(string(comm)) {
			t.Errorf("processOf(thread %d) = %+v, want pid %d comm %q", tid, who, os.Getpid(), strings.TrimSpace(string(comm)))
		}
	}
	if seen == 0 {
		t.Skip("no other thread to ask about")
	}
}

// TestProcessOfKeepsTheNameForCommFresh: within commFresh of reading a
// thread's name, asking again reads nothing (an rm -rf asks once per file),
// so an exec in that while is seen only after it; then the name is read
// again and the exec is seen.
func TestProcessOfKeepsTheNameForCommFresh(t *testing.T) {
	old := commFresh
	commFresh = time.Hour
	t.Cleanup(func() { commFresh = old })
	cmd := exec.Command("sh", "-c", "echo ready; read x; exec sleep 30")
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	r := bufio.NewReader(out)
	if _, err := r.ReadString('\n'); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	if who := processOf(pid); who.PID != pid || who.Comm != "sh" {
		t.Fatalf("processOf(child) = %+v, want pid %d comm sh", who, pid)
	}
	procCache.mu.Lock()
	first := procCache.m[pid].read
	procCache.mu.Unlock()
	io.WriteString(in, "go\n")
	// The exec has happened once /proc says so.
	deadline := time.Now().Add(10 * time.Second)
	for {
		comm, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
		if strings.TrimSpace(string(comm)) == "sleep" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the child did not exec")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if who := processOf(pid); who.Comm != "sh" {
		t.Fatalf("processOf within commFresh = %+v, want the name read before (sh)", who)
	}
	procCache.mu.Lock()
	again := procCache.m[pid].read
	procCache.mu.Unlock()
	if !again.Equal(first) {
		t.Fatalf("processOf within commFresh read the name again")
	}
	commFresh = 0
	if who := processOf(pid); who.PID != pid || who.Comm != "sleep" {
		t.Fatalf("processOf after commFresh = %+v, want pid %d comm sleep", who, pid)
	}
}
