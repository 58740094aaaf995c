package daemon

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/sys/unix"

	zfs "github.com/zerofs/zerofs/fs"
	"github.com/zerofs/zerofs/history"
	"github.com/zerofs/zerofs/record"
)

// Config is what a mount is asked to be: the checked settings of `zerofs
// mount`, every path absolute.
type Config struct {
	// FS is the mount's settings: workspace, mount point, store, sync,
	// auto step, and the rest.
	FS zfs.Options
	// Foreground serves the mount in this process until SIGINT or SIGTERM
	// or an unmount from outside; otherwise Mount starts the daemon (Args)
	// and returns once its mount is ready.
	Foreground bool
	// Args is the command line that runs this program as the daemon of
	// this mount in the foreground (`mount --foreground ...`), every path
	// absolute: it runs from "/" and pins no directory.
	Args []string
	// Replicate is the s3:// URL the daemon replicates to (empty: none);
	// ReplicaKey the file of the key that seals what it uploads.
	Replicate, ReplicaKey string
	// Stderr takes what the user is told along the way (dead mounts
	// replaced, a long wait) and, in the foreground, the daemon's log.
	Stderr io.Writer
}

// Mount mounts cfg.FS's workspace: it replaces a dead mount a killed
// daemon left at the workspace or the mount point, refuses a live zerofs
// mount there or a store a running daemon holds, opens the store beneath
// its descriptor, and then serves the mount (Foreground) or starts the
// daemon that does and waits until its mount is ready, or returns the
// daemon's reason.
func Mount(ctx context.Context, cfg Config) error {
	if cfg.Stderr == nil {
		cfg.Stderr = io.Discard
	}
	opts := cfg.FS
	mp := opts.Mountpoint
	if mp == "" {
		mp = opts.Workspace
	}
	store := opts.StoreDir
	if store == "" {
		store = filepath.Join(opts.Workspace, record.StoreName)
	}
	// A killed daemon leaves its mount behind, dead: every access to it
	// fails with ENOTCONN, the in-place workspace's store included (or,
	// when it died waiting on its own mount, hangs: hung.go).
	// Replace it rather than fail on it or stack a new mount over it.
	replaced, err := detachDead(cfg.Stderr, store, opts.Workspace, mp)
	if err != nil {
		return err
	}
	// A daemon killed a moment ago can still answer the probe (a thread
	// finishing a reply) and be gone by this stat, which then fails on its
	// dead mount: look again before giving up.
	fi, err := os.Stat(opts.Workspace)
	if errors.Is(err, unix.ENOTCONN) || errors.Is(err, unix.ECONNABORTED) {
		again, derr := detachDead(cfg.Stderr, store, opts.Workspace, mp)
		if derr != nil {
			return derr
		}
		replaced = replaced || again
		fi, err = os.Stat(opts.Workspace)
	}
	if err != nil {
		return err
	} else if !fi.IsDir() {
		return fmt.Errorf("%s is not a directory", opts.Workspace)
	}
	// Refuse before touching anything: under a live in-place mount, the
	// store's path leads into the control directory.
	for _, p := range []string{opts.Workspace, mp} {
		if st, ok := history.ReadStatus(p); ok {
			return fmt.Errorf("%s is already mounted by zerofs (pid %d at %s)", p, st.PID, st.Mountpoint)
		}
	}
	// A daemon killed a moment ago can still answer the first probe (a
	// thread finishing a reply) and be gone by the status read: look again,
	// so that its dead mount is replaced too, not mounted over.
	if again, err := detachDead(cfg.Stderr, store, opts.Workspace, mp); err != nil {
		return err
	} else if again {
		replaced = true
	}
	if pid := history.DaemonPID(store); pid > 0 && replaced {
		// The dead mount's daemon was just killed and may not have
		// finished exiting (it still holds the store's lock).
		deadline := time.Now().Add(deadDaemonTimeout)
		for history.ProcessAlive(pid) && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
	}
	if pid := history.DaemonPID(store); pid > 0 {
		return fmt.Errorf("store %s is in use by a running zerofs (pid %d)", store, pid)
	}
	// Everything in the store is reached beneath its descriptor, with no
	// symlink followed (storeopen.go).
	dir, err := openStoreDir(opts, store)
	if err != nil {
		return err
	}
	if cfg.Foreground {
		return serve(ctx, cfg, store, dir)
	}
	defer dir.Close()
	return startDaemon(cfg, store, dir)
}

// deadDaemonTimeout bounds the wait for a killed daemon to finish exiting.
const deadDaemonTimeout = 10 * time.Second

// detachDead detaches every dead zerofs mount at the given paths (stacked ones
// included) and says so on stderr. A live mount is left alone (the caller
// refuses to mount over a zerofs one); one that does not answer at all is
// an error, unless the daemon store names is gone: then its connection is
// aborted first (probeOrAbort). It reports whether it detached anything.
func detachDead(stderr io.Writer, store string, paths ...string) (bool, error) {
	detached := false
	for i, p := range paths {
		if i > 0 && p == paths[0] {
			continue
		}
		for range 16 {
			ms, err := fuseMountsAt(p)
			if err != nil || len(ms) == 0 || topmost(ms).fstype != zerofsType {
				break // none, or another filesystem's: not ours to take
			}
			alive, err := probeOrAbort(stderr, p, topmost(ms).minor, store)
			if err != nil {
				return detached, err
			}
			if alive {
				break
			}
			if err := zfs.Detach(p); err != nil {
				return detached, fmt.Errorf("%s: detaching the dead mount a killed zerofs left: %w", p, err)
			}
			fmt.Fprintf(stderr, "zerofs: %s: replacing the dead mount a killed zerofs left\n", p)
			detached = true
		}
	}
	return detached, nil
}
