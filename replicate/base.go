package replicate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/zerofs/zerofs/blobstore"
	"github.com/zerofs/zerofs/record"
	"github.com/zerofs/zerofs/rewind"
)

// Base is the content of a base object: the whole workspace at Sequence
// (doc.go says why bases exist and why the state at a step's start is
// stable). Files lists every path, parents before children.
type Base struct {
	Format   int         `json:"format"`
	Sequence record.Seq  `json:"sequence"`
	Root     BaseEntry   `json:"root"`
	Files    []BaseEntry `json:"files"`
}

// BaseEntry is one path of a base. A name or symlink target that is not
// valid UTF-8 is kept exactly in PathBytes or TargetBytes (JSON would
// replace its bytes).
type BaseEntry struct {
	Path        string      `json:"path"`
	PathBytes   []byte      `json:"pathBytes,omitempty"`
	Kind        record.Kind `json:"kind,omitempty"`
	Blob        string      `json:"blob,omitempty"`
	Bytes       int64       `json:"bytes"`
	Mode        uint32      `json:"mode"`
	UID         *uint32     `json:"uid,omitempty"`
	GID         *uint32     `json:"gid,omitempty"`
	MTime       *time.Time  `json:"mtime,omitempty"`
	Target      string      `json:"target,omitempty"`
	TargetBytes []byte      `json:"targetBytes,omitempty"`
	// Xattrs are the path's kept xattrs (rewind/xattr.go): nil says
	// nothing about them (a restore then sets none).
	Xattrs map[string][]byte `json:"xattrs,omitempty"`
	// Skipped: the path's state could not be kept (Reason says why); a
	// restore leaves it out and names it.
	Skipped bool   `json:"skipped,omitempty"`
	Reason  string `json:"reason,omitempty"`

	live bool // read from the workspace as it is now (not a record)
}

// name and target are the exact bytes of the entry's path and target.
func (b BaseEntry) name() string {
	if b.PathBytes != nil {
		return string(b.PathBytes)
	}
	return b.Path
}

func (b BaseEntry) target() string {
	if b.TargetBytes != nil {
		return string(b.TargetBytes)
	}
	return b.Target
}

func newEntry(p string, ent rewind.Entry) BaseEntry {
	st := ent.State
	e := BaseEntry{Path: p, Kind: st.Kind, Bytes: st.Bytes, Mode: st.Mode & 0o7777,
		UID: st.UID, GID: st.GID, MTime: st.MTime, Skipped: st.Skipped, Reason: st.Reason, Xattrs: st.Xattrs, live: ent.Live}
	if !utf8.ValidString(p) {
		e.Path, e.PathBytes = record.Readable(p), []byte(p)
	}
	if !ent.Live && st.Kind == record.KindFile {
		e.Blob = st.Blob
	}
	return e
}

// liveBlob is what an earlier base read of a path as it was then.
type liveBlob struct {
	blob   string
	bytes  int64
	xattrs map[string][]byte
}

// baseMaker makes one base.
type baseMaker struct {
	r   *Replicator
	ctx context.Context
	seq record.Seq
	out Base
	// cache holds the files the previous base (at prev) read live; one
	// that nothing named since prev is unchanged, so it is not read again.
	cache map[string]liveBlob
	prev  record.Seq
	next  map[string]liveBlob
	// ents are the entries of out.Files as walk listed them, for fill.
	ents []rewind.Entry
	// mu guards next and the replicator's known while fills run at once
	// (and the log's upload meanwhile: fillAll).
	mu sync.Mutex
}

// makeBase writes down the workspace at seq, uploading every blob it
// names that the replica lacks. next is what it read live, for the cache
// once the base is written. It lists the tree first, then fills each
// path (a file read, its blob uploaded): the Progress in ctx, if any,
// hears the paths and bytes of the whole tree ("replicate base"), then
// each path filled.
func (r *Replicator) makeBase(ctx context.Context, seq record.Seq) (_ Base, next map[string]liveBlob, err error) {
	pr := rewind.ProgressIn(ctx)
	// Its uploads are counted here, path by path, not blob by blob.
	ctx = rewind.WithProgress(ctx, nil)
	m := &baseMaker{r: r, ctx: ctx, seq: seq, cache: r.liveCache, prev: r.liveCacheSeq, next: map[string]liveBlob{}}
	m.out = Base{Format: 1, Sequence: seq}
	root, err := r.eng.StateAt("", seq)
	if err != nil {
		return Base{}, nil, err
	}
	m.out.Root = newEntry("", root)
	if err := m.fill(ctx, &m.out.Root, root); err != nil {
		return Base{}, nil, err
	}
	if err := m.walk(""); err != nil {
		return Base{}, nil, err
	}
	var bytes int64
	for _, e := range m.out.Files {
		if e.Kind == record.KindFile && !e.Skipped {
			bytes += e.Bytes
		}
	}
	pr.Begin("replicate base", int64(len(m.out.Files)), bytes)
	lp := &lockedProgress{p: pr}
	// The paths are filled blobsAtOnce at a time (each a file read and
	// its blob sent: on a link with a long round trip one at a time
	// leaves it idle), in batches, with the log's new events sent between
	// them (logAlongside).
	for start := 0; start < len(m.out.Files); start += fillBatch {
		if err := m.fillAll(start, min(start+fillBatch, len(m.out.Files)), lp); err != nil {
			return Base{}, nil, err
		}
		if err := r.logAlongside(ctx); err != nil {
			return Base{}, nil, err
		}
	}
	m.ents = nil
	// Every path read as it is now is looked up again: one that a
	// checkpoint after seq names by now changed while it was read (or
	// after), and its record is the state at seq.
	files := m.out.Files[:0]
	for _, e := range m.out.Files {
		if e.live {
			ent, err := r.eng.StateAt(e.name(), seq)
			if err != nil {
				return Base{}, nil, err
			}
			if !ent.Exists {
				continue
			}
			if !ent.Live {
				delete(m.next, e.name())
				e = newEntry(e.name(), ent)
				if err := m.fill(ctx, &e, ent); err != nil {
					return Base{}, nil, err
				}
			}
		}
		files = append(files, e)
	}
	m.out.Files = files
	return m.out, m.next, nil
}

// fillBatch is how many paths a base fills between two looks at the log.
const fillBatch = 64

// fillAll fills m.out.Files[from:to], blobsAtOnce at a time; the first
// error stops the rest.
func (m *baseMaker) fillAll(from, to int, pr rewind.Progress) error {
	ctx, stop := context.WithCancel(m.ctx)
	defer stop()
	var (
		mu    sync.Mutex // guards first
		first error
		wg    sync.WaitGroup
	)
	next := make(chan int)
	for range min(blobsAtOnce, to-from) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				e := &m.out.Files[i]
				n := int64(0)
				if e.Kind == record.KindFile && !e.Skipped {
					n = e.Bytes
				}
				if err := m.fill(ctx, e, m.ents[i]); err != nil {
					mu.Lock()
					if first == nil {
						first = err
					}
					mu.Unlock()
					stop()
					continue
				}
				pr.Add(1, n)
			}
		}()
	}
	// The log's new events go up while the fills run (under m.mu: the
	// fills wait for it only where they look at known).
	tick := time.NewTicker(m.r.opts.Every)
	defer tick.Stop()
feed:
	for i := from; i < to; {
		select {
		case next <- i:
			i++
		case <-ctx.Done():
			break feed
		case <-tick.C:
			m.mu.Lock()
			err := m.r.logAlongside(m.ctx)
			m.mu.Unlock()
			if err != nil {
				mu.Lock()
				if first == nil {
					first = err
				}
				mu.Unlock()
				stop()
				break feed
			}
		}
	}
	close(next)
	wg.Wait()
	if first == nil {
		first = m.ctx.Err()
	}
	return first
}

// known reports whether the replica holds the blob object name, and
// noteKnown notes that it does: under m.mu, as fills run at once.
func (m *baseMaker) known(name string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.r.known[name]
}

func (m *baseMaker) noteKnown(name string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.r.known[name] = true
}

func (m *baseMaker) walk(dir string) error {
	ents, err := m.r.eng.ReadDirAt(dir, m.seq)
	if err != nil {
		return err
	}
	for _, de := range ents {
		if err := m.ctx.Err(); err != nil {
			return err
		}
		p := dir + "/" + de.Name
		if dir == "" {
			p = de.Name
		}
		e := newEntry(p, de.Entry)
		m.out.Files = append(m.out.Files, e)
		m.ents = append(m.ents, de.Entry)
		if !e.Skipped && e.Kind == record.KindDir {
			if err := m.walk(p); err != nil {
				return err
			}
		}
	}
	return nil
}

// fill completes e: a symlink's target, a file's blob (read and uploaded
// if the file is read as it is now), the xattrs of a directory as it is
// now. Several run at once (fillAll).
func (m *baseMaker) fill(ctx context.Context, e *BaseEntry, ent rewind.Entry) error {
	if e.Skipped {
		return nil
	}
	switch e.Kind {
	case record.KindDir:
		if ent.Live {
			xs, err := m.r.eng.DirXattrs(ent)
			if err != nil {
				return err
			}
			e.Xattrs = xs
		}
	case record.KindSymlink:
		t, err := m.r.eng.ReadLink(ent)
		if err != nil {
			return err
		}
		e.Target = t
		if !utf8.ValidString(t) {
			e.Target, e.TargetBytes = record.Readable(t), []byte(t)
		}
	case record.KindFile:
		if !ent.Live {
			id, err := blobstore.ParseID(e.Blob)
			if err != nil {
				return err
			}
			name := m.r.codec.blobName(id)
			if m.known(name) {
				return nil
			}
			err = m.r.sendStored(ctx, id)
			if errors.Is(err, blobstore.ErrNotFound) {
				return fmt.Errorf("%w: %s", errGone, id.Short())
			}
			if err != nil {
				return fmt.Errorf("replicate: blob %s: %w", id.Short(), err)
			}
			m.noteKnown(name)
			return nil
		}
		p := e.name()
		if c, ok := m.cache[p]; ok && c.bytes == e.Bytes {
			if old, err := m.r.eng.StateAt(p, m.prev); err == nil && old.Live && old.Exists {
				e.Blob, e.Xattrs = c.blob, c.xattrs
				m.mu.Lock()
				m.next[p] = c
				m.mu.Unlock()
				return nil
			}
		}
		f, err := m.r.eng.OpenContent(ent)
		if err != nil {
			return err
		}
		// Its xattrs as it is now (a change to them is captured, as a
		// change to its content is).
		if fd, ok := f.(interface{ Fd() uintptr }); ok {
			if e.Xattrs, err = rewind.ReadXattrs(int(fd.Fd())); err != nil {
				f.Close()
				return fmt.Errorf("replicate: xattrs of %q: %w", p, err)
			}
		}
		id, n, err := m.putLive(ctx, f, e.Bytes)
		f.Close()
		if err != nil {
			return fmt.Errorf("replicate: read %q: %w", p, err)
		}
		e.Blob, e.Bytes = id.String(), n
		m.mu.Lock()
		m.next[p] = liveBlob{blob: e.Blob, bytes: e.Bytes, xattrs: e.Xattrs}
		m.mu.Unlock()
	}
	return nil
}

func encodeBase(b Base) ([]byte, error) {
	return json.Marshal(b)
}
