package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	rtdebug "runtime/debug"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/zerofs/zerofs/control"
	zfs "github.com/zerofs/zerofs/fs"
	"github.com/zerofs/zerofs/history"
	"github.com/zerofs/zerofs/internal/proc"
	"github.com/zerofs/zerofs/record"
	"github.com/zerofs/zerofs/replicate"
	"github.com/zerofs/zerofs/rewind"
)

var mountCmd = &command{
	name:    "mount",
	usage:   "mount [flags] WORKSPACE [MOUNTPOINT]",
	summary: "mount (in place when MOUNTPOINT is omitted); returns once ready",
	help: `Flags:
  -f, --foreground       stay in the foreground; Ctrl-C or SIGTERM unmounts cleanly
  --store DIR            store location (default WORKSPACE/.zero)
  --auto-step DURATION   begin a new step after this much idle time (0: only explicit steps)
  --allow-other          let other users use the mount (their permissions still apply)
  --sync always|batch    when captures reach stable storage (default batch)
  --max-store-size SIZE  keep the store (log and blobs) under SIZE (e.g. 20G, 512M):
                         at a step boundary that finds it larger, the oldest
                         history is pruned (a history_pruned event says what
                         went); 0: no bound
  --replicate URL        copy the history to s3://BUCKET/PREFIX as it is made
                         (see 'zerofs help replicate'); the workspace never
                         waits for it
  --replica-key FILE     seal what --replicate uploads with this key
  --no-open              serve files without OPEN, RELEASE and FLUSH requests: a
                         warm read of a tree costs no request per file; no
                         passthrough; .zero is a mount of its own (docs/performance.md)
  --rename-records       record a directory's rename as one record instead of a
                         capture of everything beneath it (on by default;
                         --rename-records=false turns it off; docs/performance.md)
  --ignore PATTERN       never capture or rewind the paths PATTERN matches
                         (gitignore syntax, after .zeroignore's patterns;
                         repeatable; for this mount only: lasting patterns
                         go in .zeroignore; docs/guide.md)
  --debug                log every FUSE request

Without -f, zerofs starts itself again as a daemon (its log goes to
STORE/daemon.log, its pid to STORE/daemon.pid) and returns once the mount is
ready, or exits 1 with the daemon's reason.
`,
	run: runMount,
}

// readyFDEnv names the descriptor on which a daemon started by `zerofs
// mount` reports "ok" or its failure to the parent waiting for it.
const readyFDEnv = "ZEROFS_READY_FD"

// mountStallTimeout bounds how long the parent waits for a daemon that
// does no work. There is no bound on the whole wait: the first mount of a
// long history without its index snapshot (after an upgrade, or when the
// snapshot was damaged) reads and checks the whole log, which takes
// seconds on a quiet machine and minutes on a loaded one, and killing it
// would only make the next attempt start over.
var mountStallTimeout = 60 * time.Second

// mountNoteAfter is when a waiting mount tells the user what it waits for.
var mountNoteAfter = 5 * time.Second

type mountFlags struct {
	foreground    bool
	store         string
	autoStep      time.Duration
	allowOther    bool
	sync          string
	debug         bool
	maxStore      string
	replicate     string
	replicaKey    string
	noOpen        bool
	renameRecords bool
	ignore        patternsValue
}

func runMount(e *env, c *command, args []string) error {
	var mf mountFlags
	fs := newFlags(c)
	fs.BoolVar(&mf.foreground, "f", false, "")
	fs.BoolVar(&mf.foreground, "foreground", false, "")
	fs.StringVar(&mf.store, "store", "", "")
	fs.Var(durationValue{&mf.autoStep}, "auto-step", "")
	fs.BoolVar(&mf.allowOther, "allow-other", false, "")
	fs.StringVar(&mf.sync, "sync", "batch", "")
	fs.BoolVar(&mf.debug, "debug", false, "")
	fs.BoolVar(&mf.noOpen, "no-open", false, "")
	fs.BoolVar(&mf.renameRecords, "rename-records", true, "")
	fs.Var(&mf.ignore, "ignore", "")
	fs.StringVar(&mf.maxStore, "max-store-size", "0", "")
	fs.StringVar(&mf.replicate, "replicate", "", "")
	fs.StringVar(&mf.replicaKey, "replica-key", "", "")
	pos, rest, err := parseArgs(c, fs, args)
	if err != nil {
		return err
	}
	pos = append(pos, rest...)
	if len(pos) < 1 || len(pos) > 2 {
		return usagef(c, "want WORKSPACE and optionally MOUNTPOINT")
	}
	if mf.sync != "always" && mf.sync != "batch" {
		return usagef(c, "--sync must be always or batch, not %q", mf.sync)
	}
	if mf.autoStep < 0 {
		return usagef(c, "--auto-step must not be negative")
	}
	maxStore, err := parseSize(mf.maxStore)
	if err != nil {
		return usagef(c, "--max-store-size: %v", err)
	}
	if mf.replicate != "" {
		if _, err := replicate.ParseURL(mf.replicate); err != nil {
			return usagef(c, "--replicate: %v", err)
		}
	}
	if mf.replicaKey != "" {
		if mf.replicate == "" {
			return usagef(c, "--replica-key goes with --replicate")
		}
		if !filepath.IsAbs(mf.replicaKey) {
			mf.replicaKey = filepath.Join(e.cwd, mf.replicaKey)
		}
		if _, err := replicate.ReadKey(mf.replicaKey); err != nil {
			return err
		}
	}
	abs := func(p string) string {
		if p == "" || filepath.IsAbs(p) {
			return filepath.Clean(p)
		}
		return filepath.Join(e.cwd, p)
	}
	opts := zfs.Options{
		Workspace:       abs(pos[0]),
		StoreDir:        abs(mf.store),
		Sync:            mf.sync == "always",
		AutoStep:        mf.autoStep,
		AllowOther:      mf.allowOther,
		Debug:           mf.debug,
		MaxStore:        maxStore,
		NoOpen:          mf.noOpen,
		NoRenameRecords: !mf.renameRecords,
		Ignore:          mf.ignore,
	}
	if opts.StoreDir == "." {
		opts.StoreDir = ""
	}
	if len(pos) == 2 {
		opts.Mountpoint = abs(pos[1])
	}
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
	replaced, err := detachDead(e, store, opts.Workspace, mp)
	if err != nil {
		return err
	}
	if fi, err := os.Stat(opts.Workspace); err != nil {
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
	if again, err := detachDead(e, store, opts.Workspace, mp); err != nil {
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
	if mf.foreground {
		return mountForeground(e, opts, store, dir, mf.debug, mf.replicate, mf.replicaKey)
	}
	defer dir.Close()
	if err := startDaemon(e, daemonArgs(mf, opts), store, dir); err != nil {
		return err
	}
	warnIgnoreUnused(e, mp)
	return nil
}

// deadDaemonTimeout bounds the wait for a killed daemon to finish exiting.
const deadDaemonTimeout = 10 * time.Second

// detachDead detaches every dead zerofs mount at the given paths (stacked ones
// included) and says so on stderr. A live mount is left alone (the caller
// refuses to mount over a zerofs one); one that does not answer at all is
// an error, unless the daemon store names is gone: then its connection is
// aborted first (probeOrAbort). It reports whether it detached anything.
func detachDead(e *env, store string, paths ...string) (bool, error) {
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
			alive, err := probeOrAbort(e, p, topmost(ms).minor, store)
			if err != nil {
				return detached, err
			}
			if alive {
				break
			}
			if err := zfs.Detach(p); err != nil {
				return detached, fmt.Errorf("%s: detaching the dead mount a killed zerofs left: %w", p, err)
			}
			fmt.Fprintf(e.stderr, "zerofs: %s: replacing the dead mount a killed zerofs left\n", p)
			detached = true
		}
	}
	return detached, nil
}

// daemonArgs is the daemon's command line: the parsed flags with absolute
// paths, so that it can run from "/" and pin no directory.
func daemonArgs(mf mountFlags, opts zfs.Options) []string {
	args := []string{"mount", "--foreground", "--sync=" + mf.sync, "--auto-step=" + mf.autoStep.String()}
	if opts.StoreDir != "" {
		args = append(args, "--store="+opts.StoreDir)
	}
	if mf.allowOther {
		args = append(args, "--allow-other")
	}
	if mf.debug {
		args = append(args, "--debug")
	}
	if mf.noOpen {
		args = append(args, "--no-open")
	}
	if !mf.renameRecords {
		args = append(args, "--rename-records=false")
	}
	for _, p := range mf.ignore {
		args = append(args, "--ignore="+p)
	}
	if opts.MaxStore > 0 {
		args = append(args, "--max-store-size="+strconv.FormatInt(opts.MaxStore, 10))
	}
	if mf.replicate != "" {
		args = append(args, "--replicate="+mf.replicate)
	}
	if mf.replicaKey != "" {
		args = append(args, "--replica-key="+mf.replicaKey)
	}
	args = append(args, "--", opts.Workspace)
	if opts.Mountpoint != "" {
		args = append(args, opts.Mountpoint)
	}
	return args
}

// startDaemon runs this program again as `mount -f` in a new session, with
// its output appended to STORE/daemon.log, and waits for it to say the
// mount is ready. dir is the store's directory: a store the user may not
// trust is refused before anything is written in it, the log included.
func startDaemon(e *env, args []string, store string, dir *os.File) error {
	if err := rewind.CheckStoreDir(int(dir.Fd()), store); err != nil {
		return err
	}
	logPath := filepath.Join(store, daemonLogName)
	logf, err := openDaemonLog(dir, logPath)
	if err != nil {
		return err
	}
	defer logf.Close()
	logStart, _ := logf.Seek(0, io.SeekEnd)
	devnull, err := os.Open(os.DevNull)
	if err != nil {
		return err
	}
	defer devnull.Close()
	rd, wr, err := os.Pipe()
	if err != nil {
		return err
	}
	defer rd.Close()
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	cmd := exec.Command(exe, args...)
	cmd.Dir = "/"
	cmd.Stdin, cmd.Stdout, cmd.Stderr = devnull, logf, logf
	cmd.ExtraFiles = []*os.File{wr} // fd 3
	cmd.Env = append(os.Environ(), readyFDEnv+"=3")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		wr.Close()
		return err
	}
	wr.Close()
	s, err := waitReady(e, cmd, rd, mountStallTimeout)
	if err != nil {
		return fmt.Errorf("%w (see %s)", err, logPath)
	}
	if s == "ok" {
		warnBacking(e)
		return cmd.Process.Release()
	}
	cmd.Wait()
	if s == "" {
		return fmt.Errorf("the zerofs daemon exited before the mount was ready (see %s)", logPath)
	}
	if why := helperSaid(logf, logStart); why != "" {
		s += ": " + why
	}
	return fmt.Errorf("%s (see %s)", s, logPath)
}

// helperSaid is what the helpers the daemon ran (fusermount) wrote to its
// log since offset: they report on stderr, which is the log, and go-fuse
// only passes on their exit code ("fusermount exited with code 256"). The
// daemon's own lines (slog's "time=...") are left out.
func helperSaid(log *os.File, offset int64) string {
	b, _ := io.ReadAll(io.NewSectionReader(log, offset, 64<<10))
	var said []string
	for l := range strings.Lines(string(b)) {
		l = strings.TrimSpace(l)
		if l == "" || strings.HasPrefix(l, "time=") || strings.HasPrefix(l, "zerofs:") {
			continue
		}
		said = append(said, l)
	}
	return strings.Join(said, "; ")
}

// waitReady reads the daemon's one line from rd. It waits as long as the
// daemon works (its CPU time or the bytes it has read go up): a daemon
// that did nothing for stall is killed and reported. After mountNoteAfter
// it tells the user what it is waiting for, once.
func waitReady(e *env, cmd *exec.Cmd, rd io.Reader, stall time.Duration) (string, error) {
	line := make(chan string, 1)
	go func() {
		s, _ := bufio.NewReader(rd).ReadString('\n')
		line <- strings.TrimSpace(s)
	}()
	tick := time.NewTicker(min(stall/4, time.Second))
	defer tick.Stop()
	start := time.Now()
	last, lastWork := start, work(cmd.Process.Pid)
	told := false
	for {
		select {
		case s := <-line:
			return s, nil
		case now := <-tick.C:
			if w := work(cmd.Process.Pid); w != lastWork {
				last, lastWork = now, w
			}
			if now.Sub(last) >= stall {
				cmd.Process.Kill()
				cmd.Wait()
				return "", fmt.Errorf("the zerofs daemon did no work for %v and did not get the mount ready", stall)
			}
			if !told && now.Sub(start) >= mountNoteAfter {
				told = true
				fmt.Fprintln(e.stderr, "zerofs: still opening the store (a long history is read and checked once); waiting")
			}
		}
	}
}

// work is a measure of what process pid has done so far: its CPU time in
// clock ticks and the bytes it has read, from /proc. It only needs to grow
// while the process works; it is empty once the process is gone.
func work(pid int) string {
	st, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	ioStat, _ := os.ReadFile(fmt.Sprintf("/proc/%d/io", pid))
	var cpu string
	// Fields 14 and 15 (utime, stime) follow the ")" that ends the command name.
	if i := bytes.LastIndexByte(st, ')'); i >= 0 {
		if f := strings.Fields(string(st[i+1:])); len(f) > 13 {
			cpu = f[11] + " " + f[12]
		}
	}
	var rchar string
	for l := range strings.SplitSeq(string(ioStat), "\n") {
		if v, ok := strings.CutPrefix(l, "rchar: "); ok {
			rchar = v
		}
	}
	return cpu + " " + rchar
}

// readyPipe is the parent's pipe when running as a daemon, else nil.
func readyPipe() *os.File {
	fd, err := strconv.Atoi(os.Getenv(readyFDEnv))
	if err != nil || fd < 3 {
		return nil
	}
	os.Unsetenv(readyFDEnv) // not for the children of the daemon's tools
	return os.NewFile(uintptr(fd), "ready")
}

// mountForeground mounts and serves until SIGINT or SIGTERM (then it
// unmounts cleanly: flush, unmount, close the store) or an unmount from
// outside.
func mountForeground(e *env, opts zfs.Options, store string, storeFD *os.File, debug bool, replicateURL, replicaKey string) (err error) {
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
			report(oneLine(err.Error()))
		}
	}()
	level := slog.LevelInfo
	if debug {
		level = slog.LevelDebug
	}
	logger := slog.New(slog.NewTextHandler(e.stderr, &slog.HandlerOptions{Level: level}))
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
	m, err := zfs.Mount(e.ctx, opts)
	if err != nil {
		storeFD.Close()
		return err
	}
	pidFile, perr := writePIDFile(storeFD)
	if perr != nil {
		logger.Warn("zerofs: cannot write the pid file", "err", perr)
	}
	defer pidFile.remove(logger)
	if replicateURL != "" {
		// The store's path may lead into the mount now: its descriptor
		// names it.
		d, err := startReplication(e, m.Engine(), replicateURL, replicaKey, "/proc/self/fd/"+strconv.Itoa(int(storeFD.Fd())), logger)
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
		logger.Info("zerofs: replicating", "url", replicateURL)
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

// parseSize reads a size in bytes with an optional binary suffix: 512K,
// 20M, 3G, 1T (also KiB, MiB, GiB, TiB, and B).
func parseSize(s string) (int64, error) {
	num := strings.TrimRight(s, "KMGTiBkmgtb")
	unit := strings.ToUpper(strings.TrimSuffix(strings.TrimSuffix(s[len(num):], "B"), "i"))
	n, err := strconv.ParseFloat(num, 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("bad size %q: want a number of bytes, optionally with K, M, G or T", s)
	}
	shift := map[string]uint{"": 0, "K": 10, "M": 20, "G": 30, "T": 40}
	sh, ok := shift[unit]
	if !ok {
		return 0, fmt.Errorf("bad size %q: unknown unit %q", s, s[len(num):])
	}
	return int64(n * float64(uint64(1)<<sh)), nil
}
