package fs

import (
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/zerofs/zerofs/record"
)

// TestCallerRecorded: a capture names the process (not the thread) whose
// request caused it.
func TestCallerRecorded(t *testing.T) {
	m := mountT(t, Options{})
	mp := m.Mountpoint()
	writeFile(t, filepath.Join(mp, "f"), "x")
	comm, err := os.ReadFile("/proc/self/comm")
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for line := range strings.Lines(ctlRead(t, mp, "log")) {
		var ev struct {
			Type    string            `json:"type"`
			Payload record.Checkpoint `json:"payload"`
		}
		readJSON(t, line, &ev)
		if ev.Type != "session_checkpoint" {
			continue
		}
		for _, fs := range ev.Payload.Files {
			if fs.Path != "f" {
				continue
			}
			found = true
			if fs.PID != os.Getpid() || fs.Comm != strings.TrimSpace(string(comm)) {
				t.Errorf("capture of f: pid %d comm %q; want %d %q", fs.PID, fs.Comm, os.Getpid(), strings.TrimSpace(string(comm)))
			}
		}
	}
	if !found {
		t.Errorf("no capture of f in the log")
	}
}

// TestCallerPermissions: the kernel checks a non-root caller's permissions
// (default_permissions), and what it creates is its own.
func TestCallerPermissions(t *testing.T) {
	m := mountT(t, Options{})
	mp := m.Mountpoint()
	// Let others reach the mount: t.TempDir makes 0700 directories.
	for _, d := range []string{filepath.Dir(mp), mp} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	shared := filepath.Join(mp, "shared")
	if err := os.Mkdir(shared, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(shared, 0o777); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(mp, "rootonly"), "r")
	if err := os.Chmod(filepath.Join(mp, "rootonly"), 0o600); err != nil {
		t.Fatal(err)
	}

	// Act as uid/gid 4242 on one locked thread: FUSE requests carry the
	// thread's fsuid and fsgid.
	const id = 4242
	var createErr, readErr, writeErr error
	done := make(chan struct{})
	go func() {
		defer close(done)
		runtime.LockOSThread() // never unlocked: the thread dies with its credentials
		unix.Setfsgid(id)
		unix.Setfsuid(id)
		fd, err := unix.Open(filepath.Join(shared, "mine"), unix.O_CREAT|unix.O_WRONLY|unix.O_CLOEXEC, 0o640)
		createErr = err
		if err == nil {
			unix.Close(fd)
		}
		_, readErr = unix.Open(filepath.Join(mp, "rootonly"), unix.O_RDONLY|unix.O_CLOEXEC, 0)
		_, writeErr = unix.Open(filepath.Join(mp, "rootonly"), unix.O_WRONLY|unix.O_CLOEXEC, 0)
	}()
	<-done
	if createErr != nil {
		t.Fatalf("create as %d in a 0777 directory: %v", id, createErr)
	}
	wantErrno(t, "read a 0600 root file as another user", readErr, syscall.EACCES)
	wantErrno(t, "write a 0600 root file as another user", writeErr, syscall.EACCES)
	var st unix.Stat_t
	if err := unix.Lstat(filepath.Join(m.fs.workspace, "shared", "mine"), &st); err != nil {
		t.Fatal(err)
	}
	if st.Uid != id || st.Gid != id || st.Mode&0o7777 != 0o640 {
		t.Errorf("backing file: uid %d gid %d mode %o; want %d %d 640", st.Uid, st.Gid, st.Mode&0o7777, id, id)
	}
}
