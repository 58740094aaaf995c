package history

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/zerofs/zerofs/control"
	"github.com/zerofs/zerofs/internal/proc"
	"github.com/zerofs/zerofs/internal/quote"
	"github.com/zerofs/zerofs/record"
)

// ErrNoWorkspace: no directory from the start up to / holds a zerofs store
// or control directory (Find returns a *NoWorkspaceError that matches it).
var ErrNoWorkspace = errors.New("history: not in a zerofs workspace")

// NoWorkspaceError is Find's failure: nothing from Start up is a workspace.
type NoWorkspaceError struct{ Start string }

func (e *NoWorkspaceError) Error() string {
	return fmt.Sprintf("not in a zerofs workspace (no .zero in %s or above)", e.Start)
}

func (e *NoWorkspaceError) Is(target error) bool { return target == ErrNoWorkspace }

// ErrNotYours: the nearest workspace is a mount of another user, whose
// control files (all but head) only that user and root may use.
var ErrNotYours = errors.New("history: mounted by another user")

// NotYoursError is Find's failure at another user's mount (matches
// ErrNotYours).
type NotYoursError struct{ Root string }

func (e *NotYoursError) Error() string {
	return fmt.Sprintf("%s is mounted by another user: only that user and root may use its history", e.Root)
}

func (e *NotYoursError) Is(target error) bool { return target == ErrNotYours }

// ErrInUse: the store's lock is held by a running zerofs, so the history
// must be read through its mount (Open returns an *InUseError).
var ErrInUse = errors.New("history: store in use")

// InUseError names the store in use and, when its pid file tells, the
// daemon (PID 0 when unknown).
type InUseError struct {
	Store string
	PID   int
}

func (e *InUseError) Error() string {
	if e.PID > 0 {
		return fmt.Sprintf("store %s is in use by a running zerofs (pid %d); run the command inside its mount", e.Store, e.PID)
	}
	return fmt.Sprintf("store %s is in use by a running zerofs; run the command inside its mount", e.Store)
}

func (e *InUseError) Is(target error) bool { return target == ErrInUse }

// A Workspace is a zerofs workspace found from some directory, the way git
// finds .git: the nearest ancestor with a .zero that is either a mount's
// control directory or a store on disk.
type Workspace struct {
	// Root is the workspace's root as the caller sees it: the mount's root
	// when mounted, else the workspace directory itself.
	Root string
	// Mounted is true when Root/.zero is a live control directory: the
	// history is then read through it and the @T/ views.
	Mounted bool
	// Status is the daemon's .zero/status when Mounted.
	Status control.StatusReport
	// Store is the store directory when not Mounted (Root/.zero).
	Store string
}

// Find walks up from dir to the nearest workspace.
func Find(dir string) (*Workspace, error) {
	start, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	for d := start; ; {
		if ws, ok := At(d); ok {
			return ws, nil
		}
		if othersMount(d) {
			return nil, &NotYoursError{Root: d}
		}
		parent := filepath.Dir(d)
		if parent == d {
			return nil, &NoWorkspaceError{Start: start}
		}
		d = parent
	}
}

// At reports whether d is a workspace root, mounted or not.
func At(d string) (*Workspace, bool) {
	zero := filepath.Join(d, control.Dir)
	if fi, err := os.Stat(zero); err != nil || !fi.IsDir() {
		return nil, false
	}
	if st, ok := ReadStatus(d); ok {
		return &Workspace{Root: d, Mounted: true, Status: st}, true
	}
	if _, err := os.Stat(filepath.Join(zero, record.LogName)); err == nil {
		return &Workspace{Root: d, Store: zero}, true
	}
	return nil, false
}

// othersMount reports whether d is the root of a mount whose control files
// refuse this user: head answers, status is permission denied.
func othersMount(d string) bool {
	zero := filepath.Join(d, control.Dir)
	if _, err := os.ReadFile(filepath.Join(zero, control.Head)); err != nil {
		return false
	}
	_, err := os.ReadFile(filepath.Join(zero, control.Status))
	return errors.Is(err, os.ErrPermission)
}

// ReadStatus reads a mount's control files under root. Both head and
// status must answer: a .zero on disk has neither, so a stray file cannot
// pass for a mount.
func ReadStatus(root string) (control.StatusReport, bool) {
	zero := filepath.Join(root, control.Dir)
	if _, err := os.ReadFile(filepath.Join(zero, control.Head)); err != nil {
		return control.StatusReport{}, false
	}
	b, err := os.ReadFile(filepath.Join(zero, control.Status))
	if err != nil {
		return control.StatusReport{}, false
	}
	st, err := control.ParseStatus(b)
	return st, err == nil
}

// RelPath turns a path the user typed into a workspace path (slash
// separated, "" for the root): absolute paths must lie in the workspace;
// relative ones are taken from cwd.
func (ws *Workspace) RelPath(cwd, p string) (string, error) {
	abs := p
	if !filepath.IsAbs(p) {
		abs = filepath.Join(cwd, p)
	}
	rel, err := filepath.Rel(ws.Root, filepath.Clean(abs))
	if err != nil || rel == ".." || strings.HasPrefix(rel, "../") {
		return "", fmt.Errorf("%s is outside the workspace %s", quote.Name(p), quote.Name(ws.Root))
	}
	if rel == "." {
		return "", nil
	}
	return filepath.ToSlash(rel), nil
}

// CwdRel is cwd relative to the workspace root ("" at the root or outside).
func (ws *Workspace) CwdRel(cwd string) string {
	rel, err := ws.RelPath(cwd, ".")
	if err != nil {
		return ""
	}
	return rel
}

// StoreDir is where ws's store is on disk, for the read-only uses (status,
// verify) that look at the files a daemon keeps.
func (ws *Workspace) StoreDir() (string, error) {
	if !ws.Mounted {
		return ws.Store, nil
	}
	return mountedStore(ws.Status)
}

// StoreName names the store the way the user knows it, not by the /proc
// path used to reach it under an in-place mount.
func (ws *Workspace) StoreName(store string) string {
	if ws.Mounted && ws.Status.Store != "" {
		return ws.Status.Store
	}
	return store
}

// mountedStore finds a mounted workspace's store. A store inside an
// in-place mount is hidden under the mount (its name shows the control
// directory instead), so it is reached through the daemon's own open
// descriptors: /proc/PID/fd/N of the workspace's root directory leads to
// the directory on the backing filesystem, beneath the mount.
func mountedStore(st control.StatusReport) (string, error) {
	store := st.Store
	if rest, ok := strings.CutPrefix(store, "/proc/self/"); ok {
		store = fmt.Sprintf("/proc/%d/%s", st.PID, rest)
	}
	if isStore(store) {
		return store, nil
	}
	fdDir := fmt.Sprintf("/proc/%d/fd", st.PID)
	ents, err := os.ReadDir(fdDir)
	if err != nil {
		return "", fmt.Errorf("cannot reach the store %s of the mount (daemon pid %d): %w", st.Store, st.PID, err)
	}
	rel, relErr := filepath.Rel(st.Workspace, st.Store)
	for _, e := range ents {
		fd := filepath.Join(fdDir, e.Name())
		target, err := os.Readlink(fd)
		if err != nil {
			continue
		}
		var cand string
		switch {
		case target == st.Store:
			cand = fd
		case target == st.Workspace && relErr == nil && !strings.HasPrefix(rel, ".."):
			cand = filepath.Join(fd, rel)
		default:
			continue
		}
		if isStore(cand) {
			return cand, nil
		}
	}
	return "", fmt.Errorf("cannot reach the store %s of the mount (daemon pid %d)", st.Store, st.PID)
}

// isStore reports whether dir holds an event log (and is not a control
// directory, which has "log" instead).
func isStore(dir string) bool {
	fi, err := os.Stat(filepath.Join(dir, record.LogName))
	return err == nil && fi.Mode().IsRegular()
}

// DaemonPID is the pid in STORE/daemon.pid while that daemon runs, or 0:
// the process must have the start time the file records, so a killed
// daemon's file never names whatever process got its pid since.
func DaemonPID(store string) int {
	b, err := os.ReadFile(filepath.Join(store, control.PIDFileName))
	if err != nil {
		return 0
	}
	pid, start, err := control.ParsePIDFile(b)
	if err != nil || !proc.Same(pid, start) {
		return 0
	}
	return pid
}

// ProcessAlive reports whether process pid exists and is not a zombie (a
// daemon that exited but whose parent has not reaped it is gone for us).
// A zombie thread-group leader whose other threads are still exiting is
// alive: they still hold the process's descriptors, the store's lock
// among them (a daemon killed with -9 shows its leader as a zombie while a
// thread finishes a request, and the next mount found the store locked).
func ProcessAlive(pid int) bool {
	if err := unix.Kill(pid, 0); err != nil && !errors.Is(err, unix.EPERM) {
		return false
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// The state follows the command name, which is in parentheses and
	// may itself contain ") ".
	i := bytes.LastIndexByte(b, ')')
	if i < 0 || i+2 >= len(b) {
		return true
	}
	if b[i+2] != 'Z' && b[i+2] != 'X' {
		return true
	}
	tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	return err == nil && len(tasks) > 1
}
