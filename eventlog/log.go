package eventlog

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"iter"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/google/uuid"
	"golang.org/x/sys/unix"

	"github.com/zerofs/zerofs/internal/durable"
	"github.com/zerofs/zerofs/record"
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
	// Resume, when set, names a prefix of the log that an earlier Log
	// checked (see Log.Resume). If the file still starts with exactly
	// those bytes (same length, same CRC-32C), Open reads and checks only
	// what follows them; otherwise it scans the whole log as usual. A
	// wrong Resume costs a full scan, never a wrong head.
	Resume *Resume
}

// Resume describes a checked prefix of a log: its first Size bytes, ending
// with the line of sequence Head, have the CRC-32C (Castagnoli) CRC, and
// Offsets is the prefix's sparse index (the offset of every indexEvery-th
// line). A caller that keeps state derived from the log (an index) saves the
// Resume with that state, so that the next Open need not re-read lines the
// state already covers.
type Resume struct {
	Head    record.Seq
	Size    int64
	CRC     uint32
	Offsets []int64
}

// castagnoli is the CRC-32C table (hardware accelerated on amd64 and arm64).
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Seams for fault injection (STYLE rule 16): every write, cut and fdatasync of
// the log file goes through these, so tests can make one fail, stop half way,
// or kill the process at that point. Production code never changes them.
var (
	writeAt   = (*os.File).WriteAt
	truncate  = (*os.File).Truncate
	fdatasync = durable.Fdatasync
)

// indexEvery is the spacing of the sparse sequence-to-offset index that lets
// readers start near any sequence without scanning from the top.
const indexEvery = 1024

// Log is an open, writable event log. It is safe for concurrent use.
type Log struct {
	path string
	opts Options
	f    *os.File

	mu sync.Mutex // guards head, size, offsets, closed, failed, and writes to f
	// head is the last sequence written to the file.
	head   record.Seq
	size   int64
	closed bool
	// failed, once set, fails every later append and sync: see ErrFailed.
	failed error
	// offsets[i] is the byte offset of sequence i*indexEvery+1.
	offsets []int64
	// crc is the CRC-32C of the file's first size bytes.
	crc uint32
	// resumed: Open took over Options.Resume's prefix without reading it.
	resumed bool

	syncMu sync.Mutex // guards synced, syncing and fileClosed; syncDone's lock
	// syncDone is broadcast when an fdatasync ends.
	syncDone *sync.Cond
	synced   record.Seq // every line up to synced is durable
	syncing  bool       // an fdatasync is running (without syncMu held)
	// fileClosed: Close has closed f; no fdatasync may start.
	fileClosed bool
}

// Open opens the log at path for appending, creating it if needed, taking the
// writer's lock and recovering a torn tail. When it returns, every line in
// the log is durable.
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
	l.syncDone = sync.NewCond(&l.syncMu)
	sc, err := scanResumed(f, path, opts)
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
	l.head, l.size, l.offsets, l.crc, l.resumed = sc.head, sc.goodSize, sc.offsets, sc.crc, sc.resumed
	// The lines found may be in the page cache only (a writer without
	// Options.Sync crashed before its Sync): make them durable now, so that
	// Head is durable from the start and Sync has nothing older to cover.
	if err := fdatasync(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("eventlog: open %s: %w", path, err)
	}
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
	if err := truncate(l.f, off); err != nil {
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
	head     record.Seq
	goodSize int64 // bytes up to and including the last valid line
	fileSize int64
	tornAt   int64 // offset of a torn tail to cut, or -1
	offsets  []int64
	crc      uint32 // CRC-32C of the first goodSize bytes
	resumed  bool   // the scan began after Options.Resume's prefix
	// writing, set by the caller, says a writer holds the log (its Open
	// cut any torn tail): an incomplete last line is one being written.
	writing bool
}

// scanResumed scans the log, starting after opts.Resume's prefix when the
// file still begins with it.
func scanResumed(f *os.File, path string, opts Options) (scanResult, error) {
	r := opts.Resume
	if r == nil {
		return scan(f, path)
	}
	if want := (uint64(r.Head) + indexEvery - 1) / indexEvery; uint64(len(r.Offsets)) == want && r.Size >= 0 {
		crc, whole, err := crcPrefix(f, r.Size)
		if err != nil {
			return scanResult{}, fmt.Errorf("eventlog: read %s: %w", path, err)
		}
		if whole && crc == r.CRC {
			return scanFrom(f, path, scanResult{head: r.Head, goodSize: r.Size, offsets: slices.Clone(r.Offsets), crc: crc, resumed: true})
		}
	}
	opts.Logger.Info("eventlog: the saved resume point does not match the log; reading the whole log", "log", path)
	return scan(f, path)
}

// crcPrefix is the CRC-32C of the first n bytes of f; whole is false if f
// is shorter than n.
func crcPrefix(f *os.File, n int64) (crc uint32, whole bool, err error) {
	h := crc32.New(castagnoli)
	// Reads of 1 MiB: a mount checks the whole prefix (hundreds of
	// megabytes for a long history), and io.Copy's 32 KiB reads made the
	// system calls cost twice the CRC itself.
	m, err := io.CopyBuffer(h, io.NewSectionReader(f, 0, n), make([]byte, 1<<20))
	if err != nil {
		return 0, false, err
	}
	return h.Sum32(), m == n, nil
}

// scan reads the whole log, checking every line. It returns a *CorruptError
// for damage that is not a torn tail.
func scan(r io.ReaderAt, path string) (scanResult, error) {
	return scanFrom(r, path, scanResult{})
}

// scanFrom reads the log from res.goodSize on, res holding what is known of
// the lines before it (head, offsets, crc), checking every line. A line that
// fails is a torn tail to cut (res.tornAt) only if it may be one (tailError)
// and no valid line follows it; otherwise it is damage, a *CorruptError.
func scanFrom(r io.ReaderAt, path string, res scanResult) (scanResult, error) {
	res.tornAt = -1
	d := newDecoder(io.NewSectionReader(r, res.goodSize, 1<<62), path, res.goodSize, res.head)
	for {
		start := d.off
		ev, line, err := d.next()
		if err == io.EOF {
			break
		}
		var te *tailError
		if errors.As(err, &te) && te.incomplete && res.writing {
			break // a line being written, not a tail to cut
		}
		if errors.As(err, &te) {
			if d.validLineFollows() {
				return res, te.CorruptError
			}
			res.tornAt = start
			break
		}
		if err != nil {
			return res, err
		}
		if (uint64(ev.Seq)-1)%indexEvery == 0 {
			res.offsets = append(res.offsets, start)
		}
		res.head = ev.Seq
		res.goodSize = d.off
		res.crc = crc32.Update(res.crc, castagnoli, line)
	}
	res.fileSize = d.off
	return res, nil
}

// Resume is the log as written so far, for Options.Resume of a later Open:
// every line up to the head, checked by this Log's Open or written by it.
func (l *Log) Resume() Resume {
	l.mu.Lock()
	defer l.mu.Unlock()
	return Resume{Head: l.head, Size: l.size, CRC: l.crc, Offsets: slices.Clone(l.offsets)}
}

// Resumed reports whether Open took over Options.Resume's prefix (the file
// still began with it) rather than reading the whole log.
func (l *Log) Resumed() bool { return l.resumed }

// Path is the log file's path.
func (l *Log) Path() string { return l.path }

// SessionID is the session id written into this Log's events.
func (l *Log) SessionID() string { return l.opts.SessionID }

// Head is the last sequence written (durable when Options.Sync is set).
func (l *Log) Head() record.Seq {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.head
}

// Synced is the last sequence known durable: every line up to it has been
// fdatasynced (or was found in the file at open).
func (l *Log) Synced() record.Seq {
	l.syncMu.Lock()
	defer l.syncMu.Unlock()
	return l.synced
}

// Append writes one event with the next sequence. payload is marshalled to
// JSON (a json.RawMessage is used as is). With Options.Sync it returns only
// once the line is durable.
func (l *Log) Append(ctx context.Context, typ string, payload any) (record.Event, error) {
	evs, err := l.AppendBatch(ctx, []Record{{Type: typ, Payload: payload}})
	if err != nil {
		return record.Event{}, err
	}
	return evs[0], nil
}

// Record is one event to append: its type and payload.
type Record struct {
	Type    string
	Payload any
}

// AppendBatch writes several events with consecutive sequences in one write.
// An empty batch writes nothing. A crash can keep a prefix of the batch (the
// whole lines that reached the file), never a part of a line.
func (l *Log) AppendBatch(ctx context.Context, recs []Record) ([]record.Event, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if len(recs) == 0 {
		return nil, nil
	}
	payloads := make([]json.RawMessage, len(recs))
	for i, r := range recs {
		if r.Type == "" {
			// Open refuses such a line, so never write one.
			return nil, errors.New("eventlog: append: empty event type")
		}
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
	if l.failed != nil {
		err := l.failed
		l.mu.Unlock()
		return nil, err
	}
	evs := make([]record.Event, len(recs))
	var buf []byte
	var starts []int64
	for i, r := range recs {
		evs[i] = record.Event{
			ID:        l.opts.NewID(),
			SessionID: l.opts.SessionID,
			Seq:       l.head + record.Seq(i) + 1,
			Type:      r.Type,
			CreatedAt: l.opts.Now().UTC(),
			Payload:   payloads[i],
		}
		starts = append(starts, l.size+int64(len(buf)))
		var err error
		if buf, err = evs[i].AppendJSON(buf); err != nil {
			l.mu.Unlock()
			return nil, err
		}
		buf = append(buf, '\n')
	}
	n, err := writeAt(l.f, buf, l.size)
	if err == nil && n != len(buf) {
		err = io.ErrShortWrite
	}
	if err != nil {
		err = fmt.Errorf("eventlog: append seq %d: %w", evs[0].Seq, err)
		// Cut whatever part reached the file, so that the file ends on
		// a line boundary again and the next append (which writes at
		// l.size) cannot leave a remnant of this one after its line. If
		// the cut fails too, what follows the last good line is
		// unknown: refuse to write after it (a later Open cuts it as a
		// torn tail).
		if terr := truncate(l.f, l.size); terr != nil {
			l.failed = fmt.Errorf("%w: %w; cutting it back failed: %w", ErrFailed, err, terr)
			err = l.failed
		}
		l.mu.Unlock()
		return nil, err
	}
	for i, ev := range evs {
		if (uint64(ev.Seq)-1)%indexEvery == 0 {
			l.offsets = append(l.offsets, starts[i])
		}
	}
	l.size += int64(n)
	l.crc = crc32.Update(l.crc, castagnoli, buf)
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
		// Checked, compacted and HTML-escaped in one pass, as encoding/json
		// writes a RawMessage field (the envelope once was one).
		b, err := json.Marshal(v)
		if err != nil || len(v) == 0 {
			return nil, errors.New("invalid JSON")
		}
		return b, nil
	default:
		return json.Marshal(p)
	}
}

// Sync makes every line written so far durable.
func (l *Log) Sync() error {
	return l.syncTo(l.Head())
}

// syncTo returns once line seq is durable. Callers that arrive while an
// fdatasync runs wait for it to end; those whose lines it covered return at
// once, and one of the others starts the next, covering every line written
// meanwhile: one fdatasync serves all of them (group commit). The fdatasync
// runs without syncMu held, so that covered callers are never held up
// behind a later one.
//
// A failed fdatasync fails the Log for good (ErrFailed). Linux reports a
// writeback error to an fsync once and may drop the dirty pages it could not
// write: a second fdatasync then succeeds without the lost lines ever
// reaching the disk ("fsyncgate"). Retrying would acknowledge later lines
// written after a hole, so no later line is acknowledged at all.
func (l *Log) syncTo(seq record.Seq) error {
	l.syncMu.Lock()
	defer l.syncMu.Unlock()
	for {
		if l.synced >= seq {
			return nil
		}
		if err := l.failedErr(); err != nil {
			return err
		}
		if l.fileClosed {
			return ErrClosed
		}
		if !l.syncing {
			break
		}
		l.syncDone.Wait()
	}
	l.syncing = true
	target := l.Head() // every line up to here is written
	l.syncMu.Unlock()
	err := fdatasync(l.f)
	l.syncMu.Lock()
	l.syncing = false
	l.syncDone.Broadcast()
	if err != nil {
		l.mu.Lock()
		if l.failed == nil {
			l.failed = fmt.Errorf("%w: sync up to seq %d: %w", ErrFailed, target, err)
		}
		failed := l.failed
		l.mu.Unlock()
		return failed
	}
	l.synced = max(l.synced, target)
	return nil
}

// failedErr returns l.failed.
func (l *Log) failedErr() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.failed
}

// Close syncs and closes the log, releasing the writer's lock. Appends after
// Close fail with ErrClosed; one racing with it either lands before the final
// sync or is refused.
func (l *Log) Close() error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil
	}
	l.closed = true // no line is written after this point
	head := l.head
	l.mu.Unlock()
	serr := l.syncTo(head)
	// Never while an fdatasync runs on the descriptor.
	l.syncMu.Lock()
	for l.syncing {
		l.syncDone.Wait()
	}
	l.fileClosed = true
	cerr := l.f.Close()
	l.syncMu.Unlock()
	if serr != nil {
		return serr
	}
	return cerr
}

// Events yields the events with sequence >= from, up to the head at the time
// of the call, reading the file as it goes (never the whole log in memory).
func (l *Log) Events(from record.Seq) iter.Seq2[record.Event, error] {
	l.mu.Lock()
	head, size := l.head, l.size
	// Start at the indexed line at or before from: line first, at off.
	var off int64
	first := record.Seq(1)
	if from > 1 && len(l.offsets) > 0 {
		i := min(int((uint64(from)-1)/indexEvery), len(l.offsets)-1)
		off = l.offsets[i]
		first = record.Seq(i*indexEvery + 1)
	}
	l.mu.Unlock()
	return func(yield func(record.Event, error) bool) {
		if from > head {
			return
		}
		f, err := os.Open(l.path)
		if err != nil {
			yield(record.Event{}, fmt.Errorf("eventlog: %w", err))
			return
		}
		defer f.Close()
		readLines(newDecoder(io.NewSectionReader(f, off, size-off), l.path, off, first-1), from, head, false, yield)
	}
}

// ReadFile yields the events of the log at path with sequence >= from,
// without taking the writer's lock and without repairing anything: a torn
// tail simply ends the iteration. For read-only tools.
func ReadFile(path string, from record.Seq) iter.Seq2[record.Event, error] {
	return func(yield func(record.Event, error) bool) {
		f, err := os.Open(path)
		if err != nil {
			yield(record.Event{}, fmt.Errorf("eventlog: %w", err))
			return
		}
		defer f.Close()
		readLines(newDecoder(f, path, 0, 0), from, ^record.Seq(0), true, yield)
	}
}

// Check scans the log at path without changing it and reports its head, the
// size of a torn tail (0 if none), and a *CorruptError for other damage. It
// is what `zerofs verify` runs.
func Check(path string) (head record.Seq, tornBytes int64, err error) {
	return check(path, false)
}

// CheckLive is Check for a log that a running writer holds (the store of a
// mounted workspace). The writer's Open cut any torn tail, so an incomplete
// last line is one being written: it is left out (head is the last whole
// line) rather than reported, and nothing waits for the writer to finish it.
func CheckLive(path string) (head record.Seq, tornBytes int64, err error) {
	return check(path, true)
}

func check(path string, writing bool) (head record.Seq, tornBytes int64, err error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, 0, fmt.Errorf("eventlog: %w", err)
	}
	defer f.Close()
	sc, err := scanFrom(f, path, scanResult{writing: writing})
	if err != nil {
		return sc.head, 0, err
	}
	if sc.tornAt >= 0 {
		tornBytes = sc.fileSize - sc.tornAt
	}
	return sc.head, tornBytes, nil
}
