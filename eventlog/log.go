package eventlog

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/google/uuid"
	"golang.org/x/sys/unix"

	"github.com/zerofs/zerofs/internal/durable"
)

// Options configure Open.
type Options struct {
	// Sync makes Append wait until its line is fsynced.
	Sync bool
	// SessionID is written into every event; a new UUID when empty.
	SessionID string
	// Logger receives recovery notes (a cut torn tail). Default slog.Default().
	Logger *slog.Logger
	// Now is the clock for createdAt; time.Now when nil (tests fix it).
	Now func() time.Time
	// NewID makes event ids; uuid.NewString when nil (tests fix it).
	NewID func() string
}

// indexEvery is the spacing of the sparse sequence-to-offset index that lets
// readers start near any sequence without scanning from the top.
const indexEvery = 1024

// Log is an open, writable event log. It is safe for concurrent use.
type Log struct {
	path string
	opts Options
	f    *os.File

	mu sync.Mutex // guards head, size, offsets, closed, and writes to f
	// head is the last sequence written to the file.
	head   Seq
	size   int64
	closed bool
	// offsets[i] is the byte offset of sequence i*indexEvery+1.
	offsets []int64

	syncMu sync.Mutex // serialises fdatasync; guards synced
	synced Seq        // every line up to synced is durable
}

// Open opens the log at path for appending, creating it if needed, taking the
// writer's lock and recovering a torn tail.
func Open(path string, opts Options) (*Log, error) {
	if opts.SessionID == "" {
		opts.SessionID = uuid.NewString()
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.NewID == nil {
		opts.NewID = uuid.NewString
	}
	_, statErr := os.Stat(path)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("eventlog: open: %w", err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, fmt.Errorf("%w: %s", ErrLocked, path)
		}
		return nil, fmt.Errorf("eventlog: lock %s: %w", path, err)
	}
	if errors.Is(statErr, os.ErrNotExist) {
		if err := durable.Sync(f); err != nil {
			f.Close()
			return nil, err
		}
		if err := durable.SyncDir(filepath.Dir(path)); err != nil {
			f.Close()
			return nil, err
		}
	}
	l := &Log{path: path, opts: opts, f: f}
	sc, err := scan(f, path)
	if err != nil {
		f.Close()
		return nil, err
	}
	if sc.tornAt >= 0 {
		if err := l.cutTail(sc.tornAt, sc.fileSize); err != nil {
			f.Close()
			return nil, err
		}
	}
	l.head, l.size, l.offsets = sc.head, sc.goodSize, sc.offsets
	l.synced = l.head
	if _, err := f.Seek(l.size, io.SeekStart); err != nil {
		f.Close()
		return nil, fmt.Errorf("eventlog: %w", err)
	}
	return l, nil
}

// cutTail copies the bytes from off to the end aside, then truncates the log
// at off and fsyncs it.
func (l *Log) cutTail(off, size int64) error {
	tail := make([]byte, size-off)
	if _, err := l.f.ReadAt(tail, off); err != nil {
		return fmt.Errorf("eventlog: read torn tail: %w", err)
	}
	aside := fmt.Sprintf("%s.torn-%d", filepath.Base(l.path), time.Now().UnixNano())
	if err := durable.WriteFileAtomic(filepath.Dir(l.path), aside, tail, 0o600); err != nil {
		return fmt.Errorf("eventlog: save torn tail: %w", err)
	}
	if err := l.f.Truncate(off); err != nil {
		return fmt.Errorf("eventlog: cut torn tail: %w", err)
	}
	if err := durable.Sync(l.f); err != nil {
		return err
	}
	l.opts.Logger.Warn("eventlog: cut a torn tail left by a crash in the middle of an append; it was never acknowledged",
		"log", l.path, "offset", off, "bytes", len(tail), "savedAs", aside)
	return nil
}

// scanResult is what a full scan of a log learned.
type scanResult struct {
	head     Seq
	goodSize int64 // bytes up to and including the last valid line
	fileSize int64
	tornAt   int64 // offset of a torn tail to cut, or -1
	offsets  []int64
}

// scan reads the whole log, checking every line. It returns a *CorruptError
// for damage that is not a torn tail.
func scan(r io.ReaderAt, path string) (scanResult, error) {
	res := scanResult{tornAt: -1}
	br := bufio.NewReaderSize(io.NewSectionReader(r, 0, 1<<62), 1<<16)
	var off int64
	line := 0
	// bad is the first invalid line seen; it is a torn tail only if no
	// valid line follows it.
	var bad *CorruptError
	for {
		b, err := br.ReadBytes('\n')
		if len(b) == 0 && err == io.EOF {
			break
		}
		if err != nil && err != io.EOF {
			return res, fmt.Errorf("eventlog: read %s: %w", path, err)
		}
		line++
		start := off
		off += int64(len(b))
		complete := err == nil
		if bad != nil {
			// Anything that parses after a bad line proves the bad line
			// was not the tail.
			if _, perr := parseLine(bytes.TrimSuffix(b, []byte("\n"))); perr == nil && complete {
				return res, bad
			}
			continue
		}
		if !complete {
			bad = &CorruptError{Path: path, Line: line, Offset: start, Reason: "incomplete final line"}
			continue
		}
		ev, perr := parseLine(b[:len(b)-1])
		if perr == nil && ev.Seq != res.head+1 {
			perr = fmt.Errorf("sequence %d after %d", ev.Seq, res.head)
		}
		if perr != nil {
			bad = &CorruptError{Path: path, Line: line, Offset: start, Reason: perr.Error()}
			continue
		}
		if (uint64(ev.Seq)-1)%indexEvery == 0 {
			res.offsets = append(res.offsets, start)
		}
		res.head = ev.Seq
		res.goodSize = off
	}
	res.fileSize = off
	if bad != nil {
		res.tornAt = bad.Offset
	}
	return res, nil
}

// Path is the log file's path.
func (l *Log) Path() string { return l.path }

// SessionID is the session id written into this Log's events.
func (l *Log) SessionID() string { return l.opts.SessionID }

// Head is the last sequence written (durable when Options.Sync is set).
func (l *Log) Head() Seq {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.head
}

// Append writes one event with the next sequence. payload is marshalled to
// JSON (a json.RawMessage is used as is). With Options.Sync it returns only
// once the line is durable.
func (l *Log) Append(ctx context.Context, typ string, payload any) (Event, error) {
	evs, err := l.AppendBatch(ctx, []Record{{Type: typ, Payload: payload}})
	if err != nil {
		return Event{}, err
	}
	return evs[0], nil
}

// Record is one event to append: its type and payload.
type Record struct {
	Type    string
	Payload any
}

// AppendBatch writes several events with consecutive sequences in one write.
func (l *Log) AppendBatch(ctx context.Context, recs []Record) ([]Event, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	payloads := make([]json.RawMessage, len(recs))
	for i, r := range recs {
		raw, err := marshalPayload(r.Payload)
		if err != nil {
			return nil, fmt.Errorf("eventlog: %s payload: %w", r.Type, err)
		}
		payloads[i] = raw
	}
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil, ErrClosed
	}
	evs := make([]Event, len(recs))
	var buf bytes.Buffer
	var starts []int64
	for i, r := range recs {
		evs[i] = Event{
			ID:        l.opts.NewID(),
			SessionID: l.opts.SessionID,
			Seq:       l.head + Seq(i) + 1,
			Type:      r.Type,
			CreatedAt: l.opts.Now().UTC(),
			Payload:   payloads[i],
		}
		starts = append(starts, l.size+int64(buf.Len()))
		line, err := json.Marshal(evs[i])
		if err != nil {
			l.mu.Unlock()
			return nil, fmt.Errorf("eventlog: %w", err)
		}
		buf.Write(line)
		buf.WriteByte('\n')
	}
	n, err := l.f.WriteAt(buf.Bytes(), l.size)
	if err != nil || n != buf.Len() {
		// Cut whatever part reached the file, so the next append starts
		// on a line boundary. If even that fails, a later Open cuts it
		// as a torn tail.
		l.f.Truncate(l.size)
		l.mu.Unlock()
		if err == nil {
			err = io.ErrShortWrite
		}
		return nil, fmt.Errorf("eventlog: append: %w", err)
	}
	for i, ev := range evs {
		if (uint64(ev.Seq)-1)%indexEvery == 0 {
			l.offsets = append(l.offsets, starts[i])
		}
	}
	l.size += int64(n)
	l.head = evs[len(evs)-1].Seq
	last := l.head
	l.mu.Unlock()
	if l.opts.Sync {
		if err := l.syncTo(last); err != nil {
			return nil, err
		}
	}
	return evs, nil
}

func marshalPayload(p any) (json.RawMessage, error) {
	switch v := p.(type) {
	case nil:
		return json.RawMessage("{}"), nil
	case json.RawMessage:
		if !json.Valid(v) {
			return nil, errors.New("invalid JSON")
		}
		var b bytes.Buffer
		if err := json.Compact(&b, v); err != nil {
			return nil, err
		}
		return b.Bytes(), nil
	default:
		return json.Marshal(p)
	}
}

// Sync makes every line written so far durable.
func (l *Log) Sync() error {
	return l.syncTo(l.Head())
}

// syncTo returns once line seq is durable. Callers that arrive while an
// fdatasync runs wait for it and then usually find their line covered:
// one fdatasync serves all of them (group commit).
func (l *Log) syncTo(seq Seq) error {
	l.syncMu.Lock()
	defer l.syncMu.Unlock()
	if l.synced >= seq {
		return nil
	}
	target := l.Head()
	if err := durable.Fdatasync(l.f); err != nil {
		return fmt.Errorf("eventlog: %w", err)
	}
	l.synced = target
	return nil
}

// Close syncs and closes the log, releasing the writer's lock.
func (l *Log) Close() error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil
	}
	l.mu.Unlock()
	serr := l.Sync()
	l.mu.Lock()
	l.closed = true
	l.mu.Unlock()
	cerr := l.f.Close()
	if serr != nil {
		return serr
	}
	return cerr
}

// Events yields the events with sequence >= from, up to the head at the time
// of the call, reading the file as it goes (never the whole log in memory).
func (l *Log) Events(from Seq) iter.Seq2[Event, error] {
	l.mu.Lock()
	head, size := l.head, l.size
	var off int64
	if from > 1 && len(l.offsets) > 0 {
		i := int((uint64(from) - 1) / indexEvery)
		if i >= len(l.offsets) {
			i = len(l.offsets) - 1
		}
		off = l.offsets[i]
	}
	l.mu.Unlock()
	return func(yield func(Event, error) bool) {
		if from > head {
			return
		}
		f, err := os.Open(l.path)
		if err != nil {
			yield(Event{}, fmt.Errorf("eventlog: %w", err))
			return
		}
		defer f.Close()
		readLines(io.NewSectionReader(f, off, size-off), l.path, from, head, yield)
	}
}

// readLines decodes lines from r, yielding events with from <= seq <= upto.
func readLines(r io.Reader, path string, from, upto Seq, yield func(Event, error) bool) {
	br := bufio.NewReaderSize(r, 1<<16)
	for {
		b, err := br.ReadBytes('\n')
		if len(b) == 0 && err == io.EOF {
			return
		}
		if err == io.EOF {
			return // an incomplete last line is a tail being written
		}
		if err != nil {
			yield(Event{}, fmt.Errorf("eventlog: read %s: %w", path, err))
			return
		}
		ev, perr := parseLine(b[:len(b)-1])
		if perr != nil {
			yield(Event{}, &CorruptError{Path: path, Reason: perr.Error()})
			return
		}
		if ev.Seq < from {
			continue
		}
		if ev.Seq > upto {
			return
		}
		if !yield(ev, nil) {
			return
		}
	}
}

// ReadFile yields the events of the log at path with sequence >= from,
// without taking the writer's lock and without repairing anything: a torn
// tail simply ends the iteration. For read-only tools.
func ReadFile(path string, from Seq) iter.Seq2[Event, error] {
	return func(yield func(Event, error) bool) {
		f, err := os.Open(path)
		if err != nil {
			yield(Event{}, fmt.Errorf("eventlog: %w", err))
			return
		}
		defer f.Close()
		readLines(f, path, from, ^Seq(0), yield)
	}
}

// Check scans the log at path without changing it and reports its head, the
// size of a torn tail (0 if none), and a *CorruptError for other damage. It
// is what `zerofs verify` runs.
func Check(path string) (head Seq, tornBytes int64, err error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, 0, fmt.Errorf("eventlog: %w", err)
	}
	defer f.Close()
	sc, err := scan(f, path)
	if err != nil {
		return sc.head, 0, err
	}
	if sc.tornAt >= 0 {
		tornBytes = sc.fileSize - sc.tornAt
	}
	return sc.head, tornBytes, nil
}
