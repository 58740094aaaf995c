package fs

import (
	"context"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// devIno names an inode.
type devIno struct{ dev, ino uint64 }

// writeOpens counts, per inode, the handles open for writing through the
// mount (both modes, passthrough or not) and the truncates under way by
// path. The engine keeps a removed file's inode in the store only when no
// one can write to it (rewind.Options.OpenForWrite); an open for writing
// registers here first and then asks the engine to detach a kept inode
// (Engine.Detach), so a writer never writes into a kept blob.
type writeOpens struct {
	mu sync.Mutex // guards n
	n  map[devIno]int
}

func newWriteOpens() *writeOpens { return &writeOpens{n: map[devIno]int{}} }

// add registers a writer of the file open at fd; ok is false when fd
// cannot be stat'ed.
func (w *writeOpens) add(fd int) (key devIno, ok bool) {
	key, _, ok = w.addStat(fd)
	return key, ok
}

// addStat is add that also returns the file's mode.
func (w *writeOpens) addStat(fd int) (key devIno, mode uint32, ok bool) {
	var st unix.Stat_t
	if unix.Fstat(fd, &st) != nil {
		return key, 0, false
	}
	key = devIno{st.Dev, st.Ino}
	w.mu.Lock()
	w.n[key]++
	w.mu.Unlock()
	return key, st.Mode, true
}

// addKey counts a handle of the file key (whose device and inode number the
// caller read) as open for writing.
func (w *writeOpens) addKey(key devIno) devIno {
	w.mu.Lock()
	w.n[key]++
	w.mu.Unlock()
	return key
}

func (w *writeOpens) remove(key devIno) {
	w.mu.Lock()
	if w.n[key]--; w.n[key] <= 0 {
		delete(w.n, key)
	}
	w.mu.Unlock()
}

// has is rewind.Options.OpenForWrite.
func (w *writeOpens) has(dev, ino uint64) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.n[devIno{dev, ino}] > 0
}

// beginWrite registers h as a writer of its file and detaches the file
// from the store if it is a kept blob, before h is handed out; then, when
// trunc is set (the open asked for O_TRUNC, which the caller left out of
// its open so that nothing is written before the detach), it truncates a
// regular file, and clears its set-id bits when flags carry openKillSetID
// (killpriv.go). On error the registration is undone.
func (f *fsys) beginWrite(ctx context.Context, h *wsFile, p string, trunc bool, flags uint32) syscall.Errno {
	key, mode, ok := f.wopen.addStat(h.fd)
	if !ok {
		return syscall.EIO
	}
	if err := f.eng.Detach(h.fd); err != nil {
		f.wopen.remove(key)
		return engineErrno(f.log, "open", p, err, seqInvalid)
	}
	if trunc && mode&unix.S_IFMT == unix.S_IFREG {
		var err error
		if h.fd >= 0 && openedForWrite(h.fd) {
			err = unix.Ftruncate(h.fd, 0)
		} else {
			err = unix.Truncate(procPath(h.fd), 0) // O_RDONLY|O_TRUNC
		}
		if err == nil && flags&openKillSetID != 0 {
			err = killSetID(ctx, h.fd, procPath(h.fd))
		}
		if err != nil {
			f.wopen.remove(key)
			return sysErrno(err)
		}
	}
	h.wkey, h.wcounted = key, true
	return 0
}

// openedForWrite reports whether descriptor fd was opened for writing.
func openedForWrite(fd int) bool {
	fl, err := unix.FcntlInt(uintptr(fd), unix.F_GETFL, 0)
	return err == nil && fl&unix.O_ACCMODE != unix.O_RDONLY
}

// endWrite forgets h as a writer (at its release).
func (f *fsys) endWrite(h *wsFile) {
	if h.wcounted {
		f.wopen.remove(h.wkey)
		h.wcounted = false
	}
}
