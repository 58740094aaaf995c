package replicate

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/zerofs/zerofs/blobstore"
	"github.com/zerofs/zerofs/record"
	"github.com/zerofs/zerofs/rewind"
)

// Options configure a Replicator.
type Options struct {
	// Every is how often Run looks for new history (default 2s): at most
	// one log segment is written per Every while history is being made,
	// none while it is not.
	Every time.Duration
	// BaseEvery is the least time between two bases while history is
	// being made (default 30s): a base is what makes the newest history
	// restorable (doc.go). Once the log has not grown for three Every, a
	// base is made at once: a pause (an agent thinking, a session over)
	// leaves the replica restorable up to its last step.
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
	// Seen is the file of this user's notes of what replicas promised
	// (seen.go; "" for none): each base uploaded is noted there.
	Seen string
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
	// saveMu orders the writes of replica.json (the attempt's, and a
	// request's stall noted from its timer): each writes st as it is then.
	saveMu sync.Mutex

	// The rest belongs to the one goroutine that runs attempts.
	claimed      bool
	saved        time.Time       // when replica.json was last written
	known        map[string]bool // the blob objects the replica holds
	segs         []segment       // the replica's segments
	bases        []baseRef       // the replica's bases
	lastBase     time.Time
	lastLog      time.Time  // when the log last went up (logAlongside)
	lastHead     record.Seq // the head at an attempt, and since when
	quietSince   time.Time
	liveCache    map[string]liveBlob
	liveCacheSeq record.Seq
	// base is the newest base (the one a restore reads) and baseBlobs
	// the blob objects it names (nil: not read yet); collectDue says the
	// replica may hold objects no state it offers needs (collect.go).
	base       baseRef
	baseBlobs  map[string]bool
	collectDue bool
	// ret folds the local log up to retSeq, as the engine does (the log
	// the replica holds is the local log's prefix): which before-states
	// a base's history keeps, so which blobs it needs.
	ret    *rewind.Retention
	retSeq record.Seq
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
	r := &Replicator{eng: eng, b: b, url: u, dir: storeDir, opts: opts, codec: c, lock: lock, st: st}
	if w, ok := b.(interface{ watch(watcher) }); ok {
		w.watch(r.noteRequest)
	}
	return r, nil
}

// noteRequest shows a request that waits long in replica.json (status),
// and takes it away when it ends.
func (r *Replicator) noteRequest(req Request, done bool) {
	r.mu.Lock()
	switch {
	case !done:
		req.PID, req.Start = os.Getpid(), selfStart()
		r.st.Stalled = &req
	case r.st.Stalled != nil && r.st.Stalled.Op == req.Op && r.st.Stalled.Object == req.Object:
		r.st.Stalled = nil
	default:
		r.mu.Unlock()
		return
	}
	r.mu.Unlock()
	if err := r.save(); err != nil {
		r.opts.Logger.Warn("replicate: cannot write the state", "err", err)
	}
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
// A rewind.Progress in ctx hears how far it has come: first the blobs the
// new events name that the replica lacks ("replicate", with their count
// and bytes), then the base ("replicate base": first the blobs its
// history's before-states name, counted as they go up, then the paths of
// the tree it writes down with their bytes, of the total its listing
// gives).
func (r *Replicator) Once(ctx context.Context) error {
	if pr := rewind.ProgressOf(ctx); pr != nil {
		n, bytes, err := r.toUpload()
		if err != nil {
			return err
		}
		rewind.BeginCounting(pr, "replicate", "blobs", n, bytes)
	}
	return r.attempt(ctx, true)
}

// Final is the last attempt at a clean stop (an unmount), once the
// history is final: it uploads everything not yet replicated, a base at
// the current step's start included, with its network calls bounded
// together by timeout. Run must have returned. A timeout or an endpoint's
// failure is recorded in replica.json as any failed attempt is (status
// then says what the replica lacks); ctx's end (a second signal) is a
// stop. It returns the attempt's error and what was left behind: the
// events not replicated and the bytes the replica lacks (Pending).
func (r *Replicator) Final(ctx context.Context, timeout time.Duration) (behind uint64, pending int64, err error) {
	if timeout > 0 && timeout < r.opts.Timeout {
		r.opts.Timeout = timeout // the last attempt this Replicator makes
	}
	err = r.attempt(ctx, true)
	st := r.State()
	if h := r.eng.Head(); h > st.Logged {
		behind = uint64(h - st.Logged)
	}
	fr := &FinalReport{PID: os.Getpid(), At: time.Now().UTC(), Events: behind, Bytes: st.Pending}
	if err != nil {
		fr.Error = err.Error()
		if ctx.Err() != nil {
			fr.Error = "abandoned (a second signal): " + fr.Error
		}
	}
	r.mu.Lock()
	r.st.Final = fr
	r.mu.Unlock()
	if serr := r.save(); serr != nil {
		r.opts.Logger.Warn("replicate: cannot write the state", "err", serr)
	}
	return behind, st.Pending, err
}

// toUpload counts the blobs the events not yet replicated name and the
// replica does not hold, and their bytes.
func (r *Replicator) toUpload() (n, bytes int64, err error) {
	from := r.State().Logged + 1
	if r.eng.Head() < from {
		return 0, 0, nil
	}
	seen := map[blobstore.ID]bool{}
	for ev, err := range r.eng.Log().Events(from) {
		if err != nil {
			return 0, 0, err
		}
		ids, err := blobsOf(ev)
		if err != nil {
			return 0, 0, err
		}
		for _, id := range ids {
			if seen[id] || r.known[r.codec.blobName(id)] {
				continue
			}
			seen[id] = true
			size, err := r.eng.Blobs().BlobSize(id)
			if err != nil {
				continue // gone (a gc cut its states): not uploaded either
			}
			n, bytes = n+1, bytes+size
		}
	}
	return n, bytes, nil
}

// Claim takes the prefix's lease and lists what the replica holds, as the
// first attempt would: so that a refusal no retry changes (Permanent: the
// prefix is another store's, the key is not the replica's) is known at
// once, before Run. Each request is tried once: an endpoint that is down
// fails it at once (Run tries again). Any failure is recorded in
// replica.json. Run must not have started.
func (r *Replicator) Claim(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(context.WithValue(ctx, onceKey{}, true), r.opts.Timeout)
	defer cancel()
	err := r.begin(ctx)
	if err != nil {
		r.record(err, true)
	}
	return err
}

// Run replicates until ctx ends: an attempt every Options.Every, and after
// a failure again after a growing pause (up to a minute). Failures are
// logged and recorded in replica.json: nothing is lost while the endpoint
// is away, the store is the queue. A refusal no retry changes (Permanent)
// ends Run and is returned; otherwise it returns nil when ctx ends.
func (r *Replicator) Run(ctx context.Context) error {
	wait := r.opts.Every
	for {
		if err := r.attempt(ctx, false); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			if Permanent(err) {
				r.opts.Logger.Error("replicate: refused; replication stopped", "url", r.url.String(), "err", err)
				return err
			}
			r.opts.Logger.Warn("replicate: attempt failed; will retry", "url", r.url.String(), "err", err, "retry", wait)
			wait = min(wait*2, time.Minute)
		} else {
			wait = r.opts.Every
		}
		select {
		case <-ctx.Done():
			return nil
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
	start := r.State()
	defer func() {
		switch {
		case err == nil || parent.Err() == nil:
			r.record(err, final)
		default:
			// A stop (unmount, Ctrl-C) cut the attempt short: not a
			// failure. What it uploaded before is noted, and an earlier
			// failure it got past is no longer the last word.
			st := r.State()
			r.recordStop(st.Logged > start.Logged || st.Base > start.Base || st.Deleted > start.Deleted)
		}
	}()
	if !r.claimed {
		if err := r.begin(ctx); err != nil {
			return err
		}
	}
	if err := r.uploadLog(ctx); err != nil {
		return err
	}
	at, err := r.baseAt()
	if err != nil {
		return err
	}
	if h := r.eng.Head(); h != r.lastHead || r.quietSince.IsZero() {
		r.lastHead, r.quietSince = h, time.Now()
	}
	quiet := time.Since(r.quietSince) >= 3*r.opts.Every
	st := r.State()
	if (!st.Based || at > st.Base) && at <= st.Logged && (final || quiet || time.Since(r.lastBase) >= r.opts.BaseEvery) {
		rewind.ProgressIn(ctx).Begin("replicate base", 0, 0)
		// Removed files' stashes the namer has not named yet (it waits
		// for removals to pause) are named first and their event
		// replicated, so that the base is made after it when nothing
		// changed since the step began: one base, not one before the
		// names and another after them.
		if err := r.eng.NameStashes(ctx); err != nil {
			return err
		}
		if err := r.uploadLog(ctx); err != nil {
			return err
		}
		if at, err = r.baseAt(); err != nil {
			return err
		}
		if at <= r.State().Logged {
			if err := r.uploadBase(ctx, at); err != nil {
				return err
			}
		}
	}
	if r.collectDue && r.State().Based {
		return r.collect(ctx)
	}
	return nil
}

// logAlongside uploads the log's new events while a base is being made,
// once every Options.Every: a base may take long (a tree of files to
// read and send), and the log must not wait behind its blobs.
func (r *Replicator) logAlongside(ctx context.Context) error {
	if time.Since(r.lastLog) < r.opts.Every || r.eng.Head() <= r.State().Logged {
		return nil
	}
	r.lastLog = time.Now()
	return r.uploadLog(ctx)
}

// uploadLog uploads the log up to its head, in segments.
func (r *Replicator) uploadLog(ctx context.Context) error {
	r.lastLog = time.Now()
	for {
		more, err := r.uploadSegment(ctx)
		if err != nil || !more {
			return err
		}
	}
}

// baseAt is the sequence the next base is made at: the current step's
// start, or later when every event after it, up to the replicated log's
// end, changes no path (gc's cuts and thins, stashes named). The state
// there is the step's start, and a base there carries a cut made during
// the step, so the bucket can forget what it cut without waiting for the
// next step.
func (r *Replicator) baseAt() (record.Seq, error) {
	at, logged := r.eng.Step().Seq, r.State().Logged
	if at >= logged {
		return at, nil
	}
	for ev, err := range r.eng.Log().Events(at + 1) {
		if err != nil {
			return 0, err
		}
		if ev.Seq > logged {
			break
		}
		switch ev.Type {
		case record.TypeHistoryPruned, record.TypeHistoryThinned, record.TypeStashNamed:
			at = ev.Seq
		default:
			return at, nil
		}
	}
	return at, nil
}

// begin takes the lease and learns what the replica holds: a run that died
// after writing an object and before noting it finds it here.
func (r *Replicator) begin(ctx context.Context) error {
	st := r.State()
	if err := claim(ctx, r.b, r.url, st.Store, r.codec.keyCheck()); err != nil {
		return err
	}
	// Multipart uploads a crash cut short (ours: the lease says so).
	if a, ok := r.b.(interface {
		AbortStale(context.Context) (int, error)
	}); ok {
		if n, err := a.AbortStale(ctx); err != nil {
			r.opts.Logger.Warn("replicate: cannot abort unfinished multipart uploads", "url", r.url.String(), "err", err)
		} else if n > 0 {
			r.opts.Logger.Info("replicate: aborted unfinished multipart uploads of an earlier run", "url", r.url.String(), "uploads", n)
		}
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
	if err := gap(segs, bases, end); err != nil {
		// The log from end on goes up again, and fills it.
		r.opts.Logger.Warn("replicate: the replica is damaged; uploading what it lacks again", "url", r.url.String(), "err", err)
	}
	base, based := newestBase(bases, end)
	shrunk := end < st.Logged || st.Based && (!based || base.Seq < st.Base)
	if shrunk {
		r.opts.Logger.Warn("replicate: the replica holds less than this store uploaded to it (an older copy was put in its place, or objects were deleted); uploading what it lacks again",
			"url", r.url.String(), "uploaded-log", st.Logged, "uploaded-base", st.Base, "log", end, "base", base.Seq)
	}
	r.mu.Lock()
	if shrunk {
		r.st.Shrunk = &Shrink{At: time.Now().UTC(), PID: os.Getpid(), UploadedLog: st.Logged, UploadedBase: st.Base,
			HeldLog: end, HeldBase: base.Seq, HeldBased: based}
	}
	// The bucket is the truth about what it holds; replica.json may lag
	// it by the object written just before a crash.
	r.st.Logged, r.st.Base, r.st.Based = end, base.Seq, based
	r.mu.Unlock()
	if shrunk {
		// Said in status at once, before the upload that follows.
		if err := r.save(); err != nil {
			r.opts.Logger.Warn("replicate: cannot write the state", "err", err)
		}
	}
	r.known, r.segs, r.bases, r.claimed = known, segs, bases, true
	// A run that died while deleting left objects no state needs: the
	// first attempt deletes them.
	r.base, r.baseBlobs, r.collectDue = base, nil, based
	return nil
}

// newestBase is the base a restore reads: the newest within the log's
// end (of two at one sequence, the first by name).
func newestBase(bases []baseRef, end record.Seq) (baseRef, bool) {
	var out baseRef
	found := false
	for _, b := range bases {
		if b.Seq <= end && (!found || b.Seq > out.Seq || b.Seq == out.Seq && b.Name < out.Name) {
			out, found = b, true
		}
	}
	return out, found
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
	var named []blobstore.ID
	last := from - 1
	for ev, err := range r.eng.Log().Events(from) {
		if err != nil {
			return false, err
		}
		ids, err := blobsOf(ev)
		if err != nil {
			return false, err
		}
		named = append(named, ids...)
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
	// The blobs the events name first (at once: uploadBlobs). One gone
	// from the store belongs to history a gc cut or thinned (its states no
	// longer exist here): it is left out, and a base whose history still
	// offers those states is not made (uploadBase), so no restore ever
	// needs it.
	if _, err := r.uploadBlobs(ctx, named); err != nil {
		return false, err
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

// blobsOf is the blobs an event names: a checkpoint's records', a
// stash_named event's.
func blobsOf(ev record.Event) ([]blobstore.ID, error) {
	var names []string
	switch ev.Type {
	case record.TypeCheckpoint:
		var cp record.Checkpoint
		if err := json.Unmarshal(ev.Payload, &cp); err != nil {
			return nil, fmt.Errorf("replicate: event %d: %w", ev.Seq, err)
		}
		for _, f := range cp.Files {
			names = append(names, f.Blob)
		}
	case record.TypeStashNamed:
		var np struct {
			Named []struct {
				Blob string `json:"blob"`
			} `json:"named"`
		}
		if err := json.Unmarshal(ev.Payload, &np); err != nil {
			return nil, fmt.Errorf("replicate: event %d: %w", ev.Seq, err)
		}
		for _, n := range np.Named {
			names = append(names, n.Blob)
		}
	}
	var ids []blobstore.ID
	for _, n := range names {
		if n == "" {
			continue
		}
		id, err := blobstore.ParseID(n)
		if err != nil {
			return nil, fmt.Errorf("replicate: event %d: %w", ev.Seq, err)
		}
		ids = append(ids, id)
	}
	return ids, nil
}

// errGone: a blob the log names is no longer in the store.
var errGone = errors.New("replicate: blob gone from the store")

// uploadBase writes the base at seq, after every blob it names and every
// blob the history up to seq keeps (the states it offers need them). A
// base that cannot be whole yet is not made, and a later attempt makes
// one at a later step: one whose history names a stash no stash_named
// event names (nameAhead; a gc after seq cut the record), or a blob gone
// from the store (a gc after seq cut or thinned the states that need it;
// a base after that gc will not need it).
func (r *Replicator) uploadBase(ctx context.Context, seq record.Seq) error {
	ret, err := r.foldTo(seq)
	if err != nil {
		return err
	}
	if ret.HasUnnamed() {
		if err := r.nameAhead(seq); err != nil {
			return err
		}
		if ret.HasUnnamed() {
			r.opts.Logger.Info("replicate: base waits for a later step: a removed file's stash before it is named nowhere", "at", seq)
			return nil
		}
	}
	var need []blobstore.ID
	ret.Records(func(_ record.Seq, fs record.FileState) {
		if id, err := blobstore.ParseID(fs.Blob); err == nil {
			need = append(need, id)
		}
	})
	var gone []blobstore.ID
	for len(need) > 0 {
		n := min(len(need), 64)
		g, err := r.uploadBlobs(ctx, need[:n])
		if err != nil {
			return err
		}
		gone, need = append(gone, g...), need[n:]
		if err := r.logAlongside(ctx); err != nil {
			return err
		}
	}
	if len(gone) > 0 {
		err := fmt.Errorf("%w: %s", errGone, gone[0].Short())
		if r.eng.PrunedBefore() > ret.Pruned() || !slices.Equal(r.eng.Thinned(), ret.Thinned()) {
			r.opts.Logger.Info("replicate: base waits for a base after the gc that removed what its states need", "at", seq, "err", err)
			return nil
		}
		return err
	}
	b, next, err := r.makeBase(ctx, seq)
	if err != nil {
		return err
	}
	raw, err := encodeBase(b)
	if err != nil {
		return err
	}
	body := r.codec.seal(baseLogical(seq), raw)
	name := baseName(seq, body)
	if err := r.put(ctx, name, body); err != nil {
		return err
	}
	r.liveCache, r.liveCacheSeq = next, seq
	r.lastBase = time.Now()
	ref, _ := parseBase(name)
	r.bases = append(r.bases, ref)
	r.base, r.baseBlobs, r.collectDue = ref, r.blobNames(b), true
	r.mu.Lock()
	r.st.Base, r.st.Based = seq, true
	st := r.st
	r.mu.Unlock()
	if err := noteSeen(r.opts.Seen, r.b, r.url, Promise{Store: st.Store, Logged: st.Logged, Base: seq}, false); err != nil {
		r.opts.Logger.Warn("replicate: cannot note what the replica offers", "url", r.url.String(), "err", err)
	}
	return r.save()
}

// nameAhead gives the fold at seq the names of stashes it holds unnamed
// from the stash_named events after seq (rewind.Retention's NameAhead): a
// file removed before the step began whose stash was named after a change
// made in the step (the namer waits for removals to pause). A name changes
// no state, so the base at seq may carry it; only names the replica holds
// are taken, since a restore from the base reads them from the segments
// past it (restore.go: writeLog).
func (r *Replicator) nameAhead(seq record.Seq) error {
	logged := r.State().Logged
	for ev, err := range r.eng.Log().Events(seq + 1) {
		if err != nil {
			return err
		}
		if ev.Seq > logged {
			break // a restore finds only names the replica holds (restore.go: writeLog)
		}
		if err := r.ret.NameAhead(ev); err != nil {
			return err
		}
	}
	return nil
}

// blobNames is the blob objects base b names.
func (r *Replicator) blobNames(b Base) map[string]bool {
	out := map[string]bool{}
	for _, e := range b.Files {
		if id, err := blobstore.ParseID(e.Blob); err == nil && e.Kind == record.KindFile && !e.Skipped {
			out[r.codec.blobName(id)] = true
		}
	}
	return out
}

// foldTo folds the local log into r.ret up to seq (never back: bases only
// move forward) and returns it.
func (r *Replicator) foldTo(seq record.Seq) (*rewind.Retention, error) {
	if r.ret == nil {
		r.ret, r.retSeq = rewind.NewRetention(), 0
	}
	if seq <= r.retSeq {
		return r.ret, nil
	}
	for ev, err := range r.eng.Log().Events(r.retSeq + 1) {
		if err != nil {
			return nil, err
		}
		if ev.Seq > seq {
			break
		}
		if err := r.ret.Add(ev); err != nil {
			return nil, err
		}
		r.retSeq = ev.Seq
	}
	if r.retSeq < seq {
		return nil, fmt.Errorf("replicate: the log ends at %d, before %d", r.retSeq, seq)
	}
	return r.ret, nil
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
	r.saveMu.Lock()
	defer r.saveMu.Unlock()
	r.mu.Lock()
	r.st.Head = r.eng.Head()
	st := r.st
	r.mu.Unlock()
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
	changed = changed || r.st.Stalled != nil
	r.st.Stalled = nil // the attempt is over: no request of it waits
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
	r.saved = now
	if serr := r.save(); serr != nil {
		r.opts.Logger.Warn("replicate: cannot write the state", "err", serr)
	}
}

// recordStop notes in replica.json what the replica lacks when a stop
// cut an attempt short; an earlier error is cleared when the attempt had
// got past it (uploaded or deleted something).
func (r *Replicator) recordStop(progressed bool) {
	pending := r.pending()
	r.mu.Lock()
	changed := pending != r.st.Pending || progressed && r.st.LastError != "" || r.st.Stalled != nil
	r.st.Pending = pending
	r.st.Stalled = nil
	if progressed {
		r.st.LastError, r.st.LastErrorAt = "", time.Time{}
	}
	r.mu.Unlock()
	if !changed {
		return
	}
	if err := r.save(); err != nil {
		r.opts.Logger.Warn("replicate: cannot write the state", "err", err)
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
		if ev.Type != record.TypeCheckpoint {
			continue
		}
		var cp record.Checkpoint
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
