package fs

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
	"unsafe"

	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"

	"github.com/zerofs/zerofs/record"
)

// Present content in views (SPEC, Trust). A path of @T that nothing
// captured since T is served from the workspace as it is now. The kernel
// checks the view's attributes, which are T's, but the content comes through
// the present path, which may since have been closed to the reader (issue
// 14: pub/ made 0700, a secret written into pub/notes through a hard link
// elsewhere; nobody read it at @1/pub/notes). So every open of such a path
// (and a listing of a present directory, a present symlink's target) also
// needs the reader to be allowed through the present path: the daemon
// opens it as the reader would, on every request, never from a cache.
//
// And where the daemon can tell that the present content is not T's, it
// says so rather than serve it as T's: a present file whose mtime is later
// than the first step at or after T was changed since without a capture,
// which the mount never lets happen, so it was changed outside the mount
// (or while unmounted). Its open fails with EIO and the daemon logs and
// counts it (.zero/status). Times set through the mount (a touch) are
// captured like any change (node.go's Setattr), so they never look like
// such a change, in this mount or the next.

// presentAllows reports whether the caller of ctx may open workspace path p
// as it is now with flags (O_RDONLY for a file's content, O_DIRECTORY for a
// listing, O_PATH|O_NOFOLLOW to reach a symlink): 0, EACCES, or the errno
// of the open.
func (f *fsys) presentAllows(ctx context.Context, p string, flags int) syscall.Errno {
	c, ok := fuse.FromContext(ctx)
	if !ok || c.Uid == 0 {
		return 0
	}
	open := func() error {
		fd, err := f.ws.openat2(p, flags|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC)
		if err == nil {
			unix.Close(fd)
		}
		return err
	}
	switch {
	case os.Geteuid() == 0:
		return sysErrno(asCaller(c.Uid, c.Gid, callerGroups(c.Pid), open))
	case c.Uid == f.uid:
		// The daemon is the caller: its own open is the caller's.
		return sysErrno(open())
	}
	// An ordinary user's daemon cannot take another user's identity: the
	// mode bits along the path decide, as for no group and no ACL.
	return f.modeAllows(p, c.Uid, c.Gid, flags)
}

// modeAllows checks search permission on each directory of p and, unless
// flags is O_PATH, read permission on p, by mode bits for uid:gid.
func (f *fsys) modeAllows(p string, uid, gid uint32, flags int) syscall.Errno {
	check := func(rel string, want uint32) syscall.Errno {
		fd, done, err := f.ws.node(rel)
		if err != nil {
			return sysErrno(err)
		}
		defer done()
		var st unix.Stat_t
		if err := unix.Fstat(fd, &st); err != nil {
			return sysErrno(err)
		}
		shift := 0 // other
		switch {
		case st.Uid == uid:
			shift = 6
		case st.Gid == gid:
			shift = 3
		}
		if (st.Mode>>shift)&want != want {
			return syscall.EACCES
		}
		return 0
	}
	dir := ""
	for _, name := range strings.Split(p, "/") {
		if errno := check(dir, 1); errno != 0 {
			return errno
		}
		dir = join(dir, name)
	}
	if flags&unix.O_PATH != 0 {
		return 0
	}
	return check(p, 4)
}

// callerGroups reads the supplementary groups of thread tid from /proc;
// none when it cannot (the check is then stricter, never looser).
func callerGroups(tid uint32) []uint32 {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(int(tid)) + "/status")
	if err != nil {
		return nil
	}
	for line := range strings.Lines(string(b)) {
		k, v, _ := strings.Cut(line, ":")
		if k != "Groups" {
			continue
		}
		var out []uint32
		for _, g := range strings.Fields(v) {
			if n, err := strconv.ParseUint(g, 10, 32); err == nil {
				out = append(out, uint32(n))
			}
		}
		return out
	}
	return nil
}

// daemonGroups are the root daemon's own supplementary groups, which a
// thread gets back after asCaller.
var daemonGroups = sync.OnceValue(func() []uint32 {
	gs, _ := unix.Getgroups()
	out := make([]uint32, len(gs))
	for i, g := range gs {
		out[i] = uint32(g)
	}
	return out
})

// asCaller runs fn on a thread of its own with the caller's filesystem
// identity (fsuid, fsgid and supplementary groups; Linux credentials are
// per thread, and these raw calls change only this one), so the kernel
// checks fn's calls as the caller's, ACLs included. The thread gets the
// daemon's identity back afterwards; if it cannot, it is never used again
// (the goroutine exits locked to it, and the runtime ends it).
func asCaller(uid, gid uint32, groups []uint32, fn func() error) error {
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		err := setThreadCreds(uid, gid, groups)
		if err == nil {
			err = fn()
		}
		if setThreadCreds(uint32(os.Geteuid()), uint32(os.Getegid()), daemonGroups()) == nil {
			runtime.UnlockOSThread()
		}
		done <- err
	}()
	return <-done
}

// setThreadCreds sets this thread's supplementary groups, fsgid and fsuid,
// and checks that they took.
func setThreadCreds(uid, gid uint32, groups []uint32) error {
	var p uintptr
	if len(groups) > 0 {
		p = uintptr(unsafe.Pointer(&groups[0]))
	}
	if _, _, e := unix.RawSyscall(unix.SYS_SETGROUPS, uintptr(len(groups)), p, 0); e != 0 {
		return e
	}
	unix.RawSyscall(unix.SYS_SETFSGID, uintptr(gid), 0, 0)
	unix.RawSyscall(unix.SYS_SETFSUID, uintptr(uid), 0, 0)
	// setfsuid and setfsgid report the previous id: asking to set an
	// invalid one returns the current.
	if cur, _, _ := unix.RawSyscall(unix.SYS_SETFSUID, ^uintptr(0), 0, 0); uint32(cur) != uid {
		return syscall.EPERM
	}
	if cur, _, _ := unix.RawSyscall(unix.SYS_SETFSGID, ^uintptr(0), 0, 0); uint32(cur) != gid {
		return syscall.EPERM
	}
	return nil
}

// notTs reports whether the present file open at fd (the live state of a
// path in view t) has been changed since t without a capture: its mtime is
// later than the first step at or after t began.
func (f *fsys) notTs(fd int, t record.Seq) bool {
	at, ok := f.eng.StepAtOrAfter(t)
	if !ok {
		return false
	}
	var st unix.Statx_t
	if statx(fd, "", &st) != nil {
		return false
	}
	return time.Unix(st.Mtime.Sec, int64(st.Mtime.Nsec)).After(at)
}

// notTsLog counts the view opens refused because the present content was
// changed outside the mount, and remembers the last, for .zero/status.
type notTsLog struct {
	mu   sync.Mutex // guards n, last
	n    int
	last string
}

func (l *notTsLog) add(what string) {
	l.mu.Lock()
	l.n++
	l.last = what
	l.mu.Unlock()
}

func (l *notTsLog) warnings() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.n == 0 {
		return nil
	}
	return []string{fmt.Sprintf("%d view reads refused (EIO): the present file was changed outside the mount since that state, so it is not the state's content (last: %s)", l.n, l.last)}
}
