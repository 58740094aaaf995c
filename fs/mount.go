package fs

import (
	"context"
	"errors"
	"fmt"
	"log"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	fusefs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"github.com/moby/sys/mountinfo"
	"golang.org/x/sys/unix"

	"github.com/zerofs/zerofs/eventlog"
	"github.com/zerofs/zerofs/record"
	"github.com/zerofs/zerofs/rewind"
)

// Options configure Mount.
type Options struct {
	Workspace  string        // the backing directory
	Mountpoint string        // where to mount; "" means Workspace itself (in place)
	StoreDir   string        // "" means Workspace/.zero
	Sync       bool          // --sync always (default batch)
	AutoStep   time.Duration // 0: explicit steps only
	MaxStore   int64         // --max-store-size in bytes; 0: no bound
	AllowOther bool
	// NoPassthrough never hands reads and writes of workspace files to the
	// kernel (FUSE passthrough). Without it, passthrough is used where the
	// kernel offers it and the daemon may use it (root).
	NoPassthrough bool
	// NoOpen serves workspace files without OPEN, RELEASE and FLUSH
	// (noopen.go): the kernel keeps pages across opens and a warm read
	// of a tree sends no request per file. No passthrough then; .zero is
	// a mount of its own (ctlmount.go).
	NoOpen bool
	// NoRenameRecords captures a renamed directory's whole subtree, on
	// both sides, as before rename records. Without it (the default) a
	// directory's rename is one rename record (rewind.Options.
	// RenameRecords; --rename-records=false sets it).
	NoRenameRecords bool
	// Ignore are gitignore patterns (--ignore) applied after .zeroignore's
	// (rewind.Options.Ignore).
	Ignore []string
	// BeforeClose, when set, is called once serving has ended (the mount
	// takes no more changes, however it was unmounted) with the engine
	// still open, its removed files' stashes named and its log synced:
	// the history is final. The engine closes when it returns, and Wait
	// and Unmount return after that. The daemon makes its last
	// replication attempt here.
	BeforeClose func()
	// SelfOpens says this process itself opens files of the mount (a
	// test, a tool that mounts in-process). Go's runtime registers every
	// file it opens with its poller, and a POLL request from inside the
	// runtime can leave no thread to answer it: go-fuse's poll hack
	// (Server.WaitMount) then runs once at mount, so the kernel learns
	// that the mount does not poll. The daemon leaves it off: it never
	// holds a descriptor on a file of its own mount (see serve).
	SelfOpens bool
	Logger    *slog.Logger
	Debug     bool // go-fuse request tracing
}

// Mounted is a mounted workspace, as Mount returns it. (The brief named this
// type Mount too; Go does not allow a type and a function of the same name.)
type Mounted struct {
	fs     *fsys
	server *fuse.Server
	ctl    *fuse.Server // the control directory's own mount, NoOpen only (ctlmount.go)
	// ctlOnce: ctl is unmounted once.
	ctlOnce sync.Once
	dirs    *dirlessFS // directories without OPENDIR (opendir.go)
	root    *os.File   // the workspace root, opened before mounting
	store   *os.File   // the store directory, opened before mounting
	mp      string

	served    chan struct{} // closed when serving ended
	done      chan struct{} // closed when serving ended and the engine is closed
	closeOnce sync.Once
	closeErr  error // from closing the engine, set once
}

// Mount mounts the workspace and returns once the mount is ready.
func Mount(ctx context.Context, opts Options) (*Mounted, error) {
	logger := opts.Logger
	if logger == nil {
		logger = slog.Default()
	}
	ws, err := filepath.Abs(opts.Workspace)
	if err != nil {
		return nil, fmt.Errorf("fs: workspace: %w", err)
	}
	mp := ws
	if opts.Mountpoint != "" {
		if mp, err = filepath.Abs(opts.Mountpoint); err != nil {
			return nil, fmt.Errorf("fs: mountpoint: %w", err)
		}
	}
	storeDir := opts.StoreDir
	if storeDir == "" {
		storeDir = filepath.Join(ws, record.StoreName)
	}
	if storeDir, err = filepath.Abs(storeDir); err != nil {
		return nil, fmt.Errorf("fs: store: %w", err)
	}

	if opts.NoOpen && os.Geteuid() != 0 && !opts.AllowOther {
		// fusermount3 checks the mount point as root, and a FUSE mount
		// without allow_other refuses root (ctlmount.go).
		return nil, fmt.Errorf("fs: --no-open as an ordinary user needs --allow-other: fusermount3 mounts .zero inside the workspace's mount and must reach it as root")
	}
	// A dead zerofs left its mount behind: every access says ENOTCONN.
	for _, p := range []string{mp, ws} {
		if err := detachStale(p, logger); err != nil {
			return nil, err
		}
	}
	if isZerofsMount(ws) || isZerofsMount(mp) {
		return nil, fmt.Errorf("fs: %s is already mounted by zerofs", mp)
	}

	root, err := os.OpenFile(ws, os.O_RDONLY|syscall.O_DIRECTORY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("fs: open workspace: %w", err)
	}
	var rootSt unix.Stat_t
	if err := unix.Fstat(int(root.Fd()), &rootSt); err != nil {
		root.Close()
		return nil, fmt.Errorf("fs: stat workspace: %w", err)
	}
	// The engine reaches the store through this descriptor: after an
	// in-place mount, the store's path leads into the mount. The default
	// store is opened beneath the workspace's descriptor, and a .zero that
	// is a symlink (the workspace's owner may plant one) is refused.
	var store *os.File
	if opts.StoreDir == "" {
		store, err = OpenStoreBeneath(root, record.StoreName)
	} else if err = os.MkdirAll(storeDir, 0o700); err == nil {
		store, err = os.OpenFile(storeDir, os.O_RDONLY|syscall.O_DIRECTORY|syscall.O_CLOEXEC, 0)
	}
	if err != nil {
		root.Close()
		return nil, fmt.Errorf("fs: open store %s: %w", storeDir, err)
	}
	writers := &writerSet{m: map[*wsFile]struct{}{}}
	wopen := newWriteOpens()
	eng, err := rewind.Open(ctx, root, rewind.Options{
		StoreDir:      procPath(int(store.Fd())),
		Sync:          opts.Sync,
		AutoStep:      opts.AutoStep,
		MaxStoreSize:  opts.MaxStore,
		Logger:        logger,
		OpenWriters:   writers.paths,
		OpenForWrite:  wopen.has,
		RenameRecords: !opts.NoRenameRecords,
		Ignore:        opts.Ignore,
	})
	if err != nil {
		root.Close()
		store.Close()
		if errors.Is(err, eventlog.ErrLocked) {
			return nil, fmt.Errorf("fs: store %s is in use by another zerofs: %w", storeDir, err)
		}
		return nil, fmt.Errorf("fs: open store %s: %w", storeDir, err)
	}

	f := &fsys{
		eng:        eng,
		ws:         backing{fd: int(root.Fd()), dev: rootSt.Dev},
		log:        logger,
		workspace:  ws,
		mountpoint: mp,
		store:      storeDir,
		sync:       opts.Sync,
		autoStep:   opts.AutoStep,
		uid:        uint32(os.Geteuid()),
		gid:        uint32(os.Getegid()),
		mtime:      time.Unix(rootSt.Mtim.Unix()),
		writers:    writers,
		wopen:      wopen,
		wsMnt:      mountID(int(root.Fd())),
		noOpen:     opts.NoOpen,
	}
	f.root = &wsNode{fs: f}
	f.xattrFree = probeXattrFree(int(root.Fd()))

	// Creates get exactly the mode the kernel sends, which already has the
	// caller's umask applied. This is process-wide.
	syscall.Umask(0)

	timeout := wsCacheTimeout
	fopts := &fusefs.Options{
		MountOptions: fuse.MountOptions{
			FsName:      "zerofs",
			Name:        "zerofs",
			DirectMount: true, // as root; falls back to fusermount3 otherwise
			AllowOther:  opts.AllowOther,
			Debug:       opts.Debug,
			MaxWrite:    1 << 20,
			// The kernel checks the caller's permissions against the
			// attributes we return; the daemon (root) then acts.
			Options: []string{"default_permissions"},
			// With long attribute timeouts the attributes READDIRPLUS
			// carries are already cached: plain READDIR is cheaper.
			DisableReadDirPlus: true,
			// The kernel enforces POSIX ACLs (read through Getxattr) as
			// a local filesystem does; without this it checks the mode
			// bits only, so an ACL entry granting a user access was
			// ignored under the mount.
			EnableAcl: true,
		},
		EntryTimeout:    &timeout,
		AttrTimeout:     &timeout,
		NullPermissions: true,
	}
	if opts.Debug {
		fopts.Logger = log.New(os.Stderr, "zerofs: ", 0)
	}
	// File locks are the kernel's: the mount does not ask for lock requests
	// (MountOptions.EnableLocks stays off), so the kernel keeps fcntl and
	// flock locks on its FUSE inodes with exactly a local file system's
	// semantics (a process's POSIX locks are one owner's whichever
	// descriptor took them and drop at any close; OFD and flock locks
	// belong to the open file; F_GETLK names the holder; EDEADLK), and a
	// close needs no FLUSH to drop them, which lets a read-only open skip
	// FLUSH altogether (FOPEN_NOFLUSH, file.go).
	server, dirs, err := serve(mp, f, fopts, opts.SelfOpens)
	if err != nil {
		eng.Close()
		root.Close()
		store.Close()
		return nil, fmt.Errorf("fs: mount %s: %w", mp, err)
	}
	if !opts.NoPassthrough && !opts.NoOpen {
		f.passthrough.Store(probePassthrough(server, int(store.Fd()), logger))
	}
	m := &Mounted{fs: f, server: server, dirs: dirs, root: root, store: store, mp: mp, served: make(chan struct{}), done: make(chan struct{})}
	if opts.NoOpen {
		if m.ctl, err = mountCtl(mp, f, fopts, opts.SelfOpens); err != nil {
			server.Unmount()
			server.Wait()
			eng.Close()
			root.Close()
			store.Close()
			return nil, err
		}
	}
	go func() {
		server.Wait()
		close(m.served)
		m.unmountCtl() // gone with the workspace's mount, unless it was not busy
		if opts.BeforeClose != nil {
			m.finalize(opts.BeforeClose)
		}
		m.close()
		close(m.done)
	}()
	return m, nil
}

// serve mounts f's root at mp and serves it: directories without OPENDIR
// where the kernel allows (dirlessFS), negative entries kept (negativeFS).
// selfOpens is Options.SelfOpens.
func serve(mp string, f *fsys, opts *fusefs.Options, selfOpens bool) (*fuse.Server, *dirlessFS, error) {
	// HANDLE_KILLPRIV_V2: the daemon clears set-id bits (killpriv.go), and
	// a write sends no GETXATTR of security.capability first.
	// ATOMIC_O_TRUNC: an O_TRUNC open truncates in its OPEN (killpriv.go).
	opts.MountOptions.ExtraCapabilities |= fuse.CAP_NO_OPENDIR_SUPPORT | fuse.CAP_HANDLE_KILLPRIV_V2
	if !f.noOpen {
		opts.MountOptions.ExtraCapabilities |= fuse.CAP_ATOMIC_O_TRUNC
	}
	nodes := &killprivFS{RawFileSystem: fusefs.NewNodeFS(f.root, opts)}
	raw := &dirlessFS{RawFileSystem: &openlessFS{RawFileSystem: nodes, on: f.noOpen, opens: &f.opens}}
	front := &negativeFS{RawFileSystem: raw, rw: &f.rw, timeout: *opts.EntryTimeout, missed: &f.missed}
	server, err := fuse.NewServer(front, mp, &opts.MountOptions)
	if err != nil {
		return nil, nil, err
	}
	// NewServer has mounted and answered INIT: the mount is ready once
	// Serve reads. Server.WaitMount adds only its poll hack, which opens
	// .go-fuse-epoll-hack through the new mount, and the daemon never
	// holds a descriptor on a file of its own mount: killed while holding
	// one, it would never finish exiting, since closing it sends a FLUSH
	// that only the dead daemon could answer. The hack is for a process
	// that opens files of its own mount (Options.SelfOpens); go-fuse
	// answers anyone else's POLL with ENOSYS.
	go server.Serve()
	if selfOpens {
		if err := server.WaitMount(); err != nil {
			server.Unmount()
			return nil, nil, err
		}
	}
	raw.negotiated(server)
	return server, raw, nil
}

// probePassthrough reports whether the kernel takes backing files on this
// connection: it offered FUSE passthrough (6.9+) and lets the daemon
// register one (CAP_SYS_ADMIN: root, not a fusermount3 mount). It registers
// the store's log, a regular file, and unregisters it again. Until it
// returns, opens do not use passthrough.
func probePassthrough(server *fuse.Server, storeFd int, logger *slog.Logger) bool {
	if server.KernelSettings().Flags64()&fuse.CAP_PASSTHROUGH == 0 {
		logger.Debug("zerofs: the kernel offers no FUSE passthrough")
		return false
	}
	fd, err := unix.Openat(storeFd, record.LogName, unix.O_RDONLY|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0)
	if err != nil {
		return false
	}
	defer unix.Close(fd)
	id, errno := server.RegisterBackingFd(&fuse.BackingMap{Fd: int32(fd)})
	if errno != 0 {
		logger.Debug("zerofs: FUSE passthrough not allowed", "err", errno)
		return false
	}
	if errno := server.UnregisterBackingFd(id); errno != 0 {
		logger.Warn("zerofs: unregistering a backing file", "err", errno)
	}
	return true
}

// mountID is the id of the mount fd is on (0 if the kernel does not say).
func mountID(fd int) uint64 {
	var st unix.Statx_t
	if err := unix.Statx(fd, "", unix.AT_EMPTY_PATH, unix.STATX_MNT_ID, &st); err != nil || st.Mask&unix.STATX_MNT_ID == 0 {
		return 0
	}
	return st.Mnt_id
}

// Passthrough reports whether opens of workspace files use FUSE
// passthrough on this mount.
func (m *Mounted) Passthrough() bool { return m.fs.passthrough.Load() }

// Mountpoint is where the workspace is mounted.
func (m *Mounted) Mountpoint() string { return m.mp }

// Engine is the engine under the mount.
func (m *Mounted) Engine() *rewind.Engine { return m.fs.eng }

// Wait returns when the file system is unmounted, by Unmount or from outside
// (umount(8)), and the engine is closed.
func (m *Mounted) Wait() { <-m.done }

// Served is closed once serving has ended, however it was unmounted: the
// mount takes no more changes, and Options.BeforeClose is about to run.
func (m *Mounted) Served() <-chan struct{} { return m.served }

// finalize makes the history final (what Close would append before
// closing: the removed files' stashes named; the log synced) and calls f.
func (m *Mounted) finalize(f func()) {
	if err := m.fs.eng.NameStashes(context.Background()); err != nil {
		m.fs.log.Warn("zerofs: naming stashes at unmount failed", "err", err)
	}
	if err := m.fs.eng.Sync(); err != nil {
		m.fs.log.Warn("zerofs: flush at unmount failed", "err", err)
	}
	f()
}

// close closes the engine and the descriptors, once.
func (m *Mounted) close() error {
	m.closeOnce.Do(func() {
		m.closeErr = m.fs.eng.Close()
		m.fs.fds.closeAll()
		m.fs.dirs.closeAll()
		m.fs.viewIO.closeAll()
		m.store.Close()
		m.root.Close()
	})
	return m.closeErr
}

// Unmount flushes the captures, unmounts (retrying while the kernel still
// thinks the mount is busy, then detaching it lazily and, if requests are
// still pending after that, aborting the connection), and closes the
// engine. Calling it again, or after an unmount from outside, only waits.
func (m *Mounted) Unmount() error {
	select {
	case <-m.done:
		return m.closeErr
	default:
	}
	if err := m.fs.eng.Sync(); err != nil {
		m.fs.log.Warn("zerofs: flush before unmount failed", "err", err)
	}
	m.unmountCtl()
	if err := m.server.Unmount(); err != nil {
		m.fs.log.Warn("zerofs: unmount failed, detaching", "mountpoint", m.mp, "err", err)
		// The connection, by the mount table: a stat of the mount point
		// would be a request to this daemon itself.
		minor, found := zerofsMountMinor(m.mp)
		if err := Detach(m.mp); err != nil && err != unix.EINVAL {
			return fmt.Errorf("fs: detach %s: %w", m.mp, err)
		}
		select {
		case <-m.served:
		case <-time.After(2 * time.Second):
			// Processes still hold files open in the detached mount:
			// end the connection so serving stops.
			if found {
				if err := AbortConnection(minor); err != nil {
					m.fs.log.Warn("zerofs: cannot abort the FUSE connection", "err", err)
				}
			}
			<-m.served
		}
	}
	<-m.done
	return m.closeErr
}

// abortConnection aborts the FUSE connection of device dev (AbortConnection),
// logging why it could not.
func abortConnection(dev uint64, logger *slog.Logger) {
	if err := AbortConnection(unix.Minor(dev)); err != nil {
		logger.Warn("zerofs: cannot abort the FUSE connection", "err", err)
	}
}

// detachStale detaches a dead mount at p: a FUSE mount whose daemon is gone
// answers every request with ENOTCONN. (statfs, unlike stat, is never
// answered from the kernel's attribute cache.)
func detachStale(p string, logger *slog.Logger) error {
	// Dead mounts may be stacked (each killed daemon left one); a request
	// that was waiting when the daemon died fails with ECONNABORTED.
	for range 16 {
		var st unix.Statfs_t
		if err := unix.Statfs(p, &st); err != unix.ENOTCONN && err != unix.ECONNABORTED {
			return nil
		}
		logger.Warn("zerofs: detaching a dead mount", "path", p)
		if err := Detach(p); err != nil {
			return fmt.Errorf("fs: detach dead mount %s: %w", p, err)
		}
	}
	return fmt.Errorf("fs: %s: dead mounts keep appearing", p)
}

// zerofsMountMinor is the device minor number (the FUSE connection) of the
// topmost zerofs mount at p, from /proc/self/mountinfo.
func zerofsMountMinor(p string) (uint32, bool) {
	infos, err := mountinfo.GetMounts(func(m *mountinfo.Info) (skip, stop bool) {
		return m.Mountpoint != p || m.FSType != "fuse.zerofs", false
	})
	if err != nil || len(infos) == 0 {
		return 0, false
	}
	return uint32(infos[len(infos)-1].Minor), true
}

// isZerofsMount reports whether p is the mount point of a live zerofs
// mount (in /proc/self/mountinfo).
func isZerofsMount(p string) bool {
	infos, err := mountinfo.GetMounts(func(m *mountinfo.Info) (skip, stop bool) {
		found := m.Mountpoint == p && m.FSType == "fuse.zerofs"
		return !found, found
	})
	return err == nil && len(infos) > 0
}
