package daemon

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/zerofs/zerofs/rewind"
)

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

// startDaemon runs this program again as the daemon (cfg.Args) in a new session, with
// its output appended to STORE/daemon.log, and waits for it to say the
// mount is ready. dir is the store's directory: a store the user may not
// trust is refused before anything is written in it, the log included.
func startDaemon(cfg Config, store string, dir *os.File) error {
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
	cmd := exec.Command(exe, cfg.Args...)
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
	s, err := waitReady(cfg.Stderr, cmd, rd, mountStallTimeout)
	if err != nil {
		return fmt.Errorf("%w (see %s)", err, logPath)
	}
	if s == "ok" {
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
func waitReady(stderr io.Writer, cmd *exec.Cmd, rd io.Reader, stall time.Duration) (string, error) {
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
				fmt.Fprintln(stderr, "zerofs: still opening the store (a long history is read and checked once); waiting")
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
