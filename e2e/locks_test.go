package e2e

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/zerofs/zerofs/internal/testsupport"
)

// lockHolder is a child process that takes a lock on a file under the
// mount, says "locked" on stdout and holds the lock until its stdin closes.
type lockHolder struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	done  chan error
}

// holdLock starts name args (which must print "locked" once it holds its
// lock and then read stdin to its end) in dir and waits for "locked".
func holdLock(t *testing.T, dir, name string, args ...string) *lockHolder {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), cmdTimeout)
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	h := &lockHolder{cmd: cmd, stdin: stdin, done: make(chan error, 1)}
	line, _ := bufio.NewReader(stdout).ReadString('\n')
	go func() { h.done <- cmd.Wait(); cancel() }()
	t.Cleanup(func() {
		stdin.Close()
		cmd.Process.Kill()
		<-h.done
	})
	if strings.TrimSpace(line) != "locked" {
		t.Fatalf("%s %s: got %q, want \"locked\"", name, strings.Join(args, " "), line)
	}
	return h
}

// release ends the holder (closing its stdin) and waits for it.
func (h *lockHolder) release(t *testing.T) {
	t.Helper()
	h.stdin.Close()
	if err := <-h.done; err != nil {
		t.Fatalf("lock holder: %v", err)
	}
	h.done <- nil // for Cleanup
}

// status runs a command and returns its exit status and output; a
// command that did not run to an exit fails the test.
func status(t *testing.T, dir string, name string, args ...string) (int, string) {
	t.Helper()
	out, err := runCmd(t, cmdTimeout, dir, nil, name, args...)
	code := exitCode(err)
	if code < 0 {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return code, out
}

// lockfPy takes a POSIX record lock with fcntl.lockf. argv: path, "ex" or
// "sh", "hold" (print "locked", wait for stdin to close) or "try" (print
// "locked" or "busy" and exit).
const lockfPy = `
import fcntl, sys
path, kind, mode = sys.argv[1:4]
f = open(path, "r+" if kind == "ex" else "r")
op = fcntl.LOCK_EX if kind == "ex" else fcntl.LOCK_SH
if mode == "try":
    try:
        fcntl.lockf(f, op | fcntl.LOCK_NB)
    except OSError:
        print("busy"); sys.exit(0)
    print("locked"); sys.exit(0)
fcntl.lockf(f, op)
print("locked", flush=True)
sys.stdin.read()
`

// TestLocksBetweenProcesses: flock(1) and POSIX record locks (python's
// fcntl.lockf) taken through the mount by one process hold off another,
// are released when their holder ends (also by SIGKILL), and a blocking
// waiter gets the lock once it is free.
func TestLocksBetweenProcesses(t *testing.T) {
	ws := mountT(t)
	sh(t, ws, "echo data > f")

	t.Run("flock", func(t *testing.T) {
		h := holdLock(t, ws, "flock", "f", "sh", "-c", "echo locked; cat >/dev/null")
		if code, out := status(t, ws, "flock", "-n", "f", "true"); code != 1 {
			t.Errorf("flock -n f while held: exit %d (%s), want 1", code, out)
		}
		if code, out := status(t, ws, "flock", "-s", "-n", "f", "true"); code != 1 {
			t.Errorf("flock -s -n f while held exclusively: exit %d (%s), want 1", code, out)
		}
		// A record lock is another kind: flock does not hold it off.
		if got := must(t, ws, nil, "python3", "-c", lockfPy, "f", "ex", "try"); strings.TrimSpace(got) != "locked" {
			t.Errorf("lockf while flock is held: got %q, want locked", got)
		}
		// A waiter blocks, then gets the lock once the holder is gone.
		waiter := exec.Command("flock", "f", "sh", "-c", "echo waited >> log")
		waiter.Dir = ws
		if err := waiter.Start(); err != nil {
			t.Fatal(err)
		}
		h.release(t)
		if err := waiter.Wait(); err != nil {
			t.Errorf("blocking flock f: %v", err)
		}
		if code, out := status(t, ws, "flock", "-n", "f", "true"); code != 0 {
			t.Errorf("flock -n f after release: exit %d (%s), want 0", code, out)
		}
	})

	t.Run("lockf", func(t *testing.T) {
		h := holdLock(t, ws, "python3", "-c", lockfPy, "f", "ex", "hold")
		for _, kind := range []string{"ex", "sh"} {
			if got := must(t, ws, nil, "python3", "-c", lockfPy, "f", kind, "try"); strings.TrimSpace(got) != "busy" {
				t.Errorf("lockf %s while held: got %q, want busy", kind, got)
			}
		}
		h.release(t)
		if got := must(t, ws, nil, "python3", "-c", lockfPy, "f", "ex", "try"); strings.TrimSpace(got) != "locked" {
			t.Errorf("lockf after release: got %q, want locked", got)
		}
		// Shared locks share.
		h = holdLock(t, ws, "python3", "-c", lockfPy, "f", "sh", "hold")
		if got := must(t, ws, nil, "python3", "-c", lockfPy, "f", "sh", "try"); strings.TrimSpace(got) != "locked" {
			t.Errorf("shared lockf beside a shared one: got %q, want locked", got)
		}
		h.release(t)
	})

	// Files of views and the control directory lock like any other, each
	// apart from the workspace file it shows.
	t.Run("views and control files", func(t *testing.T) {
		at := filepath.Base(view(ws, step(t, ws, "view")))
		for _, p := range []string{at + "/f", ".zero/head"} {
			h := holdLock(t, ws, "flock", p, "sh", "-c", "echo locked; cat >/dev/null")
			if code, out := status(t, ws, "flock", "-n", p, "true"); code != 1 {
				t.Errorf("flock -n %s while held: exit %d (%s), want 1", p, code, out)
			}
			if code, out := status(t, ws, "flock", "-n", "f", "true"); code != 0 {
				t.Errorf("flock -n f while %s is held: exit %d (%s), want 0", p, code, out)
			}
			h.release(t)
			h = holdLock(t, ws, "python3", "-c", lockfPy, p, "sh", "hold")
			if got := must(t, ws, nil, "python3", "-c", lockfPy, p, "sh", "try"); strings.TrimSpace(got) != "locked" {
				t.Errorf("shared lockf on %s beside a shared one: got %q, want locked", p, got)
			}
			h.release(t)
		}
	})

	// A signal ends a blocked wait (the kernel interrupts the request):
	// the waiter's handler runs, and the holder still holds the lock.
	t.Run("interrupted waiter", func(t *testing.T) {
		h := holdLock(t, ws, "python3", "-c", lockfPy, "f", "ex", "hold")
		got := must(t, ws, nil, "python3", "-c", `
import fcntl, signal, sys
class Alarm(Exception): pass
def ring(*_): raise Alarm()
signal.signal(signal.SIGALRM, ring)
signal.setitimer(signal.ITIMER_REAL, 0.3)
f = open("f", "r+")
try:
    fcntl.lockf(f, fcntl.LOCK_EX)
    print("locked")
except Alarm:
    print("interrupted")
`)
		if strings.TrimSpace(got) != "interrupted" {
			t.Errorf("blocking lockf with an alarm while held: got %q, want interrupted", got)
		}
		if got := must(t, ws, nil, "python3", "-c", lockfPy, "f", "ex", "try"); strings.TrimSpace(got) != "busy" {
			t.Errorf("lockf after the interrupted wait: got %q, want busy", got)
		}
		h.release(t)
	})

	t.Run("killed holder", func(t *testing.T) {
		h := holdLock(t, ws, "python3", "-c", lockfPy, "f", "ex", "hold")
		h.cmd.Process.Signal(syscall.SIGKILL)
		<-h.done
		h.done <- nil
		// Its descriptors were closed before wait returned, so its
		// locks are gone.
		if got := must(t, ws, nil, "python3", "-c", lockfPy, "f", "ex", "try"); strings.TrimSpace(got) != "locked" {
			t.Errorf("lockf after the holder was killed: got %q, want locked", got)
		}
	})
}

// sqliteWriterPy inserts rows into a table from one process. argv: db,
// writer name, rows, journal mode, connections. With more than one
// connection it round-robins over them, so one process holds several
// connections to one database, as a connection pool does; SQLite's
// locking then depends on POSIX lock semantics (one process's locks
// never conflict with each other).
const sqliteWriterPy = `
import sqlite3, sys
db, who, n, mode, conns = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4], int(sys.argv[5])
cs = [sqlite3.connect(db, timeout=60, isolation_level=None) for _ in range(conns)]
cs[0].execute("PRAGMA journal_mode=" + mode)
cs[0].execute("CREATE TABLE IF NOT EXISTS t (who TEXT, i INTEGER, pad TEXT)")
for i in range(n):
    c = cs[i % conns]
    c.execute("BEGIN IMMEDIATE")
    c.execute("INSERT INTO t VALUES (?, ?, ?)", (who, i, "x" * (i % 700)))
    # Another connection of this process reads while this one writes.
    cs[(i + 1) % conns].execute("SELECT count(*) FROM t").fetchone()
    c.execute("COMMIT")
for c in cs:
    c.close()
`

// sqliteConnsPy: two connections of one process read in overlapping
// transactions that end in the other order, then the second writes. SQLite
// counts the process's shared locks per file and unlocks through the
// connection that ends last, so this works only if the process's POSIX
// locks are one owner's whichever descriptor took them (with per-descriptor
// locks the first connection's read lock would stay behind and the write
// would find the database locked). argv: db.
const sqliteConnsPy = `
import sqlite3, sys
c1, c2 = (sqlite3.connect(sys.argv[1], timeout=5, isolation_level=None) for _ in range(2))
c1.execute("BEGIN"); c1.execute("SELECT count(*) FROM t").fetchall()
c2.execute("BEGIN"); c2.execute("SELECT count(*) FROM t").fetchall()
c1.execute("COMMIT"); c2.execute("COMMIT")
c2.execute("INSERT INTO t VALUES ('c2', 1, '')")
c1.execute("INSERT INTO t VALUES ('c1', 1, '')")
print(c2.execute("SELECT count(*) FROM t WHERE who LIKE 'c_'").fetchone()[0])
`

// TestSQLiteWriters: two processes write one SQLite database under the
// mount at once (rollback journal, then WAL, whose shared memory is an
// mmap of the -shm file), each with two connections. Every row arrives
// and the database passes its integrity check; two connections of one
// process take turns (sqliteConnsPy). Then a rewind takes the
// database back to before the writes, and it is still sound.
func TestSQLiteWriters(t *testing.T) {
	if _, err := exec.LookPath("sqlite3"); err != nil {
		testsupport.Unavailable(t, "sqlite3 not found; .ci/run installs it")
	}
	const rows = 150
	for _, mode := range []string{"delete", "wal"} {
		t.Run(mode, func(t *testing.T) {
			ws := mountT(t)
			db := filepath.Join(ws, "app.db")
			must(t, ws, nil, "sqlite3", db, "PRAGMA journal_mode="+mode+";",
				"CREATE TABLE t (who TEXT, i INTEGER, pad TEXT); INSERT INTO t VALUES ('seed', 0, '');")
			T := step(t, ws, "writers")
			var wg sync.WaitGroup
			errs := make([]error, 2)
			outs := make([]string, 2)
			for k := range errs {
				wg.Add(1)
				go func() {
					defer wg.Done()
					outs[k], errs[k] = runCmd(t, cmdTimeout, ws, nil, "python3", "-c", sqliteWriterPy,
						db, "w"+strconv.Itoa(k), strconv.Itoa(rows), mode, "2")
				}()
			}
			wg.Wait()
			for k, err := range errs {
				if err != nil {
					t.Fatalf("writer %d: %v\n%s", k, err, outs[k])
				}
			}
			got := strings.TrimSpace(must(t, ws, nil, "sqlite3", db,
				"PRAGMA integrity_check;", "SELECT who, count(*), count(DISTINCT i) FROM t GROUP BY who ORDER BY who;"))
			want := fmt.Sprintf("ok\nseed|1|1\nw0|%d|%d\nw1|%d|%d", rows, rows, rows, rows)
			if got != want {
				t.Errorf("after two writers: got\n%s\nwant\n%s", got, want)
			}
			if mode == "delete" {
				if got := strings.TrimSpace(must(t, ws, nil, "python3", "-c", sqliteConnsPy, db)); got != "2" {
					t.Errorf("two connections of one process: got %q rows, want 2", got)
				}
			}
			// No process holds the database now: back to the seed.
			rewindTo(t, ws, T)
			got = strings.TrimSpace(must(t, ws, nil, "sqlite3", db, "PRAGMA integrity_check;", "SELECT count(*) FROM t;"))
			if got != "ok\n1" {
				t.Errorf("after rewinding to %d: got %q, want \"ok\\n1\"", T, got)
			}
		})
	}
}

// lockPidPy holds an exclusive POSIX lock on bytes 0-9 of argv[1], prints
// "locked", waits for a line on stdin, then asks for bytes 10-19 with
// F_SETLKW and prints the errno number it failed with ("ok" if it got them).
const lockPidPy = `
import fcntl, sys
f = open(sys.argv[1], "r+")
fcntl.lockf(f, fcntl.LOCK_EX, 10, 0)
print("locked", flush=True)
sys.stdin.readline()
try:
    fcntl.lockf(f, fcntl.LOCK_EX, 10, 10)
    print("ok", flush=True)
except OSError as e:
    print(e.errno, flush=True)
sys.stdin.read()
`

// The mount's locks are the kernel's own (no lock requests reach the
// daemon), so what a local file system reports, it reports too: F_GETLK
// names the process that holds the conflicting lock, and F_SETLKW that
// would deadlock fails with EDEADLK instead of hanging.
func TestLocksAreTheKernels(t *testing.T) {
	ws := mountT(t)
	sh(t, ws, "printf '%020d' 0 > f")

	ctx, cancel := context.WithTimeout(context.Background(), cmdTimeout)
	defer cancel()
	child := exec.CommandContext(ctx, "python3", "-c", lockPidPy, "f")
	child.Dir = ws
	stdin, err := child.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := child.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	child.Stderr = os.Stderr
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { stdin.Close(); child.Process.Kill(); child.Wait() }()
	out := bufio.NewReader(stdout)
	if line, _ := out.ReadString('\n'); strings.TrimSpace(line) != "locked" {
		t.Fatalf("lock holder said %q, want locked", line)
	}

	f, err := os.OpenFile(filepath.Join(ws, "f"), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	lk := syscall.Flock_t{Type: syscall.F_WRLCK, Start: 0, Len: 10}
	if err := syscall.FcntlFlock(f.Fd(), syscall.F_GETLK, &lk); err != nil {
		t.Fatal(err)
	}
	if lk.Type != syscall.F_WRLCK || int(lk.Pid) != child.Process.Pid {
		t.Errorf("F_GETLK = type %d pid %d, want F_WRLCK held by %d", lk.Type, lk.Pid, child.Process.Pid)
	}

	// This process takes bytes 10-19, the holder then waits for them, and
	// this process's wait for bytes 0-9 would close the circle.
	mine := syscall.Flock_t{Type: syscall.F_WRLCK, Start: 10, Len: 10}
	if err := syscall.FcntlFlock(f.Fd(), syscall.F_SETLK, &mine); err != nil {
		t.Fatalf("lock bytes 10-19: %v", err)
	}
	fmt.Fprintln(stdin)
	// The holder now waits for bytes 10-19 (F_SETLKW) and this process for
	// bytes 0-9: whichever of the two waits comes second closes the circle
	// and must fail with EDEADLK.
	theirs := syscall.Flock_t{Type: syscall.F_WRLCK, Start: 0, Len: 10}
	errc := make(chan error, 1)
	go func() { errc <- syscall.FcntlFlock(f.Fd(), syscall.F_SETLKW, &theirs) }()
	said := make(chan string, 1)
	go func() { line, _ := out.ReadString('\n'); said <- strings.TrimSpace(line) }()
	select {
	case err := <-errc:
		if err != syscall.EDEADLK {
			t.Fatalf("F_SETLKW on the holder's bytes: %v, want EDEADLK", err)
		}
	case s := <-said:
		if s != strconv.Itoa(int(syscall.EDEADLK)) {
			t.Fatalf("the holder's F_SETLKW: %s, want EDEADLK (%d)", s, syscall.EDEADLK)
		}
		stdin.Close() // the holder exits, and this process's wait ends
		if err := <-errc; err != nil {
			t.Fatalf("F_SETLKW once the holder is gone: %v", err)
		}
	case <-ctx.Done():
		t.Fatal("F_SETLKW hung: no deadlock detection")
	}
}

// dropPy takes a POSIX lock through one descriptor, then opens and closes
// the file read-only through another, prints "closed" and waits for stdin
// to close.
const dropPy = `
import fcntl, sys
f = open(sys.argv[1], "r+")
fcntl.lockf(f, fcntl.LOCK_EX)
open(sys.argv[1], "r").close()
print("locked", flush=True)
sys.stdin.read()
`

// A process's POSIX locks on a file drop when it closes any descriptor of
// it, a read-only one too, though a read-only open sends no FLUSH (the
// kernel drops the locks itself).
func TestPosixLockDropsAtAnyClose(t *testing.T) {
	ws := mountT(t)
	sh(t, ws, "echo data > f")
	holdLock(t, ws, "python3", "-c", dropPy, "f")
	if got := must(t, ws, nil, "python3", "-c", lockfPy, "f", "ex", "try"); strings.TrimSpace(got) != "locked" {
		t.Errorf("lockf after the holder closed another descriptor: got %q, want locked", got)
	}
}
