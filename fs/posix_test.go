package fs

import (
	"errors"
	"os"
	"path/filepath"
	"sort"
	"syscall"
	"testing"

	"github.com/hanwen/go-fuse/v2/posixtest"
	"golang.org/x/sys/unix"
)

// TestPosix runs go-fuse's POSIX suite (posixtest.All) against a mount,
// every case in a directory of its own.
//
// One case is replaced: posixtest's FcntlFlockLocksFile wants a POSIX lock
// taken through a second descriptor of the same process to fail with
// EAGAIN. That is the behaviour of go-fuse's loopback, which turns every
// POSIX lock into a lock of its open file; on a local file system such as
// ext4 the second lock succeeds (a process's POSIX locks never conflict with
// each other), and go-fuse's own run of the suite on a directory skips the
// case for that reason. The mount keeps POSIX semantics, which SQLite with
// several connections in one process relies on, so the case run here,
// fcntlLocksFile, asserts those semantics, and TestPosixLocksPlain checks
// that a plain directory of the backing file system agrees with it.
func TestPosix(t *testing.T) {
	m := mountT(t, Options{})
	cases := make(map[string]func(*testing.T, string), len(posixtest.All))
	for name, fn := range posixtest.All {
		cases[name] = fn
	}
	cases["FcntlFlockLocksFile"] = fcntlLocksFile
	cases["FlockLocksFile"] = flockLocksFile
	runCases(t, m.Mountpoint(), cases)
}

// TestPosixLocksPlain runs the lock cases written here against a plain
// directory, so they state the backing file system's behaviour.
func TestPosixLocksPlain(t *testing.T) {
	runCases(t, t.TempDir(), map[string]func(*testing.T, string){
		"FcntlFlockLocksFile": fcntlLocksFile,
		"FlockLocksFile":      flockLocksFile,
	})
}

func runCases(t *testing.T, root string, cases map[string]func(*testing.T, string)) {
	names := make([]string, 0, len(cases))
	for name := range cases {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		t.Run(name, func(t *testing.T) {
			dir := filepath.Join(root, name)
			if err := os.Mkdir(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			cases[name](t, dir)
		})
	}
}

func setlk(f *os.File, cmd int, typ int16, start, n int64) error {
	lk := syscall.Flock_t{Type: typ, Whence: 0, Start: start, Len: n}
	return syscall.FcntlFlock(f.Fd(), cmd, &lk)
}

func getlk(t *testing.T, f *os.File, cmd int, typ int16, start, n int64) syscall.Flock_t {
	t.Helper()
	lk := syscall.Flock_t{Type: typ, Whence: 0, Start: start, Len: n}
	if err := syscall.FcntlFlock(f.Fd(), cmd, &lk); err != nil {
		t.Fatalf("F_GETLK: %v", err)
	}
	return lk
}

func openRW(t *testing.T, p string) *os.File {
	t.Helper()
	f, err := os.OpenFile(p, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

// fcntlLocksFile: the POSIX locks of one process, through any of its
// descriptors, are one owner's; an OFD lock belongs to its open file and
// conflicts with them; closing any descriptor of the file drops the
// process's POSIX locks, not its OFD locks.
func fcntlLocksFile(t *testing.T, dir string) {
	p := filepath.Join(dir, "test")
	f1, f2, f3 := openRW(t, p), openRW(t, p), openRW(t, p)
	if err := setlk(f1, unix.F_SETLK, unix.F_WRLCK, 0, 0); err != nil {
		t.Fatalf("F_SETLK F_WRLCK on f1: %v", err)
	}
	// Same process: the write lock becomes a read lock.
	if err := setlk(f2, unix.F_SETLK, unix.F_RDLCK, 0, 0); err != nil {
		t.Errorf("F_SETLK F_RDLCK on f2 (same process): got %v, want success", err)
	}
	// Another open file: a read lock fits beside a read lock, a write
	// lock does not, and F_OFD_GETLK names the conflict.
	if err := setlk(f3, unix.F_OFD_SETLK, unix.F_WRLCK, 0, 0); !errors.Is(err, unix.EAGAIN) {
		t.Errorf("F_OFD_SETLK F_WRLCK on f3: got %v, want EAGAIN", err)
	}
	if lk := getlk(t, f3, unix.F_OFD_GETLK, unix.F_WRLCK, 10, 5); lk.Type != unix.F_RDLCK || lk.Start != 0 || lk.Len != 0 {
		t.Errorf("F_OFD_GETLK on f3: got type %d [%d,+%d), want F_RDLCK [0,+0)", lk.Type, lk.Start, lk.Len)
	}
	if err := setlk(f3, unix.F_OFD_SETLK, unix.F_RDLCK, 100, 10); err != nil {
		t.Errorf("F_OFD_SETLK F_RDLCK on f3: %v", err)
	}
	// The process's own locks are not conflicts for it.
	if lk := getlk(t, f1, unix.F_GETLK, unix.F_WRLCK, 0, 50); lk.Type != unix.F_UNLCK {
		t.Errorf("F_GETLK [0,50) on f1: got type %d, want F_UNLCK", lk.Type)
	}
	// Closing f2 drops f1's POSIX lock too (POSIX close semantics), not
	// f3's OFD lock.
	f2.Close()
	if err := setlk(f3, unix.F_OFD_SETLK, unix.F_WRLCK, 0, 50); err != nil {
		t.Errorf("F_OFD_SETLK F_WRLCK on f3 after closing f2: got %v, want success", err)
	}
	if err := setlk(f1, unix.F_SETLK, unix.F_WRLCK, 100, 1); !errors.Is(err, unix.EAGAIN) {
		t.Errorf("F_SETLK F_WRLCK [100,101) on f1 against f3's read lock: got %v, want EAGAIN", err)
	}
	if err := setlk(f1, unix.F_SETLK, unix.F_WRLCK, 200, 1); err != nil {
		t.Errorf("F_SETLK F_WRLCK [200,201) on f1: %v", err)
	}
	// Unlocking f3 lets f1 have the range.
	if err := setlk(f3, unix.F_OFD_SETLK, unix.F_UNLCK, 0, 0); err != nil {
		t.Errorf("F_OFD_SETLK F_UNLCK on f3: %v", err)
	}
	if err := setlk(f1, unix.F_SETLKW, unix.F_WRLCK, 0, 0); err != nil {
		t.Errorf("F_SETLKW F_WRLCK on f1 after f3 unlocked: %v", err)
	}
}

// flockLocksFile: flock locks belong to the open file: two opens of one
// file conflict, a dup shares the lock, and the last close drops it.
func flockLocksFile(t *testing.T, dir string) {
	p := filepath.Join(dir, "test")
	f1, f2 := openRW(t, p), openRW(t, p)
	if err := unix.Flock(int(f1.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		t.Fatalf("flock LOCK_EX f1: %v", err)
	}
	if err := unix.Flock(int(f2.Fd()), unix.LOCK_SH|unix.LOCK_NB); !errors.Is(err, unix.EWOULDBLOCK) {
		t.Errorf("flock LOCK_SH f2: got %v, want EWOULDBLOCK", err)
	}
	dup, err := unix.Dup(int(f1.Fd()))
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.Flock(dup, unix.LOCK_SH|unix.LOCK_NB); err != nil {
		t.Errorf("flock LOCK_SH on a dup of f1: %v", err)
	}
	f1.Close()
	if err := unix.Flock(int(f2.Fd()), unix.LOCK_EX|unix.LOCK_NB); !errors.Is(err, unix.EWOULDBLOCK) {
		t.Errorf("flock LOCK_EX f2 while the dup is open: got %v, want EWOULDBLOCK", err)
	}
	unix.Close(dup)
	if err := unix.Flock(int(f2.Fd()), unix.LOCK_EX); err != nil {
		t.Errorf("flock LOCK_EX f2 after the last close: %v", err)
	}
	if err := unix.Flock(int(f2.Fd()), unix.LOCK_UN); err != nil {
		t.Errorf("flock LOCK_UN f2: %v", err)
	}
}
