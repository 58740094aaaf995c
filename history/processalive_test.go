package history

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/zerofs/zerofs/internal/testsupport"
)

// TestProcessAliveWhileThreadsExit: a process whose leader thread has
// exited (a zombie in /proc/PID/stat) while another thread runs on still
// holds its descriptors, so it is alive; once that thread is gone too and
// only the unreaped zombie is left, it is not. Failed before ProcessAlive
// looked at /proc/PID/task: the first answer was false.
func TestProcessAliveWhileThreadsExit(t *testing.T) {
	gcc, err := exec.LookPath("gcc")
	if err != nil {
		t.Skip("no gcc to build the two-thread process")
	}
	dir := t.TempDir()
	src := filepath.Join(dir, "leader.c")
	os.WriteFile(src, []byte(`#include <pthread.h>
#include <unistd.h>
static void *run(void *a) { (void)a; sleep(2); return 0; }
int main(void) { pthread_t t; pthread_create(&t, 0, run, 0); pthread_exit(0); }
`), 0o644)
	bin := filepath.Join(dir, "leader")
	if out, err := exec.Command(gcc, "-pthread", "-o", bin, src).CombinedOutput(); err != nil {
		t.Fatalf("gcc: %v\n%s", err, out)
	}
	cmd := exec.Command(bin)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	pid := cmd.Process.Pid
	zombie := func() bool {
		b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
		i := strings.LastIndexByte(string(b), ')')
		return err == nil && i > 0 && i+2 < len(b) && b[i+2] == 'Z'
	}
	if err := testsupport.Poll(5*time.Second, zombie); err != nil {
		t.Fatal("the leader never exited")
	}
	if !ProcessAlive(pid) {
		t.Fatal("a process whose leader exited while its other thread runs is reported gone")
	}
	tasksLeft := func() bool {
		tasks, err := os.ReadDir(filepath.Join("/proc", strconv.Itoa(pid), "task"))
		return err == nil && len(tasks) == 1
	}
	if err := testsupport.Poll(10*time.Second, tasksLeft); err != nil {
		t.Fatal("the other thread never exited")
	}
	if ProcessAlive(pid) {
		t.Fatal("an unreaped zombie with no thread left is reported alive")
	}
}
