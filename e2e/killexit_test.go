package e2e

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/zerofs/zerofs/internal/testsupport"
)

// killedGoneTimeout bounds how long a SIGKILLed daemon may take to be gone
// (exited and reaped). A daemon that died holding a descriptor on a file
// of its own mount never is: its exit closes that descriptor, and the
// kernel's FLUSH waits for an answer only the dead daemon could give.
const killedGoneTimeout = 5 * time.Second

// mountIDOf is the id of the mount a lookup of p reaches now (its topmost
// mount), from /proc/self/fdinfo, which never asks the filesystem.
func mountIDOf(t *testing.T, p string) int {
	t.Helper()
	fd, err := unix.Open(p, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	id := fdMountID(os.Getpid(), fd)
	if id <= 0 {
		t.Fatalf("no mnt_id for %s in /proc/self/fdinfo", p)
	}
	return id
}

// fdMountID is the mnt_id of process pid's descriptor fd (0 if unknown).
func fdMountID(pid, fd int) int {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/fdinfo/%d", pid, fd))
	if err != nil {
		return 0
	}
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, "mnt_id:"); ok {
			id, _ := strconv.Atoi(strings.TrimSpace(v))
			return id
		}
	}
	return 0
}

// fdsOnMount lists process pid's descriptors on mount id, with what they
// name.
func fdsOnMount(pid, id int) []string {
	ents, _ := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	var on []string
	for _, e := range ents {
		fd, err := strconv.Atoi(e.Name())
		if err != nil || fdMountID(pid, fd) != id {
			continue
		}
		target, _ := os.Readlink(fmt.Sprintf("/proc/%d/fd/%d", pid, fd))
		on = append(on, fmt.Sprintf("fd %d -> %s", fd, target))
	}
	return on
}

// threadStates describes process pid's threads: state and kernel stack.
func threadStates(pid int) string {
	var b strings.Builder
	tasks, _ := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	for _, task := range tasks {
		st, _ := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/stat", pid, task.Name()))
		state := "?"
		if i := strings.LastIndexByte(string(st), ')'); i >= 0 && i+2 < len(st) {
			state = string(st[i+2])
		}
		stack, _ := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/stack", pid, task.Name()))
		fmt.Fprintf(&b, "thread %s state %s\n%s", task.Name(), state, stack)
	}
	return b.String()
}

// abortOwnConnection aborts the FUSE connection of the mount this test
// made at ws (by its device, from mountinfo), so that a daemon stuck on
// it goes and the mount can be detached. Only for a test's own mount.
func abortOwnConnection(t *testing.T, ws string) {
	t.Helper()
	for _, m := range append(testsupport.MountsAt(ws), testsupport.MountsAt(filepath.Join(ws, ".zero"))...) {
		if !strings.HasPrefix(m.FSType, "fuse.zerofs") {
			continue
		}
		p := fmt.Sprintf("/sys/fs/fuse/connections/%d/abort", m.Minor)
		if _, err := os.Stat(p); os.IsNotExist(err) {
			unix.Mount("fusectl", "/sys/fs/fuse/connections", "fusectl", 0, "")
		}
		if err := os.WriteFile(p, []byte("1"), 0); err != nil {
			t.Logf("abort the test's own FUSE connection %d: %v", m.Minor, err)
		}
	}
}

// waitKilledGone fails the test unless the killed daemon m is gone within
// killedGoneTimeout, saying what its threads wait on if not (and then
// ending its connection, so that the test leaves nothing behind).
func waitKilledGone(t *testing.T, m *fgMount, ws string) {
	t.Helper()
	select {
	case <-m.exited:
		return
	case <-time.After(killedGoneTimeout):
	}
	pid := m.cmd.Process.Pid
	states := threadStates(pid)
	abortOwnConnection(t, ws)
	t.Fatalf("the daemon (pid %d) SIGKILLed %v ago has not finished exiting:\n%s", pid, killedGoneTimeout, states)
}

// A daemon killed right after it answered (the moment a supervisor or a
// test sees the mount ready), or right after a first write, sometimes
// never finished exiting: a thread in D state in fuse_flush, waiting on
// its own mount's connection, because it held a descriptor on a file of
// its own mount (go-fuse's poll hack, .go-fuse-epoll-hack, opened through
// the new mount). Each round stops the daemon at that moment, looks at
// every descriptor it holds, then SIGKILLs it: none may be on its mount,
// and it must be gone within seconds. The machine is kept busy, as where
// the hang was seen.
func TestKilledDaemonHoldsNothingOnItsMount(t *testing.T) {
	built.NeedFUSE(t)
	busyLoops(t, 2)
	for _, noOpen := range []bool{false, true} {
		t.Run(fmt.Sprintf("no-open=%v", noOpen), func(t *testing.T) {
			ws := filepath.Join(t.TempDir(), "ws")
			if err := os.Mkdir(ws, 0o755); err != nil {
				t.Fatal(err)
			}
			var flags []string
			if noOpen {
				flags = append(flags, "--no-open")
			}
			for round := range 15 {
				m := mountForeground(t, ws, flags...)
				pid := m.cmd.Process.Pid
				ids := []int{mountIDOf(t, ws)}
				if noOpen {
					ids = append(ids, mountIDOf(t, filepath.Join(ws, ".zero")))
				}
				if round%2 == 1 {
					os.WriteFile(filepath.Join(ws, "a.txt"), []byte(strconv.Itoa(round)), 0o644)
				}
				// Stopped, its descriptors stay as they were at the kill.
				syscall.Kill(pid, syscall.SIGSTOP)
				var held []string
				for _, id := range ids {
					held = append(held, fdsOnMount(pid, id)...)
				}
				syscall.Kill(pid, syscall.SIGKILL)
				if len(held) > 0 {
					abortOwnConnection(t, ws)
					t.Fatalf("round %d: the daemon held descriptors on its own mount when it was killed: %s", round, strings.Join(held, ", "))
				}
				waitKilledGone(t, m, ws)
				testsupport.Detach(t, ws)
			}
		})
	}
}

// debugRequest is a request line of go-fuse's --debug log: its opcode and
// the thread that sent it ("rx 6: LOOKUP n1 ... p25284").
var debugRequest = regexp.MustCompile(`rx \d+: (\w+) .* p(\d+)$`)

// The daemon never asks its own mount anything: a request from one of its
// threads means it opened (or looked up) a file of its own mount, which a
// kill at that moment turns into a process that never exits. Mount with
// --debug (every request is logged with the thread that sent it), do the
// usual things (a write, steps, an undo, a view), and look for requests
// from the daemon's own threads.
func TestDaemonSendsNoRequestToItsOwnMount(t *testing.T) {
	for _, noOpen := range []bool{false, true} {
		t.Run(fmt.Sprintf("no-open=%v", noOpen), func(t *testing.T) {
			ws := filepath.Join(t.TempDir(), "ws")
			if err := os.Mkdir(ws, 0o755); err != nil {
				t.Fatal(err)
			}
			flags := []string{"--debug"}
			if noOpen {
				flags = append(flags, "--no-open")
			}
			mountWS(t, ws, flags...)
			pid := testsupport.DaemonPID(t, ws)
			os.WriteFile(filepath.Join(ws, "a.txt"), []byte("one\n"), 0o644)
			step(t, ws, "two")
			os.WriteFile(filepath.Join(ws, "a.txt"), []byte("two\n"), 0o644)
			zerofsOK(t, ws, "undo")
			if b, err := os.ReadFile(filepath.Join(view(ws, 1), "a.txt")); err != nil || string(b) != "one\n" {
				t.Fatalf("@1/a.txt = %q, %v", b, err)
			}
			threads := map[string]bool{}
			tasks, _ := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
			for _, task := range tasks {
				threads[task.Name()] = true
			}
			if len(threads) == 0 {
				t.Fatalf("no threads of the daemon %d in /proc", pid)
			}
			zerofsOK(t, "/", "umount", ws)
			f, err := os.Open(filepath.Join(ws, ".zero", "daemon.log"))
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			var own []string
			sc := bufio.NewScanner(f)
			sc.Buffer(nil, 1<<20)
			requests := 0
			for sc.Scan() {
				m := debugRequest.FindStringSubmatch(sc.Text())
				if m == nil {
					continue
				}
				requests++
				if threads[m[2]] {
					own = append(own, sc.Text())
				}
			}
			if requests == 0 {
				t.Fatal("no requests in the daemon's --debug log")
			}
			if len(own) > 0 {
				t.Fatalf("the daemon (pid %d) sent %d requests to its own mount:\n%s", pid, len(own), strings.Join(own, "\n"))
			}
		})
	}
}

// hungMount stacks at dir a FUSE mount of type fuse.zerofs whose
// connection stays open and is never read: every request to it waits, as
// on the mount of a daemon killed while it waited on its own mount (a
// thread stuck in fuse_flush keeps its /dev/fuse open). Cleanup closes the
// connection and detaches the mount.
func hungMount(t *testing.T, dir string) {
	t.Helper()
	fd, err := unix.Open("/dev/fuse", unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	opts := fmt.Sprintf("fd=%d,rootmode=40000,user_id=0,group_id=0", fd)
	if err := unix.Mount("hung", dir, "fuse.zerofs", unix.MS_NOSUID|unix.MS_NODEV, opts); err != nil {
		unix.Close(fd)
		t.Fatalf("mount a hung FUSE mount at %s: %v", dir, err)
	}
	t.Cleanup(func() {
		unix.Close(fd)
		for range 16 {
			if unix.Unmount(dir, unix.MNT_DETACH) != nil {
				return
			}
		}
	})
}

// writePIDFile writes the store's daemon.pid naming pid (started at start).
func writePIDFile(t *testing.T, store string, pid int, start string) {
	t.Helper()
	if err := os.MkdirAll(store, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(store, "daemon.pid"), []byte(fmt.Sprintf("%d %s\n", pid, start)), 0o600); err != nil {
		t.Fatal(err)
	}
}

// deadPID is the pid of a process that has exited and been reaped.
func deadPID(t *testing.T) int {
	t.Helper()
	c := exec.Command("/bin/true")
	if err := c.Run(); err != nil {
		t.Fatal(err)
	}
	return c.Process.Pid
}

// A daemon killed while it waited on its own mount never finishes exiting,
// and its mount answers nothing: `zerofs mount` failed on it after 10 s
// ("does not answer (a hung daemon?)"), and the dead daemon stayed until
// someone aborted the connection by hand. When the daemon the store names
// is gone, mount aborts the hung connection (fusectl), replaces the mount
// and serves the workspace: in place (the store is under the hung mount,
// and is read beneath it) and at a separate mount point.
func TestMountAbortsHungPredecessor(t *testing.T) {
	built.NeedFUSE(t)
	for _, inPlace := range []bool{true, false} {
		t.Run(fmt.Sprintf("in-place=%v", inPlace), func(t *testing.T) {
			dir := t.TempDir()
			ws, mp := filepath.Join(dir, "ws"), filepath.Join(dir, "mnt")
			os.Mkdir(ws, 0o755)
			os.Mkdir(mp, 0o755)
			os.WriteFile(filepath.Join(ws, "a.txt"), []byte("kept\n"), 0o644)
			args := []string{"mount", ws, mp}
			if inPlace {
				mp, args = ws, []string{"mount", ws}
			}
			writePIDFile(t, filepath.Join(ws, ".zero"), deadPID(t), "1")
			hungMount(t, mp)
			pid := 0
			t.Cleanup(func() { unmountT(t, mp, pid) })
			start := time.Now()
			out, err := zerofsCtx(t, 60*time.Second, "/", args...)
			if err != nil {
				t.Fatalf("zerofs mount over the hung mount of a dead daemon: %v\n%s", err, out)
			}
			if !strings.Contains(out, "aborted its connection") {
				t.Errorf("zerofs mount said %q, want it to say it aborted the hung connection", out)
			}
			if n := fuseMountCount(t, mp); n != 1 {
				t.Fatalf("%d FUSE mounts at %s after mounting over the hung one, want 1", n, mp)
			}
			pid = testsupport.DaemonPID(t, mp)
			if b, err := os.ReadFile(filepath.Join(mp, "a.txt")); err != nil || string(b) != "kept\n" {
				t.Fatalf("a.txt through the new mount: %q, %v", b, err)
			}
			t.Logf("mounted over the hung mount in %v", time.Since(start).Round(time.Millisecond))
		})
	}
}

// A mount that does not answer while the daemon its store names still runs
// is not a dead one: mount refuses it and leaves it (and its connection)
// alone.
func TestMountLeavesHungMountOfLiveDaemon(t *testing.T) {
	built.NeedFUSE(t)
	ws := filepath.Join(t.TempDir(), "ws")
	os.Mkdir(ws, 0o755)
	st, _ := os.ReadFile("/proc/self/stat")
	f := strings.Fields(string(st[strings.LastIndexByte(string(st), ')')+1:]))
	writePIDFile(t, filepath.Join(ws, ".zero"), os.Getpid(), f[19])
	hungMount(t, ws)
	out, err := zerofsCtx(t, 60*time.Second, "/", "mount", ws)
	if err == nil || !strings.Contains(out, "does not answer") || strings.Contains(out, "aborted") {
		t.Fatalf("zerofs mount over a hung mount whose daemon (this test, pid %d) runs: %v\n%s; want a refusal that it does not answer", os.Getpid(), err, out)
	}
	if n := fuseMountCount(t, ws); n != 1 {
		t.Fatalf("%d FUSE mounts at %s, want the hung one left alone", n, ws)
	}
}
