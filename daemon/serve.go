package daemon

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	rtdebug "runtime/debug"
	"strconv"
	"sync/atomic"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/zerofs/zerofs/control"
	zfs "github.com/zerofs/zerofs/fs"
	"github.com/zerofs/zerofs/internal/proc"
	"github.com/zerofs/zerofs/internal/quote"
)

// readyPipe is the parent's pipe when running as a daemon, else nil.
func readyPipe() *os.File {
	fd, err := strconv.Atoi(os.Getenv(readyFDEnv))
	if err != nil || fd < 3 {
		return nil
	}
	os.Unsetenv(readyFDEnv) // not for the children of the daemon's tools
	return os.NewFile(uintptr(fd), "ready")
}

// serve mounts and serves until SIGINT or SIGTERM (then it unmounts
// cleanly: flush, unmount, close the store) or an unmount from outside.
// storeFD is the store's descriptor, which serve owns.
func serve(ctx context.Context, cfg Config, store string, storeFD *os.File) (err error) {
	opts := cfg.FS
	ready := readyPipe()
	report := func(msg string) {
		if ready != nil {
			io.WriteString(ready, msg+"\n")
			ready.Close()
			ready = nil
		}
	}
	defer func() {
		if err != nil {
			report(quote.Line(err.Error()))
		}
	}()
	level := slog.LevelInfo
	if opts.Debug {
		level = slog.LevelDebug
	}
	logger := slog.New(slog.NewTextHandler(cfg.Stderr, &slog.HandlerOptions{Level: level}))
	opts.Logger = logger

	// Signals are caught from the start, so one that arrives while mounting
	// still unmounts cleanly afterwards.
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(sigs)

	// storeFD, the store's descriptor, was taken before the mount hides
	// its path.

	// The last replication attempt runs once the mount takes no more
	// changes and the engine's log is synced, before the engine closes
	// (an unmount by umount, a signal, or from outside alike). A second
	// SIGINT or SIGTERM abandons it.
	var repl atomic.Pointer[daemonReplication]
	opts.BeforeClose = func() {
		d := repl.Load()
		if d == nil {
			return
		}
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		finished := make(chan struct{})
		defer close(finished)
		go func() {
			select {
			case s := <-sigs:
				logger.Info("zerofs: abandoning the last replication attempt", "signal", s.String())
				cancel()
			case <-finished:
			}
		}()
		d.final(ctx, finalReplicationTimeout)
	}
	m, err := zfs.Mount(ctx, opts)
	if err != nil {
		storeFD.Close()
		return err
	}
	pidFile, perr := writePIDFile(storeFD)
	if perr != nil {
		logger.Warn("zerofs: cannot write the pid file", "err", perr)
	}
	defer pidFile.remove(logger)
	if cfg.Replicate != "" {
		// The store's path may lead into the mount now: its descriptor
		// names it.
		d, err := startReplication(ctx, m.Engine(), cfg.Replicate, cfg.ReplicaKey, "/proc/self/fd/"+strconv.Itoa(int(storeFD.Fd())), logger)
		if err != nil {
			if uerr := m.Unmount(); uerr != nil {
				logger.Warn("zerofs: unmount after a failed start", "err", uerr)
			}
			return err
		}
		// Ended by its last attempt, before the unmount closes the
		// engine it reads (opts.BeforeClose); stopped here only if the
		// mount ended before it was set.
		repl.Store(d)
		defer d.stop()
		logger.Info("zerofs: replicating", "url", cfg.Replicate)
	}
	logger.Info("zerofs: mounted", "workspace", opts.Workspace, "mountpoint", m.Mountpoint(), "store", store, "pid", os.Getpid())
	report("ok")
	// Opening a long history allocates transient memory (reading the
	// index snapshot and the log's tail) that the daemon, which lives for
	// days, would otherwise keep in its RSS until the runtime's scavenger
	// gets to it.
	rtdebug.FreeOSMemory()

	// Waiting for serving to end, not for the engine to close: from then
	// on a signal is the last replication attempt's (BeforeClose) alone.
	select {
	case s := <-sigs:
		logger.Info("zerofs: unmounting", "signal", s.String())
		if err := m.Unmount(); err != nil {
			return fmt.Errorf("unmount %s: %w", m.Mountpoint(), err)
		}
	case <-m.Served():
		logger.Info("zerofs: unmounted from outside", "mountpoint", m.Mountpoint())
		m.Wait()
		if err := m.Unmount(); err != nil { // only reports the engine's close
			return err
		}
	}
	logger.Info("zerofs: unmounted cleanly", "mountpoint", m.Mountpoint())
	return nil
}

// pidFile is STORE/daemon.pid, reached through a descriptor of the store
// opened before the mount: after an in-place mount the store's path leads
// into the mount.
type pidFile struct {
	dir *os.File
}

// writePIDFile writes the pid into dir, which it then owns.
func writePIDFile(dir *os.File) (*pidFile, error) {
	fd, err := unix.Openat(int(dir.Fd()), control.PIDFileName, unix.O_WRONLY|unix.O_CREAT|unix.O_TRUNC|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0o600)
	if err != nil {
		dir.Close()
		return nil, err
	}
	f := os.NewFile(uintptr(fd), control.PIDFileName)
	_, werr := f.Write(control.FormatPIDFile(os.Getpid(), proc.SelfStart()))
	f.Close()
	if werr != nil {
		dir.Close()
		return nil, werr
	}
	return &pidFile{dir: dir}, nil
}

func (p *pidFile) remove(logger *slog.Logger) {
	if p == nil {
		return
	}
	if err := unix.Unlinkat(int(p.dir.Fd()), control.PIDFileName, 0); err != nil && !errors.Is(err, unix.ENOENT) {
		logger.Warn("zerofs: cannot remove the pid file", "err", err)
	}
	p.dir.Close()
}
