package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/zerofs/zerofs/eventlog"
	"github.com/zerofs/zerofs/rewind"
)

// now stands for "the workspace as it is now" where a sequence is expected.
const now Seq = math.MaxUint64

// node is one path's state at some sequence, as far as the CLI needs it.
type node struct {
	Exists  bool
	Kind    rewind.Kind
	Mode    uint32 // permission bits
	Bytes   int64
	Blob    string // the recorded blob, "" when unknown (live or mounted)
	Target  string // symlink target
	Skipped bool   // the before-state was not kept
	Reason  string
}

// history is a workspace's history, read the same way whether the
// workspace is mounted (through the daemon's control files and @T/ views) or
// not (through the engine, which then holds the store's lock). Commands
// are written once against it.
type history interface {
	// Head is the last sequence written.
	Head() (Seq, error)
	// PrunedBefore is the start of history (0 when gc never ran).
	PrunedBefore() (Seq, error)
	// Events yields the whole log in order.
	Events() iter.Seq2[eventlog.Event, error]
	// Stat is path's state at t (now for the live workspace). A sequence
	// above head or below the pruned history is rewind.ErrNoSuchSeq.
	Stat(path string, t Seq) (node, error)
	// Content is a file's bytes or a symlink's target at t.
	Content(path string, t Seq) ([]byte, error)
	// List is a directory's names at t, sorted.
	List(dir string, t Seq) ([]string, error)
	// BeginStep begins a step; extra is a JSON object or nil.
	BeginStep(ctx context.Context, label string, extra json.RawMessage) error
	// Rewind rolls the workspace back to t.
	Rewind(ctx context.Context, t Seq) (rewindResult, error)
	// GC forgets states before before.
	GC(ctx context.Context, before Seq) (rewind.GCResult, error)
	Close() error
}

// rewindResult is what a rewind did, as .zero/rewind reports it.
type rewindResult struct {
	Sequence           Seq           `json:"sequence"`
	TargetSequence     Seq           `json:"targetSequence"`
	CheckpointSequence Seq           `json:"checkpointSequence"`
	Report             rewind.Report `json:"report"`
}

// openWorkspaceHistory finds the workspace around the current directory
// and opens its history; the caller closes the history.
func openWorkspaceHistory(e *env) (*workspace, history, error) {
	ws, err := findWorkspace(e.cwd)
	if err != nil {
		return nil, nil, err
	}
	h, err := openHistory(e, ws)
	if err != nil {
		return nil, nil, err
	}
	return ws, h, nil
}

// openHistory opens ws's history: through the mount when it is mounted,
// else by opening the engine on the store (taking its lock, so a command
// never races a daemon).
func openHistory(e *env, ws *workspace) (history, error) {
	if ws.Mounted {
		return &mountHistory{root: ws.Root}, nil
	}
	return openEngine(e, ws)
}

// seqError explains a rewind.ErrNoSuchSeq for t.
func seqError(h history, t Seq) error {
	head, _ := h.Head()
	pruned, _ := h.PrunedBefore()
	if t > head {
		return fmt.Errorf("no sequence %d (head is %d)", t, head)
	}
	if t < pruned {
		return fmt.Errorf("no sequence %d: history before %d was pruned", t, pruned)
	}
	return fmt.Errorf("no sequence %d", t)
}

// mountHistory reads a mounted workspace through its control directory
// and @T/ views. It never touches the store: the daemon owns it.
type mountHistory struct {
	root string
}

func (m *mountHistory) ctl(name string) string {
	return filepath.Join(m.root, rewind.StoreName, name)
}

func (m *mountHistory) Head() (Seq, error) {
	b, err := os.ReadFile(m.ctl("head"))
	if err != nil {
		return 0, err
	}
	n, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("bad .zero/head %q", b)
	}
	return Seq(n), nil
}

func (m *mountHistory) PrunedBefore() (Seq, error) {
	st, ok := readStatus(m.root)
	if !ok {
		return 0, fmt.Errorf("cannot read %s", m.ctl("status"))
	}
	return st.PrunedBefore, nil
}

func (m *mountHistory) Events() iter.Seq2[eventlog.Event, error] {
	return checkedEvents(m.ctl("log"), eventlog.ReadFile(m.ctl("log"), 1))
}

// at is path's name in the mount at t.
func (m *mountHistory) at(path string, t Seq) string {
	if t == now {
		return filepath.Join(m.root, filepath.FromSlash(path))
	}
	return filepath.Join(m.root, "@"+strconv.FormatUint(uint64(t), 10), filepath.FromSlash(path))
}

// checkSeq turns a missing @T into ErrNoSuchSeq (the daemon answers ENOENT
// for T above head or below the pruned history).
func (m *mountHistory) checkSeq(t Seq) error {
	if t == now {
		return nil
	}
	if _, err := os.Lstat(m.at("", t)); err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return rewind.ErrNoSuchSeq
		}
		return err
	}
	return nil
}

func (m *mountHistory) Stat(path string, t Seq) (node, error) {
	if err := m.checkSeq(t); err != nil {
		return node{}, err
	}
	fi, err := os.Lstat(m.at(path, t))
	if err != nil {
		if errors.Is(err, os.ErrNotExist) || errors.Is(err, errNotDir) {
			return node{}, nil
		}
		return node{}, err
	}
	n := node{Exists: true, Mode: uint32(fi.Mode().Perm()), Bytes: fi.Size()}
	if fi.Mode()&os.ModeSetuid != 0 {
		n.Mode |= 0o4000
	}
	if fi.Mode()&os.ModeSetgid != 0 {
		n.Mode |= 0o2000
	}
	if fi.Mode()&os.ModeSticky != 0 {
		n.Mode |= 0o1000
	}
	switch {
	case fi.IsDir():
		n.Kind = rewind.KindDir
	case fi.Mode()&os.ModeSymlink != 0:
		n.Kind = rewind.KindSymlink
		n.Target, err = os.Readlink(m.at(path, t))
		if err != nil {
			return node{}, err
		}
	default:
		n.Kind = rewind.KindFile
	}
	return n, nil
}

func (m *mountHistory) Content(path string, t Seq) ([]byte, error) {
	n, err := m.Stat(path, t)
	if err != nil {
		return nil, err
	}
	if n.Kind == rewind.KindSymlink {
		return []byte(n.Target), nil
	}
	return os.ReadFile(m.at(path, t))
}

func (m *mountHistory) List(dir string, t Seq) ([]string, error) {
	if err := m.checkSeq(t); err != nil {
		return nil, err
	}
	ents, err := os.ReadDir(m.at(dir, t))
	if err != nil {
		return nil, err
	}
	var names []string
	for _, e := range ents {
		if dir == "" && rewind.IsReserved(e.Name()) {
			continue
		}
		names = append(names, e.Name())
	}
	return names, nil
}

func (m *mountHistory) BeginStep(ctx context.Context, label string, extra json.RawMessage) error {
	line := label
	if extra != nil {
		var obj map[string]any
		if err := json.Unmarshal(extra, &obj); err != nil {
			return fmt.Errorf("step payload: %w", err)
		}
		obj["name"] = label
		b, err := json.Marshal(obj)
		if err != nil {
			return err
		}
		line = string(b)
	}
	return writeCtl(m.ctl("step"), line)
}

func (m *mountHistory) Rewind(ctx context.Context, t Seq) (rewindResult, error) {
	var res rewindResult
	if err := writeCtl(m.ctl("rewind"), strconv.FormatUint(uint64(t), 10)); err != nil {
		if errors.Is(err, errInvalid) {
			return res, rewind.ErrNoSuchSeq
		}
		return res, err
	}
	b, err := os.ReadFile(m.ctl("rewind"))
	if err != nil {
		return res, err
	}
	if err := json.Unmarshal(b, &res); err != nil {
		return res, fmt.Errorf("bad .zero/rewind report: %v", err)
	}
	return res, nil
}

func (m *mountHistory) GC(ctx context.Context, before Seq) (rewind.GCResult, error) {
	var res rewind.GCResult
	if err := writeCtl(m.ctl("gc"), strconv.FormatUint(uint64(before), 10)); err != nil {
		if errors.Is(err, errInvalid) {
			return res, rewind.ErrNoSuchSeq
		}
		return res, err
	}
	b, err := os.ReadFile(m.ctl("gc"))
	if err != nil {
		return res, err
	}
	if err := json.Unmarshal(b, &res); err != nil {
		return res, fmt.Errorf("bad .zero/gc report: %v", err)
	}
	return res, nil
}

func (m *mountHistory) Close() error { return nil }

// writeCtl writes one line to a control file in a single write, as the
// daemon expects.
func writeCtl(path, line string) error {
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	_, werr := f.Write([]byte(line + "\n"))
	cerr := f.Close()
	if werr != nil {
		return werr
	}
	return cerr
}
