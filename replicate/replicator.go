package replicate

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/zerofs/zerofs/blobstore"
	"github.com/zerofs/zerofs/eventlog"
	"github.com/zerofs/zerofs/rewind"
)

// Options configure a Replicator.
type Options struct {
	// Every is how often Run looks for new history (default 2s): at most
	// one log segment is written per Every while history is being made,
	// none while it is not.
	Every time.Duration
	// BaseEvery is the least time between two bases (default 30s): a base
	// is what makes the newest history restorable (doc.go).
	BaseEvery time.Duration
	// SegmentBytes caps a segment's uncompressed size (default 8 MiB).
	SegmentBytes int
	// Timeout bounds one attempt's network calls together (default 5m).
	Timeout time.Duration
	// Logger gets one line per failed attempt. Default slog.Default().
	Logger *slog.Logger
	// Key, when set (32 bytes), makes the replica ciphertext only
	// (crypt.go).
	Key []byte
}

// Replicator copies one engine's history to one replica.
type Replicator struct {
	eng   *rewind.Engine
	b     Bucket
	url   URL
	dir   string
	opts  Options
	codec *codec
	lock  *os.File

	mu sync.Mutex // guards st
	st State

	// The rest belongs to the one goroutine that runs attempts.
	claimed      bool
	saved        time.Time       // when replica.json was last written
	known        map[string]bool // the blob objects the replica holds
	segs         []segment       // the replica's segments
	lastBase     time.Time
	liveCache    map[string]liveBlob
	liveCacheSeq eventlog.Seq
}

// Open prepares replication of eng's history (its store in storeDir) to
// the replica u in b. It only reads and locks local files: the network is
// first used by an attempt, so a mount never waits for an endpoint.
func Open(eng *rewind.Engine, b Bucket, u URL, storeDir string, opts Options) (*Replicator, error) {
	if opts.Every <= 0 {
		opts.Every = 2 * time.Second
	}
	if opts.BaseEvery <= 0 {
		opts.BaseEvery = 30 * time.Second
	}
	if opts.SegmentBytes <= 0 {
		opts.SegmentBytes = 8 << 20
	}
	if opts.Timeout <= 0 {
		opts.Timeout = 5 * time.Minute
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	c, err := newCodec(opts.Key)
	if err != nil {
		return nil, err
	}
	lock, err := lockStore(storeDir)
	if err != nil {
		return nil, err
	}
	st, err := loadState(storeDir, u)
	if err == nil {
		err = writeState(storeDir, st)
	}
	if err != nil {
		lock.Close()
		return nil, err
	}
	return &Replicator{eng: eng, b: b, url: u, dir: storeDir, opts: opts, codec: c, lock: lock, st: st}, nil
}

// Close releases the store's replicator lock.
func (r *Replicator) Close() error { return r.lock.Close() }

// State is where replication stands.
func (r *Replicator) State() State {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.st
}

// Once brings the replica up to date with the history as it is now, a
// base at the current step's start included, and returns the first error.
func (r *Replicator) Once(ctx context.Context) error {
	return r.attempt(ctx, true)
}

// Run replicates until ctx ends: an attempt every Options.Every, and after
// a failure again after a growing pause (up to a minute). Failures are
// logged and recorded in replica.json, never returned: nothing is lost
// while the endpoint is away, the store is the queue.
func (r *Replicator) Run(ctx context.Context) {
	wait := r.opts.Every
	for {
		if err := r.attempt(ctx, false); err != nil {
			if ctx.Err() != nil {
				return
			}
			r.opts.Logger.Warn("replicate: attempt failed; will retry", "url", r.url.String(), "err", err, "retry", wait)
			wait = min(wait*2, time.Minute)
		} else {
			wait = r.opts.Every
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
	}
}

// attempt is one pass: take the lease (first time), upload the segments
// the log has grown by, and a base when one is due (always when final).
func (r *Replicator) attempt(ctx context.Context, final bool) (err error) {
	parent := ctx
	ctx, cancel := context.WithTimeout(ctx, r.opts.Timeout)
	defer cancel()
	defer func() {
		if parent.Err() == nil { // a stop (unmount, Ctrl-C) is not a failure
			r.record(err, final)
		}
	}()
	if !r.claimed {
		if err := r.begin(ctx); err != nil {
			return err
		}
	}
	for {
		more, err := r.uploadSegment(ctx)
		if err != nil {
			return err
		}
		if !more {
			break
		}
	}
	step := r.eng.Step().Seq
	st := r.State()
	if (!st.Based || step > st.Base) && step <= st.Logged && (final || time.Since(r.lastBase) >= r.opts.BaseEvery) {
		if err := r.uploadBase(ctx, step); err != nil {
			return err
		}
	}
	return nil
}

// begin takes the lease and learns what the replica holds: a run that died
// after writing an object and before noting it finds it here.
func (r *Replicator) begin(ctx context.Context) error {
	st := r.State()
	if err := claim(ctx, r.b, r.url, st.Store, r.codec.keyCheck()); err != nil {
		return err
	}
	blobs, err := r.b.List(ctx, blobsDir)
	if err != nil {
		return err
	}
	known := make(map[string]bool, len(blobs))
	for _, n := range blobs {
		known[n] = true
	}
	segs, bases, err := listReplica(ctx, r.b)
	if err != nil {
		return err
	}
	_, end := chain(segs)
	var base eventlog.Seq
	based := false
	for _, b := range bases {
		if b.Seq <= end && (!based || b.Seq > base) {
			base, based = b.Seq, true
		}
	}
	r.mu.Lock()
	// The bucket is the truth about what it holds; replica.json may lag
	// it by the object written just before a crash.
	r.st.Logged, r.st.Base, r.st.Based = end, base, based
	r.mu.Unlock()
	r.known, r.segs, r.claimed = known, segs, true
	return nil
}

// listReplica lists the segments and bases of a replica.
func listReplica(ctx context.Context, b Bucket) ([]segment, []baseRef, error) {
	names, err := b.List(ctx, logDir)
	if err != nil {
		return nil, nil, err
	}
	var segs []segment
	for _, n := range names {
		if s, ok := parseSegment(n); ok {
			segs = append(segs, s)
		}
	}
	names, err = b.List(ctx, basesDir)
	if err != nil {
		return nil, nil, err
	}
	var bases []baseRef
	for _, n := range names {
		if s, ok := parseBase(n); ok {
			bases = append(bases, s)
		}
	}
	return segs, bases, nil
}

// uploadSegment uploads the events after the replica's last, up to the
// head or Options.SegmentBytes, after the blobs they name. more is true
// when it stopped at the size cap.
func (r *Replicator) uploadSegment(ctx context.Context) (more bool, err error) {
	from := r.State().Logged + 1
	if r.eng.Head() < from {
		return false, nil
	}
	// Only durable history leaves the machine: a batch-mode line not yet
	// fsynced could still be lost, and the replica would then name an
	// event the store never had.
	if err := r.eng.Sync(); err != nil {
		return false, err
	}
	var buf bytes.Buffer
	last := from - 1
	for ev, err := range r.eng.Log().Events(from) {
		if err != nil {
			return false, err
		}
		if err := r.uploadNamed(ctx, ev); err != nil {
			return false, err
		}
		line, err := json.Marshal(ev)
		if err != nil {
			return false, err
		}
		buf.Write(line)
		buf.WriteByte('\n')
		last = ev.Seq
		if buf.Len() >= r.opts.SegmentBytes {
			more = true
			break
		}
	}
	if last < from {
		return false, nil
	}
	body := r.codec.seal(segmentLogical(from, last), buf.Bytes())
	name := segmentName(from, last, 0, body)
	if err := r.put(ctx, name, body); err != nil {
		return false, err
	}
	r.segs = append(r.segs, segment{Name: name, First: from, Last: last})
	r.mu.Lock()
	r.st.Logged = last
	r.mu.Unlock()
	if err := r.save(); err != nil {
		return false, err
	}
	return more, r.compact(ctx)
}

// uploadNamed uploads the blobs an event's checkpoint names. A blob gone
// from the store belongs to history a gc cut (its state no longer exists
// anywhere): it is left out.
func (r *Replicator) uploadNamed(ctx context.Context, ev eventlog.Event) error {
	if ev.Type != eventlog.TypeCheckpoint {
		return nil
	}
	var cp rewind.Checkpoint
	if err := json.Unmarshal(ev.Payload, &cp); err != nil {
		return fmt.Errorf("replicate: event %d: %w", ev.Seq, err)
	}
	for _, f := range cp.Files {
		if f.Blob == "" {
			continue
		}
		id, err := blobstore.ParseID(f.Blob)
		if err != nil {
			return fmt.Errorf("replicate: event %d: %w", ev.Seq, err)
		}
		if err := r.uploadBlob(ctx, id, ev.Seq); err != nil {
			return err
		}
	}
	return nil
}

// uploadBlob uploads blob id from the store unless the replica holds it.
// at is the event naming it (0: a base).
func (r *Replicator) uploadBlob(ctx context.Context, id blobstore.ID, at eventlog.Seq) error {
	if r.known[r.codec.blobName(id)] {
		return nil
	}
	data, err := r.eng.Blobs().Get(id)
	if errors.Is(err, blobstore.ErrNotFound) && at > 0 && at < r.eng.PrunedBefore() {
		return nil
	}
	if err != nil {
		return fmt.Errorf("replicate: blob %s: %w", id.Short(), err)
	}
	return r.putBlob(ctx, id, data)
}

// putBlob uploads content data, whose sha256 is id.
func (r *Replicator) putBlob(ctx context.Context, id blobstore.ID, data []byte) error {
	name := r.codec.blobName(id)
	if r.known[name] {
		return nil
	}
	if err := r.put(ctx, name, r.codec.seal(name, data)); err != nil {
		return err
	}
	r.known[name] = true
	return nil
}

// uploadBase writes the base at seq, after every blob it names.
func (r *Replicator) uploadBase(ctx context.Context, seq eventlog.Seq) error {
	b, err := r.makeBase(ctx, seq)
	if err != nil {
		return err
	}
	raw, err := encodeBase(b)
	if err != nil {
		return err
	}
	body := r.codec.seal(baseLogical(seq), raw)
	if err := r.put(ctx, baseName(seq, body), body); err != nil {
		return err
	}
	r.lastBase = time.Now()
	r.mu.Lock()
	r.st.Base, r.st.Based = seq, true
	r.mu.Unlock()
	return r.save()
}

// put writes a new object; one that exists already (an earlier run wrote
// it: names are their content's hash) counts as written.
func (r *Replicator) put(ctx context.Context, name string, body []byte) error {
	err := r.b.PutNew(ctx, name, body)
	if errors.Is(err, ErrExists) {
		return nil
	}
	if err != nil {
		return err
	}
	r.mu.Lock()
	r.st.Objects++
	r.st.Bytes += int64(len(body))
	r.mu.Unlock()
	return nil
}

// save writes replica.json.
func (r *Replicator) save() error {
	r.mu.Lock()
	r.st.Head = r.eng.Head()
	st := r.st
	r.mu.Unlock()
	r.saved = time.Now()
	return writeState(r.dir, st)
}

// record notes how an attempt ended in replica.json (always when force).
func (r *Replicator) record(err error, force bool) {
	pending := r.pending()
	r.mu.Lock()
	now := time.Now().UTC()
	changed := force || r.st.LastSuccess.IsZero() || (err == nil) != (r.st.LastError == "") || err != nil && err.Error() != r.st.LastError ||
		pending != r.st.Pending || r.eng.Head() != r.st.Head
	r.st.Pending = pending
	if err != nil {
		r.st.LastError, r.st.LastErrorAt = err.Error(), now
	} else {
		r.st.LastError, r.st.LastErrorAt, r.st.LastSuccess = "", time.Time{}, now
	}
	r.mu.Unlock()
	// An idle store is not written every few seconds: a success that
	// changed nothing is noted at most once a minute.
	if !changed && now.Sub(r.saved) < time.Minute {
		return
	}
	if serr := r.save(); serr != nil {
		r.opts.Logger.Warn("replicate: cannot write the state", "err", serr)
	}
}

// pending is the bytes the replica lacks: the log's lines after the last
// replicated event, and the content their checkpoints name that the
// replica does not hold.
func (r *Replicator) pending() int64 {
	var n int64
	seen := map[blobstore.ID]bool{}
	for ev, err := range r.eng.Log().Events(r.State().Logged + 1) {
		if err != nil {
			break
		}
		if line, err := json.Marshal(ev); err == nil {
			n += int64(len(line)) + 1
		}
		if ev.Type != eventlog.TypeCheckpoint {
			continue
		}
		var cp rewind.Checkpoint
		if json.Unmarshal(ev.Payload, &cp) != nil {
			continue
		}
		for _, f := range cp.Files {
			if id, err := blobstore.ParseID(f.Blob); err == nil && !r.known[r.codec.blobName(id)] && !seen[id] {
				seen[id] = true
				n += f.Bytes
			}
		}
	}
	return n
}
