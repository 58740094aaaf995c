package history

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"os"
	"strings"

	"github.com/zerofs/zerofs/control"
	"github.com/zerofs/zerofs/eventlog"
	"github.com/zerofs/zerofs/internal/quote"
	"github.com/zerofs/zerofs/record"
	"github.com/zerofs/zerofs/rewind"
)

// engineSource reads and changes an unmounted workspace through the
// engine. It holds the store's lock until Close.
type engineSource struct {
	root *os.File
	eng  *rewind.Engine
}

// openEngine opens the engine on an unmounted workspace. A store whose lock
// is held belongs to a running zerofs: the caller must go through its mount.
func openEngine(ctx context.Context, ws *Workspace, opts Options) (*engineSource, error) {
	root, err := os.Open(ws.Root)
	if err != nil {
		return nil, err
	}
	eng, err := rewind.Open(ctx, root, rewind.Options{StoreDir: ws.Store, Logger: opts.Logger})
	if err != nil {
		root.Close()
		if errors.Is(err, eventlog.ErrLocked) {
			return nil, &InUseError{Store: ws.Store, PID: DaemonPID(ws.Store)}
		}
		return nil, err
	}
	return &engineSource{root: root, eng: eng}, nil
}

func (h *engineSource) Head() (record.Seq, error)         { return h.eng.Head(), nil }
func (h *engineSource) PrunedBefore() (record.Seq, error) { return h.eng.PrunedBefore(), nil }

func (h *engineSource) Thinned() ([]record.ThinInterval, error) { return h.eng.Thinned(), nil }

func (h *engineSource) Events() iter.Seq2[record.Event, error] {
	return checkedEvents(h.eng.Log().Path(), h.eng.Log().Events(1))
}

func (h *engineSource) entry(path string, t record.Seq) (rewind.Entry, error) {
	if t == Now {
		t = h.eng.Head()
	}
	return h.eng.StateAt(path, t)
}

func (h *engineSource) Stat(path string, t record.Seq) (Node, error) {
	ent, err := h.entry(path, t)
	if err != nil || !ent.Exists {
		return Node{}, err
	}
	s := ent.State
	n := Node{Exists: true, Kind: s.Kind, Mode: s.Mode, Bytes: s.Bytes, Blob: s.Blob,
		Target: s.Target, Skipped: s.Skipped, Reason: s.Reason}
	if n.Kind == record.KindSymlink && n.Target == "" && !n.Skipped {
		if n.Target, err = h.eng.ReadLink(ent); err != nil {
			return Node{}, err
		}
	}
	return n, nil
}

func (h *engineSource) Content(path string, t record.Seq) ([]byte, error) {
	var out []byte
	err := h.withContent(path, t, func(r io.Reader) (err error) {
		out, err = io.ReadAll(r)
		return err
	})
	return out, err
}

// withContent calls fn with a reader of path's content at t (streamed:
// see contentStreamer).
func (h *engineSource) withContent(path string, t record.Seq, fn func(io.Reader) error) error {
	ent, err := h.entry(path, t)
	if err != nil {
		return err
	}
	if !ent.Exists {
		return os.ErrNotExist
	}
	if ent.State.Skipped {
		return fmt.Errorf("%s: %w (%s)", quote.Name(path), rewind.ErrSkipped, quote.Name(ent.State.Reason))
	}
	if ent.State.Kind == record.KindSymlink {
		target, err := h.eng.ReadLink(ent)
		if err != nil {
			return err
		}
		return fn(strings.NewReader(target))
	}
	f, err := h.eng.OpenContent(ent)
	if err != nil {
		return err
	}
	defer f.Close()
	return fn(f)
}

func (h *engineSource) List(dir string, t record.Seq) ([]string, error) {
	if t == Now {
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

func (h *engineSource) BeginStep(ctx context.Context, label string, extra json.RawMessage) error {
	_, err := h.eng.BeginStep(ctx, label, extra)
	return err
}

func (h *engineSource) BeginTurn(ctx context.Context, payload json.RawMessage) error {
	_, err := h.eng.BeginTurn(ctx, payload)
	return err
}

func (h *engineSource) Rewind(ctx context.Context, req record.Request) (control.RewindReport, error) {
	if req.Merge != nil {
		m := *req.Merge
		m.Workspace = h.root.Name() // as a fork records its source (Fork)
		req.Merge = &m
	}
	res, err := h.eng.Apply(ctx, req)
	return control.ReportOf(res, err), err
}

func (h *engineSource) GC(ctx context.Context, req record.GCRequest) (control.GCReport, error) {
	res, err := h.eng.GCWith(ctx, req)
	return control.GCReport{GCResult: res, Refusal: control.RefusalOf(err)}, err
}

func (h *engineSource) Close() error {
	err := h.eng.Close()
	h.root.Close()
	return err
}
