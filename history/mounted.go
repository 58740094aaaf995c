package history

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/zerofs/zerofs/control"
	"github.com/zerofs/zerofs/eventlog"
	"github.com/zerofs/zerofs/internal/quote"
	"github.com/zerofs/zerofs/internal/wsdir"
	"github.com/zerofs/zerofs/record"
	"github.com/zerofs/zerofs/rewind"
)

// mountSource reads a mounted workspace through its control directory and
// @T/ views. It never touches the store: the daemon owns it.
//
// Every path is resolved the way the engine resolves it: from a descriptor
// of the mount's root (or of the view @T), with openat2 confined beneath it
// and refusing every symlink, and the final component used with *at calls
// that never follow it. A symlink in the workspace (now or at T) therefore
// never leads a read outside it: a path under a symlink does not exist.
type mountSource struct {
	root string
	fd   *os.File // the mount's root directory

	mu    sync.Mutex              // guards views
	views map[record.Seq]*os.File // open @T directories, closed by Close
}

func openMounted(root string) (*mountSource, error) {
	fd, err := os.OpenFile(root, os.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	return &mountSource{root: root, fd: fd, views: map[record.Seq]*os.File{}}, nil
}

func (m *mountSource) ctl(name string) string {
	return filepath.Join(m.root, control.Dir, name)
}

func (m *mountSource) Head() (record.Seq, error) {
	b, err := os.ReadFile(m.ctl(control.Head))
	if err != nil {
		return 0, err
	}
	n, err := control.ParseSeq(b)
	if err != nil {
		return 0, fmt.Errorf("bad %s/%s %q", control.Dir, control.Head, b)
	}
	return n, nil
}

func (m *mountSource) PrunedBefore() (record.Seq, error) {
	st, ok := ReadStatus(m.root)
	if !ok {
		return 0, fmt.Errorf("cannot read %s", m.ctl(control.Status))
	}
	return st.PrunedBefore, nil
}

func (m *mountSource) Thinned() ([]record.ThinInterval, error) {
	st, ok := ReadStatus(m.root)
	if !ok {
		return nil, fmt.Errorf("cannot read %s", m.ctl(control.Status))
	}
	return st.Thinned, nil
}

func (m *mountSource) Events() iter.Seq2[record.Event, error] {
	return checkedEvents(m.ctl(control.Log), eventlog.ReadFile(m.ctl(control.Log), 1))
}

// base is the directory t's paths are resolved from: the mount's root, or
// the view @T (record.ErrNoSuchSeq when the daemon has no such view).
func (m *mountSource) base(t record.Seq) (*os.File, error) {
	if t == Now {
		return m.fd, nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if f, ok := m.views[t]; ok {
		return f, nil
	}
	fd, err := wsdir.New(int(m.fd.Fd())).Open("@"+strconv.FormatUint(uint64(t), 10), unix.O_RDONLY|unix.O_DIRECTORY)
	if errors.Is(err, unix.ENOENT) {
		return nil, fmt.Errorf("%w: %d", record.ErrNoSuchSeq, t)
	}
	if err != nil {
		return nil, fmt.Errorf("open view @%d: %w", t, err)
	}
	f := os.NewFile(uintptr(fd), "@"+strconv.FormatUint(uint64(t), 10))
	m.views[t] = f
	return f, nil
}

// at calls fn with the directory holding path at t and path's name in it
// ("." for the root), resolved by wsdir as the engine resolves paths.
func (m *mountSource) at(path string, t record.Seq, fn func(dirfd int, name string) error) error {
	if err := record.CleanPath(path); err != nil {
		return fmt.Errorf("%w: %q", err, path)
	}
	base, err := m.base(t)
	if err != nil {
		return err
	}
	if path == "" {
		return fn(int(base.Fd()), ".")
	}
	return wsdir.New(int(base.Fd())).WithParent(path, fn)
}

// missing reports whether err means "nothing there": the path or a parent
// does not exist, is not a directory, or is a symlink that is not crossed.
func missing(err error) bool {
	return errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENOTDIR) || errors.Is(err, unix.ELOOP)
}

func (m *mountSource) Stat(path string, t record.Seq) (Node, error) {
	var st unix.Stat_t
	var target string
	err := m.at(path, t, func(dirfd int, name string) error {
		if err := unix.Fstatat(dirfd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			return err
		}
		if st.Mode&unix.S_IFMT == unix.S_IFLNK {
			var err error
			target, err = readlinkat(dirfd, name)
			return err
		}
		return nil
	})
	if missing(err) {
		return Node{}, nil
	}
	if err != nil {
		return Node{}, err
	}
	n := Node{Exists: true, Mode: st.Mode & 0o7777, Bytes: st.Size}
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFDIR:
		n.Kind = record.KindDir
	case unix.S_IFLNK:
		n.Kind, n.Target = record.KindSymlink, target
	case unix.S_IFREG:
		n.Kind = record.KindFile
	default:
		n.Kind, n.Skipped, n.Reason = record.KindFile, true, "not a regular file, directory or symlink"
	}
	return n, nil
}

func readlinkat(dirfd int, name string) (string, error) {
	for size := 256; ; size *= 2 {
		buf := make([]byte, size)
		k, err := unix.Readlinkat(dirfd, name, buf)
		if err != nil {
			return "", err
		}
		if k < size {
			return string(buf[:k]), nil
		}
	}
}

func (m *mountSource) Content(path string, t record.Seq) ([]byte, error) {
	var out []byte
	err := m.withContent(path, t, func(r io.Reader) (err error) {
		out, err = io.ReadAll(r)
		return err
	})
	return out, err
}

// withContent calls fn with a reader of path's content at t (streamed:
// see contentStreamer).
func (m *mountSource) withContent(path string, t record.Seq, fn func(io.Reader) error) error {
	err := m.at(path, t, func(dirfd int, name string) error {
		var st unix.Stat_t
		if err := unix.Fstatat(dirfd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			return err
		}
		switch st.Mode & unix.S_IFMT {
		case unix.S_IFLNK:
			target, err := readlinkat(dirfd, name)
			if err != nil {
				return err
			}
			return fn(strings.NewReader(target))
		case unix.S_IFREG:
		default:
			return fmt.Errorf("%s is not a regular file", quote.Name(path))
		}
		fd, err := unix.Openat(dirfd, name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
		if err != nil {
			return err
		}
		f := os.NewFile(uintptr(fd), path)
		defer f.Close()
		return fn(f)
	})
	if missing(err) {
		return fmt.Errorf("%s: %w", quote.Name(path), os.ErrNotExist)
	}
	return err
}

func (m *mountSource) List(dir string, t record.Seq) ([]string, error) {
	var names []string
	err := m.at(dir, t, func(dirfd int, name string) error {
		fd, err := unix.Openat(dirfd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			return err
		}
		f := os.NewFile(uintptr(fd), dir)
		defer f.Close()
		all, err := f.Readdirnames(-1)
		if err != nil {
			return err
		}
		for _, n := range all {
			if dir == "" && record.IsReserved(n) {
				continue
			}
			names = append(names, n)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	slices.Sort(names)
	return names, nil
}

func (m *mountSource) BeginStep(ctx context.Context, label string, extra json.RawMessage) error {
	req, err := control.FormatStep(label, extra)
	if err != nil {
		return err
	}
	b, err := m.request(control.Step, req)
	if err != nil {
		if r, ok := control.ParseRefusal(b); ok {
			return r.Err()
		}
		return err
	}
	return nil
}

func (m *mountSource) BeginTurn(ctx context.Context, payload json.RawMessage) error {
	if _, err := control.ParseTurn(payload); err != nil {
		return err
	}
	_, err := m.request(control.Turn, append(append([]byte{}, payload...), '\n'))
	return err
}

// Rewind sends one request and reads back its own report: what the rewind
// did, or why the daemon refused it (control.Refusal, as a typed error).
func (m *mountSource) Rewind(ctx context.Context, req record.Request) (control.RewindReport, error) {
	text := control.FormatRewind(req)
	if !req.DryRun {
		defer m.pollProgress(ctx)()
	}
	b, err := m.request(control.Rewind, text)
	if err != nil {
		rep, perr := control.ParseRewindReport(b)
		if perr == nil && rep.Error != "" {
			return rep, rep.Err()
		}
		// A daemon from before refusals were typed says only the errno.
		return control.RewindReport{}, fmt.Errorf("%s/%s refused %s: %w", control.Dir, control.Rewind, strings.TrimSpace(string(text)), err)
	}
	return control.ParseRewindReport(b)
}

func (m *mountSource) GC(ctx context.Context, req record.GCRequest) (control.GCReport, error) {
	defer m.pollProgress(ctx)()
	b, err := m.request(control.GC, control.FormatGC(req))
	if err != nil {
		if r, ok := control.ParseRefusal(b); ok {
			return control.GCReport{Refusal: r}, r.Err()
		}
		return control.GCReport{}, err
	}
	return control.ParseGCReport(b)
}

// pollProgress, when ctx carries a rewind.Progress, reads the daemon's
// progress (.zero/status) every 150 ms into it while the caller's request
// runs, until the returned stop is called. A status read that waits only
// leaves the bar as it was: nothing waits on it.
func (m *mountSource) pollProgress(ctx context.Context) (stop func()) {
	p := rewind.ProgressOf(ctx)
	if p == nil {
		return func() {}
	}
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		tick := time.NewTicker(150 * time.Millisecond)
		defer tick.Stop()
		// task is the report last begun with its counts done zeroed;
		// passed, the report whose counts done were passed on last.
		var task, passed record.ProgressReport
		for {
			select {
			case <-done:
				return
			case <-tick.C:
			}
			b, err := os.ReadFile(m.ctl(control.Status))
			if err != nil {
				continue
			}
			st, err := control.ParseStatus(b)
			if err != nil || st.Progress == nil {
				continue
			}
			r := *st.Progress
			// A new task is any change but the counts done going up.
			head := r
			head.DoneItems, head.DoneBytes = 0, 0
			if head != task || r.DoneItems < passed.DoneItems {
				rewind.BeginCounting(p, r.What, r.Noun, r.Items, r.Bytes)
				task, passed = head, record.ProgressReport{}
			}
			p.Add(r.DoneItems-passed.DoneItems, r.DoneBytes-passed.DoneBytes)
			passed = r
		}
	}()
	return func() {
		close(done)
		select {
		case <-finished:
		case <-time.After(time.Second): // a status read still waiting: leave it
		}
	}
}

// request writes one request to a control file through one open file, as
// one line, and reads back from the same file that request's own report,
// whole, whatever its size (a dry run's preview of ten thousand paths is
// megabytes), also when the request failed (the report then says why). A
// rewind or gc request runs at the write that completes its line; a step
// runs when a descriptor of the file is closed, so a duplicate is closed
// first (its close returns the step's error) and the report read after.
func (m *mountSource) request(name string, req []byte) ([]byte, error) {
	f, err := os.OpenFile(m.ctl(name), os.O_RDWR, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	_, werr := f.Write(req)
	if werr == nil {
		werr = closeDup(f)
	}
	out, err := io.ReadAll(io.NewSectionReader(f, 0, math.MaxInt64))
	if err != nil && werr == nil {
		return nil, err
	}
	if werr != nil {
		return out, werr
	}
	return out, f.Close()
}

// closeDup closes a duplicate of f's descriptor: the daemon carries out a
// request not carried out yet (a step) and returns its error.
func closeDup(f *os.File) error {
	fd, err := unix.FcntlInt(f.Fd(), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return err
	}
	if err := unix.Close(fd); err != nil {
		return &os.PathError{Op: "close", Path: f.Name(), Err: err}
	}
	return nil
}

func (m *mountSource) Close() error {
	m.mu.Lock()
	for _, f := range m.views {
		f.Close()
	}
	m.views = nil
	m.mu.Unlock()
	return m.fd.Close()
}
