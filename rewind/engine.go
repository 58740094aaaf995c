package rewind

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/zerofs/zerofs/blobstore"
	"github.com/zerofs/zerofs/eventlog"
	"github.com/zerofs/zerofs/internal/durable"
	"github.com/zerofs/zerofs/record"
	"github.com/zerofs/zerofs/rewind/internal/index"
)

// Options configure Open.
type Options struct {
	// StoreDir is the store: events.jsonl, blobs/, rewind-intent.json.
	StoreDir string
	// Sync: fsync every capture before the change proceeds ("--sync always").
	// Otherwise ("--sync batch") a flusher fsyncs within BatchDelay.
	Sync bool
	// BatchDelay bounds how long a batch capture waits for its fsync
	// (default 5ms).
	BatchDelay time.Duration
	// AutoStep, when > 0, begins a step labelled "auto" at the first change
	// after this much idle time.
	AutoStep time.Duration
	// MaxBlobSize, when > 0, records larger files as skipped.
	MaxBlobSize int64
	// NoCompress stores before-states uncompressed (for measurements).
	NoCompress bool
	// MaxStoreSize, when > 0, bounds the store (log and blobs): after a
	// step boundary, in the background, a store found larger has its
	// oldest history pruned (a history_pruned event with reason
	// "max-store-size") until it fits, never the current step's.
	MaxStoreSize int64
	// Logger for recovery notes and slow fsyncs. Default slog.Default().
	Logger *slog.Logger
	// Now is the clock that stamps events and measures AutoStep's idle
	// time (time.Now when nil; tests set it to speak of days, or of idle
	// gaps, without waiting for them: see internal/index/thin.go).
	Now func() time.Time
	// OpenWriters, when set, names the files held open for writing whose
	// writes never pass through Begin (FUSE passthrough sends them straight
	// to the backing file, so no later write can capture them). Every step
	// boundary (BeginStep, an auto step, the end of a rewind) captures them
	// in the new step before it returns, so @T stays exact for them too.
	// It is called with the workspace lock held and must not take it.
	OpenWriters func() []string
	// OpenForWrite, when set, reports whether a handle holds the file with
	// inode ino on device dev open for writing (through the mount). A file
	// about to be removed is kept (Change.Removed) only when it is not;
	// it is asked after the store registered the inode as being kept, and
	// an open for writing registers its handle before it calls Detach.
	OpenForWrite func(dev, ino uint64) bool
	// RenameRecords records a directory's rename as one rename record
	// (RenameDir) instead of a capture of both subtrees.
	RenameRecords bool
	// Ignore are gitignore patterns (mount's --ignore) that apply after
	// .zeroignore's: the paths they match are never captured or touched
	// (ignore.go).
	Ignore []string
}

// Step is the current step: the sequence that began it (its tool_call, or
// the rewind or open that ended the previous one) and its label.
type Step struct {
	Seq   record.Seq
	Label string
	// ByHand: the step was begun for no agent session by a process outside
	// every known agent's tree (`zerofs step`, `zerofs run`, an auto step):
	// a person asked for it, so changes from outside the agents' trees are
	// its own, not a person's change beside it (session.go).
	ByHand bool
}

// Entry is the state of one path at some sequence.
type Entry struct {
	// Exists is false when the path did not exist (or was hidden by an
	// ancestor that did not exist or was not a directory).
	Exists bool
	// Live means the state is the path as it is now in the workspace; State
	// was filled from lstat (no Blob).
	Live bool
	// State is the before-state recorded (when !Live) or the live state.
	// For a live file, State.Bytes is its size and State.Mode its
	// permission bits.
	State record.FileState
	// From is the checkpoint sequence the state came from (0 when Live).
	From record.Seq
}

// DirEntry is a name in a directory at some sequence.
type DirEntry struct {
	Name  string
	Entry Entry
}

// Engine is an open workspace history: the event log, the blobs, the index
// over them, and the current step.
type Engine struct {
	opts  Options
	ws    workspace
	log   *eventlog.Log
	blobs *blobstore.Store
	// state is everything derived from the log (index.State: the index,
	// the marks, the cut and the thins, the last rewind), folded by one
	// function as events are read and appended; index is its Index.
	state *index.State
	index *index.Index

	// wsMu is the workspace lock: every mutating operation holds it for
	// reading from its capture through its syscall (Begin/release); a
	// rewind, a step boundary and gc hold it for writing.
	wsMu sync.RWMutex

	capMu sync.Mutex // guards step, sessions, agents, captured, inflight, lastActivity
	// step is the newest step: the one a change belongs to unless it was
	// made by a process of another session's open step (sessions).
	step Step
	// sessions are the steps agent sessions have open (session.go),
	// oldest first; replaced, never changed in place.
	sessions []sessionStep
	// agents are the agent processes of the sessions known since the
	// engine opened, oldest first; replaced, never changed in place. While
	// there is one, a change by a process outside all of their trees is a
	// person's (session.go).
	agents []Proc
	// captured holds the paths captured since the newest step began, each
	// with the step it was captured in: a change in another step captures
	// the path again.
	captured map[string]record.Seq
	// inflight holds captures under way, so a second change to the same
	// path waits for the first capture instead of capturing twice.
	inflight     map[string]*capture
	lastActivity time.Time
	// moves are the rename records appended since the newest step began
	// (rename.go).
	moves []index.Rename
	// mvMu excludes captures (read) while a rename record is appended and
	// its rename made (write).
	mvMu sync.RWMutex
	// recovering is the checkpoint of the rewind Open is finishing (0
	// otherwise): the present content a rename record sends a state to
	// is the before-state that checkpoint recorded, when it recorded one
	// (the interrupted rewind may have changed it). Set only while Open
	// runs alone.
	recovering record.Seq

	// results finds the step of an after-tool hook's result (result.go).
	results resultIndex

	// stepSeq mirrors step.Seq for lock-free reads on the write path.
	stepSeq atomic.Uint64

	// flusher makes batch captures durable (flusher.go); namer names
	// stashes (stash.go, namer.go); snapshotter writes the index snapshot
	// (snapshot.go). Each owns its goroutine, lock and stop.
	flusher     *flusher
	namer       *namer
	snapshotter *snapshotter
	// pruner keeps the store within Options.MaxStoreSize (bound.go).
	pruner *pruner
	// failed holds the first failed flush or unrecoverable rewind: history
	// can no longer be made durable, so every later change is refused with
	// it. Read without a lock on every change.
	failed atomic.Pointer[error]

	closeOnce sync.Once

	// snapHead is the head covered by the index snapshot in the store
	// (0: none). Written under snapMu; read by snapshotDue and Close.
	snapHead atomic.Uint64
	// snapMu serialises index snapshots (snapshot.go), from the cut to
	// the rename, so they go in place in order; taken before wsMu, and
	// kept after letting go of wsMu while a snapshot is encoded.
	snapMu sync.Mutex
	// snapEvery is snapshotEvery when the engine was opened.
	snapEvery record.Seq

	// ign is what .zeroignore and Options.Ignore ignore (ignore.go).
	ign ignoreState
}

// capture is one path's capture under way.
type capture struct {
	done chan struct{}
	err  error
}

// Open opens the engine on the workspace whose root directory is root (an
// open directory the engine keeps using; it never opens the workspace by
// path), with the store in opts.StoreDir. It takes the log's writer lock,
// builds the index from the log, and finishes an interrupted rewind.
func Open(ctx context.Context, root *os.File, opts Options) (*Engine, error) {
	if opts.StoreDir == "" {
		return nil, errors.New("rewind: no store directory")
	}
	if opts.BatchDelay <= 0 {
		opts.BatchDelay = 5 * time.Millisecond
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if err := os.MkdirAll(opts.StoreDir, 0o700); err != nil {
		return nil, fmt.Errorf("rewind: store: %w", err)
	}
	if err := checkStoreOwner(opts.StoreDir); err != nil {
		return nil, err
	}
	if err := checkStoreTree(opts.StoreDir); err != nil {
		return nil, err
	}
	if err := ensureGitignore(opts.StoreDir); err != nil {
		return nil, fmt.Errorf("rewind: store: %w", err)
	}
	// The snapshot is a cache: any problem with it means reading the
	// whole log, as if there were none.
	snapState, resume, snapErr := index.ReadSnapshot(opts.StoreDir)
	if snapErr != nil && !errors.Is(snapErr, os.ErrNotExist) {
		opts.Logger.Warn("rewind: rebuilding the index from the whole log", "reason", snapErr)
	}
	logOpts := eventlog.Options{Sync: opts.Sync, Logger: opts.Logger, Now: opts.Now}
	if snapErr == nil {
		logOpts.Resume = &resume
	}
	log, err := eventlog.Open(filepath.Join(opts.StoreDir, record.LogName), logOpts)
	if err != nil {
		return nil, err
	}
	blobs, err := blobstore.Open(filepath.Join(opts.StoreDir, BlobsName), blobstore.Options{Sync: opts.Sync, NoCompress: opts.NoCompress})
	if err != nil {
		log.Close()
		return nil, err
	}
	if !sameFilesystem(root, blobs.Dir()) {
		blobs.KeepOff(CopyOtherFS)
	}
	if err := blobs.CleanTemp(); err != nil {
		blobs.Close()
		log.Close()
		return nil, err
	}
	if err := removeSnapshotTemps(opts.StoreDir); err != nil {
		blobs.Close()
		log.Close()
		return nil, err
	}
	e := &Engine{
		opts:      opts,
		ws:        workspace{root: root},
		log:       log,
		blobs:     blobs,
		state:     index.NewState(),
		captured:  map[string]record.Seq{},
		inflight:  map[string]*capture{},
		snapEvery: snapshotEvery,
	}
	e.snapshotter = newSnapshotter(e.snapshotIfDue)
	e.pruner = newPruner(e.pruneToBound)
	e.flusher = newFlusher(opts.BatchDelay, e.flush, e.snapshotAfterFlush, func(err error) {
		opts.Logger.Error("rewind: flushing captures failed; refusing further changes", "err", err)
	})
	e.namer = newNamer(e.nameStashesLocked, func() int { return e.index.UnnamedCount() }, func(err error) {
		if e.syncFailed() == nil {
			opts.Logger.Warn("rewind: naming removed files' stashes failed; they are named at the next read or mount", "err", err)
		}
	})
	from := record.Seq(1)
	if snapErr == nil && log.Resumed() {
		e.state = snapState
		e.snapHead.Store(uint64(resume.Head))
		from = resume.Head + 1
	}
	e.index = e.state.Index()
	if err := e.load(from); err != nil {
		blobs.Close()
		log.Close()
		return nil, err
	}
	if e.snapshotDue() {
		if err := e.writeSnapshotLocked(); err != nil {
			opts.Logger.Warn("rewind: could not save the index snapshot; the next mount reads the whole log", "err", err)
		}
	}
	e.setStep(Step{Seq: log.Head()})
	if err := e.recoverRename(ctx); err != nil {
		blobs.Close()
		log.Close()
		return nil, err
	}
	if err := e.recoverRewind(ctx); err != nil {
		blobs.Close()
		log.Close()
		return nil, err
	}
	if err := e.recoverStashes(ctx); err != nil {
		blobs.Close()
		log.Close()
		return nil, err
	}
	e.loadIgnore() // after a recovered rewind, which may have restored .zeroignore
	e.flusher.start()
	e.namer.start()
	e.snapshotter.start()
	e.pruner.start()
	return e, nil
}

// gitignore is the store's .gitignore (SPEC, Trust): the store ignores
// everything in it, itself included, so that an unmounted workspace under
// git never commits its own history.
const gitignore = "*\n"

// ensureGitignore gives a new store its .gitignore, and an older one too.
func ensureGitignore(dir string) error {
	b, err := os.ReadFile(filepath.Join(dir, GitignoreName))
	if err == nil && string(b) == gitignore {
		return nil
	}
	return durable.WriteFileAtomic(dir, GitignoreName, []byte(gitignore), 0o600)
}

// load folds the log's events from sequence from on into the state.
func (e *Engine) load(from record.Seq) error {
	for ev, err := range e.log.Events(from) {
		if err != nil {
			return err
		}
		if err := e.state.Add(ev); err != nil {
			return err
		}
	}
	return nil
}

// Thinned is the intervals of states thinned away by gc, merged and
// sorted (internal/index/thin.go): @T with After < T < Before no longer exists. It
// takes no lock.
func (e *Engine) Thinned() []record.ThinInterval { return e.state.Thinned() }

// HasState reports whether the state at t is in the history: 0 <= t <=
// head, not before the pruned history, not thinned away. It takes no lock.
func (e *Engine) HasState(t record.Seq) bool { return e.checkSeq(t) == nil }

// setStep starts a new step; the caller holds capMu or is single-threaded.
func (e *Engine) setStep(s Step) {
	e.step = s
	e.captured = map[string]record.Seq{}
	e.moves = nil
	e.stepSeq.Store(uint64(s.Seq))
	e.ignoreSettled()
}

// Close flushes everything and releases the store.
func (e *Engine) Close() error {
	var err error
	e.closeOnce.Do(func() {
		e.pruner.close()
		e.namer.close()
		e.snapshotter.close()
		e.flusher.close()
		e.snapMu.Lock()
		defer e.snapMu.Unlock()
		e.wsMu.Lock()
		defer e.wsMu.Unlock()
		err = e.NameStashes(context.Background())
		if err == nil {
			err = e.Sync()
		}
		if err == nil && e.Head() != record.Seq(e.snapHead.Load()) {
			if serr := e.writeSnapshotLocked(); serr != nil {
				e.opts.Logger.Warn("rewind: could not save the index snapshot; the next mount reads the whole log", "err", serr)
			}
		}
		if cerr := e.blobs.Close(); err == nil {
			err = cerr
		}
		if cerr := e.log.Close(); err == nil {
			err = cerr
		}
	})
	return err
}

// Head is the last sequence written.
func (e *Engine) Head() record.Seq { return e.log.Head() }

// Log is the event log (for readers: Events).
func (e *Engine) Log() *eventlog.Log { return e.log }

// Blobs is the blob store.
func (e *Engine) Blobs() *blobstore.Store { return e.blobs }

// Step is the current step.
func (e *Engine) Step() Step {
	e.capMu.Lock()
	defer e.capMu.Unlock()
	return e.step
}

// PrunedBefore is the start of history: states below it were pruned by GC
// (0 when nothing was). It takes no lock.
func (e *Engine) PrunedBefore() record.Seq { return e.state.Pruned() }

// StepAtOrAfter is when the first step at or after t began: a path not
// captured since t that changed after then changed outside the mount
// (ok is false when no step began since t).
func (e *Engine) StepAtOrAfter(t record.Seq) (at time.Time, ok bool) { return e.state.StepAtOrAfter(t) }

// LastRewind is the last rewind's payload and sequence, if any.
func (e *Engine) LastRewind() (record.RewindPayload, record.Seq, bool) {
	p, at := e.state.LastRewind()
	return p, at, at != 0
}

// BeginStep flushes pending captures and appends a tool_call event with
// payload {"name": label} merged with extra (a JSON object, or nil). Changes
// after it belong to the new step (but see BeginStepAs: those of another
// session's processes still belong to that session's step). It waits for
// changes under way to finish, so the boundary is exact.
func (e *Engine) BeginStep(ctx context.Context, label string, extra json.RawMessage) (record.Event, error) {
	return e.BeginStepAs(ctx, Caller{}, label, extra)
}

// captureOpenWriters captures, in the step that just began, every file
// Options.OpenWriters names. The caller holds the workspace lock (for
// writing at a step or a rewind, for reading at an auto step) and not capMu.
func (e *Engine) captureOpenWriters(ctx context.Context) error {
	if e.opts.OpenWriters == nil {
		return nil
	}
	paths := e.opts.OpenWriters()
	if len(paths) == 0 {
		return nil
	}
	changes := make([]Change, len(paths))
	for i, p := range paths {
		changes[i] = Change{Path: p}
	}
	if err := e.CaptureLocked(ctx, Caller{}, changes...); err != nil {
		return fmt.Errorf("rewind: capture files open for writing at the step boundary: %w", err)
	}
	return nil
}

// beginStepLocked appends the tool_call and starts the step; the caller
// holds capMu.
func (e *Engine) beginStepLocked(ctx context.Context, label string, payload map[string]any) (record.Event, error) {
	if err := e.Sync(); err != nil {
		return record.Event{}, err
	}
	ev, err := e.log.Append(ctx, record.TypeToolCall, payload)
	if err != nil {
		return record.Event{}, err
	}
	e.markAppended()
	e.setStep(Step{Seq: ev.Seq, Label: label})
	e.state.AddStep(ev)
	return ev, nil
}

// Sync makes every capture so far durable: blobs first, then the log.
func (e *Engine) Sync() error { return e.flusher.sync() }

// preSync is the Sync a step boundary (a step, a turn, an auto step) makes
// before it takes the workspace lock or capMu: the boundary must wait for
// the captures before it to be durable (SPEC: in batch mode, always before
// a step begins), but changes by other processes, which take those locks,
// need not wait with it. The boundary's own Sync, under the locks, then
// has only what was appended meanwhile to make durable: usually nothing
// (a flush that finds nothing pending costs no system call).
func (e *Engine) preSync() error {
	if e.opts.Sync {
		return nil // every capture is durable before its change proceeds
	}
	return e.Sync()
}

// flush is Sync's work, under the flusher's lock.
func (e *Engine) flush() error {
	if err := e.syncFailed(); err != nil {
		return err
	}
	start := time.Now()
	if err := e.blobs.Sync(); err != nil {
		return e.fail(err)
	}
	if err := e.log.Sync(); err != nil {
		return e.fail(err)
	}
	if d := time.Since(start); d > time.Second {
		e.opts.Logger.Warn("rewind: slow fsync", "took", d)
	}
	return nil
}

// markAppended, in batch mode, has the flusher make an event that is no
// checkpoint (a step's tool_call, a turn) durable within its window too,
// so that the next step's Sync does not pay an fdatasync for it, however
// long ago it was appended (docs/performance.md, Code written for speed).
func (e *Engine) markAppended() {
	if !e.opts.Sync {
		e.markDirty()
	}
}

// markDirty tells the batch flusher there is something to fsync.
func (e *Engine) markDirty() { e.flusher.mark() }

// snapshotAfterFlush wakes the snapshotter after the flusher's flush,
// when a snapshot is due.
func (e *Engine) snapshotAfterFlush() {
	if e.snapshotDue() {
		e.snapshotter.wake()
	}
}

// snapshotIfDue is the snapshotter's work: the index snapshot, when one is
// due and no record waits for its stash's name.
func (e *Engine) snapshotIfDue() {
	if e.snapshotDue() && !e.index.HasUnnamed() {
		if err := e.writeSnapshotBehind(); err != nil {
			e.opts.Logger.Warn("rewind: could not save the index snapshot", "err", err)
		}
	}
}

// snapshotDue reports whether the log has grown by snapshotEvery events
// since the index snapshot was written.
func (e *Engine) snapshotDue() bool {
	return e.Head()-record.Seq(e.snapHead.Load()) >= e.snapEvery
}

// syncFailed returns the sticky failure, if any.
func (e *Engine) syncFailed() error {
	if p := e.failed.Load(); p != nil {
		return *p
	}
	return nil
}

// fail records err as the sticky failure (the first one wins) and returns
// the sticky failure.
func (e *Engine) fail(err error) error {
	e.failed.CompareAndSwap(nil, &err)
	return e.syncFailed()
}
