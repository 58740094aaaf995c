package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/zerofs/zerofs/eventlog"
	"github.com/zerofs/zerofs/rewind"
)

// Errnos the control files and views answer with.
var (
	errNotDir  = syscall.ENOTDIR
	errInvalid = syscall.EINVAL
)

// engineHistory reads and changes an unmounted workspace through the
// engine. It holds the store's lock until Close.
type engineHistory struct {
	root *os.File
	eng  *rewind.Engine
}

// openEngine opens the engine on an unmounted workspace. A store whose lock
// is held belongs to a running zerofs: the command must go through its
// mount instead.
func openEngine(e *env, ws *workspace) (*engineHistory, error) {
	root, err := os.Open(ws.Root)
	if err != nil {
		return nil, err
	}
	logger := slog.New(slog.NewTextHandler(e.stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	eng, err := rewind.Open(e.ctx, root, rewind.Options{StoreDir: ws.Store, Logger: logger})
	if err != nil {
		root.Close()
		if errors.Is(err, eventlog.ErrLocked) {
			return nil, storeInUse(ws.Store)
		}
		return nil, err
	}
	return &engineHistory{root: root, eng: eng}, nil
}

// storeInUse names the daemon holding store, when its pid file says.
func storeInUse(store string) error {
	if pid := daemonPID(store); pid > 0 {
		return fmt.Errorf("store %s is in use by a running zerofs (pid %d); run the command inside its mount", store, pid)
	}
	return fmt.Errorf("store %s is in use by a running zerofs; run the command inside its mount", store)
}

// daemonPID is the live pid in STORE/daemon.pid, or 0.
func daemonPID(store string) int {
	b, err := os.ReadFile(filepath.Join(store, "daemon.pid"))
	if err != nil {
		return 0
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 0 || !pidAlive(pid) {
		return 0
	}
	return pid
}

func (h *engineHistory) Head() (Seq, error)         { return h.eng.Head(), nil }
func (h *engineHistory) PrunedBefore() (Seq, error) { return h.eng.PrunedBefore(), nil }

func (h *engineHistory) Events() iter.Seq2[eventlog.Event, error] {
	return checkedEvents(h.eng.Log().Path(), h.eng.Log().Events(1))
}

func (h *engineHistory) entry(path string, t Seq) (rewind.Entry, error) {
	if t == now {
		t = h.eng.Head()
	}
	return h.eng.StateAt(path, t)
}

func (h *engineHistory) Stat(path string, t Seq) (node, error) {
	ent, err := h.entry(path, t)
	if err != nil || !ent.Exists {
		return node{}, err
	}
	s := ent.State
	n := node{Exists: true, Kind: s.Kind, Mode: s.Mode, Bytes: s.Bytes, Blob: s.Blob,
		Target: s.Target, Skipped: s.Skipped, Reason: s.Reason}
	if n.Kind == rewind.KindSymlink && n.Target == "" && !n.Skipped {
		if n.Target, err = h.eng.ReadLink(ent); err != nil {
			return node{}, err
		}
	}
	return n, nil
}

func (h *engineHistory) Content(path string, t Seq) ([]byte, error) {
	ent, err := h.entry(path, t)
	if err != nil {
		return nil, err
	}
	if !ent.Exists {
		return nil, os.ErrNotExist
	}
	if ent.State.Skipped {
		return nil, fmt.Errorf("%s: before-state was not kept (%s)", path, ent.State.Reason)
	}
	if ent.State.Kind == rewind.KindSymlink {
		target, err := h.eng.ReadLink(ent)
		return []byte(target), err
	}
	f, err := h.eng.OpenContent(ent)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(f)
}

func (h *engineHistory) List(dir string, t Seq) ([]string, error) {
	if t == now {
		t = h.eng.Head()
	}
	ents, err := h.eng.ReadDirAt(dir, t)
	if err != nil {
		return nil, err
	}
	names := make([]string, len(ents))
	for i, e := range ents {
		names[i] = e.Name
	}
	return names, nil
}

func (h *engineHistory) BeginStep(ctx context.Context, label string, extra json.RawMessage) error {
	_, err := h.eng.BeginStep(ctx, label, extra)
	return err
}

func (h *engineHistory) Rewind(ctx context.Context, t Seq) (rewindResult, error) {
	res, err := h.eng.Rewind(ctx, t)
	if err != nil {
		return rewindResult{}, err
	}
	out := rewindResult{Sequence: res.Seq, TargetSequence: t, Report: res.Report}
	if p, seq, ok := h.eng.LastRewind(); ok && seq == res.Seq {
		out.CheckpointSequence = p.CheckpointSequence
	}
	return out, nil
}

func (h *engineHistory) GC(ctx context.Context, before Seq) (rewind.GCResult, error) {
	return h.eng.GC(ctx, before)
}

func (h *engineHistory) Close() error {
	err := h.eng.Close()
	h.root.Close()
	return err
}
