package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"

	"golang.org/x/sys/unix"
)

// mounted is a running spike: its server, the transport the kernel agreed
// to, and its serving threads.
type mounted struct {
	srv       *server
	mp        string
	fd        int    // /dev/fuse
	transport string // "classic", or "uring" once every queue registered
	done      chan struct{}

	mu   sync.Mutex // guards errs
	errs []error    // why serving threads stopped, other than the unmount
	wg   sync.WaitGroup
}

// mount mounts backing at mp with mount(2), answers INIT, and starts the
// transport: uring asks for FUSE over io_uring and registers a queue per
// possible CPU; if INIT does not agree to it, or registration fails, the
// mount stays up on the classic transport and the error says why (the
// caller decides whether that is fatal).
func mount(backing, mp string, uring bool, readers int) (*mounted, error) {
	fd, err := unix.Open("/dev/fuse", unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("open /dev/fuse: %w", err)
	}
	data := fmt.Sprintf("fd=%d,rootmode=40000,user_id=0,group_id=0,default_permissions,allow_other,max_read=%d", fd, maxWrite)
	if err := unix.Mount(backing, mp, "fuse.uringspike", unix.MS_NOSUID|unix.MS_NODEV, data); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("mount %s: %w", mp, err)
	}
	m := &mounted{srv: newServer(backing), mp: mp, fd: fd, transport: "classic", done: make(chan struct{})}
	agreed, err := m.srv.initConn(fd, uring)
	if err != nil {
		m.abort()
		return nil, err
	}
	var startErr error
	if uring {
		readers = 1 // FORGET and INTERRUPT only
		switch {
		case !agreed:
			startErr = errors.New("uringspike: INIT did not agree to FUSE_OVER_IO_URING (enable_uring is N, or the kernel lacks it)")
		default:
			startErr = startRings(m.fd, &m.wg, m.srv.serveEntry, &m.srv.onRing, m.fail)
			if startErr == nil {
				m.transport = "uring"
			}
		}
	}
	for range readers {
		m.wg.Add(1)
		go func() {
			defer m.wg.Done()
			m.fail(m.srv.serveClassic(fd))
		}()
	}
	go func() { m.wg.Wait(); close(m.done) }()
	if startErr != nil && uring {
		return m, startErr
	}
	if err := pollHack(filepath.Join(mp, pollHackName)); err != nil {
		return m, err
	}
	return m, nil
}

// pollHack opens and polls a file of the new mount once, so that the
// kernel learns from the ENOSYS that it has no POLL before anyone else
// opens a file there. Go's runtime adds every file it opens to its epoll
// set; on a FUSE file that epoll_ctl sends a POLL and waits for the answer
// while holding the runtime's processor, so in a process that serves its
// own mount (the test) a stop-the-world can wait on a request only a
// stopped thread would answer. go-fuse's WaitMount does the same.
func pollHack(path string) error {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("poll hack: %w", err)
	}
	defer unix.Close(fd)
	if _, err := unix.Poll([]unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN | unix.POLLOUT}}, 0); err != nil {
		return fmt.Errorf("poll hack: %w", err)
	}
	return nil
}

// startRings starts a queue per possible CPU, each serving with serve,
// and waits until each has registered its entries or failed to; fail gets
// why a queue stopped serving later.
func startRings(fd int, wg *sync.WaitGroup, serve ringServer, served *ringCounts, fail func(error)) error {
	n, err := possibleCPUs()
	if err != nil {
		return err
	}
	ready := make(chan error, n)
	for qid := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			fail(serveQueue(fd, qid, serve, served, ready))
		}()
	}
	var errs []error
	for range n {
		if err := <-ready; err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func (m *mounted) fail(err error) {
	if err != nil {
		m.mu.Lock()
		m.errs = append(m.errs, err)
		m.mu.Unlock()
	}
}

// abort undoes a mount that never served: detach it (nothing has used it)
// and close the device, which ends the connection.
func (m *mounted) abort() {
	unix.Unmount(m.mp, unix.MNT_DETACH)
	unix.Close(m.fd)
}

// unmount unmounts (detaching if still busy), waits for every serving
// thread to see the connection end, and closes the device.
func (m *mounted) unmount() error {
	err := unmountOrDetach(m.mp)
	<-m.done
	unix.Close(m.fd)
	m.mu.Lock()
	defer m.mu.Unlock()
	return errors.Join(append([]error{err}, m.errs...)...)
}

// unmountOrDetach unmounts mp, detaching it instead if it is busy; an
// mp no longer mounted (EINVAL) is no error.
func unmountOrDetach(mp string) error {
	err := unix.Unmount(mp, 0)
	if err == nil || err == unix.EINVAL {
		return nil
	}
	if derr := unix.Unmount(mp, unix.MNT_DETACH); derr != nil {
		return errors.Join(err, derr)
	}
	return fmt.Errorf("unmount %s: %w (detached instead)", mp, err)
}

// setEnableURing writes /sys/module/fuse/parameters/enable_uring and
// returns what it held before.
func setEnableURing(on bool) (was bool, err error) {
	const p = "/sys/module/fuse/parameters/enable_uring"
	b, err := os.ReadFile(p)
	if err != nil {
		return false, err
	}
	was = len(b) > 0 && b[0] == 'Y'
	v := "N"
	if on {
		v = "Y"
	}
	return was, os.WriteFile(p, []byte(v), 0)
}

func restoreEnableURing(was bool) error {
	_, err := setEnableURing(was)
	return err
}
