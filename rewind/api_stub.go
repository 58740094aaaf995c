package rewind

// This file fixes the Engine's API so the FUSE layer and the CLI can be built
// against it while the engine is being written. Each stub is replaced by its
// implementation.

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"time"

	"github.com/zerofs/zerofs/blobstore"
	"github.com/zerofs/zerofs/eventlog"
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
	// Logger for recovery notes and slow fsyncs. Default slog.Default().
	Logger *slog.Logger
}

// Step is the current step: the sequence that began it (its tool_call, or
// the rewind or open that ended the previous one) and its label.
type Step struct {
	Seq   Seq
	Label string
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
	State FileState
	// From is the checkpoint sequence the state came from (0 when Live).
	From Seq
}

// DirEntry is a name in a directory at some sequence.
type DirEntry struct {
	Name  string
	Entry Entry
}

// Result is what Rewind did.
type Result struct {
	Report Report
	// Seq is the session_rewind event's sequence.
	Seq Seq
	// Changed lists every workspace path the rewind created, replaced,
	// changed the mode of, or removed (parents before children), so the
	// FUSE layer can invalidate kernel caches for them.
	Changed []string
}

// Open opens the engine on the workspace whose root directory is root (an
// open directory the engine keeps using; it never opens the workspace by
// path), with the store in opts.StoreDir. It takes the log's writer lock,
// builds the index from the log, and finishes an interrupted rewind.
func Open(ctx context.Context, root *os.File, opts Options) (*Engine, error) {
	panic("unimplemented")
}

// Close flushes everything and releases the store.
func (e *Engine) Close() error { panic("unimplemented") }

// Head is the last sequence written.
func (e *Engine) Head() Seq { panic("unimplemented") }

// Log is the event log (for readers: Events).
func (e *Engine) Log() *eventlog.Log { panic("unimplemented") }

// Blobs is the blob store.
func (e *Engine) Blobs() *blobstore.Store { panic("unimplemented") }

// Step is the current step.
func (e *Engine) Step() Step { panic("unimplemented") }

// BeginStep flushes pending captures and appends a tool_call event with
// payload {"name": label} merged with extra (a JSON object, or nil). Changes
// after it belong to the new step.
func (e *Engine) BeginStep(ctx context.Context, label string, extra json.RawMessage) (eventlog.Event, error) {
	panic("unimplemented")
}

// Begin is called before every mutating operation. It takes the workspace
// lock for reading (until release is called; release is nil on error),
// begins an auto step if one is due, and captures each change not yet
// captured in the current step; the captures are durable (per Options.Sync)
// when it returns. It returns the current step's sequence, which a caller
// keeping a file open for writing remembers: when a later Begin returns a
// different step, the caller captures that file again with CaptureLocked.
// On error nothing was changed and the operation must fail.
func (e *Engine) Begin(ctx context.Context, who Caller, changes ...Change) (release func(), step Seq, err error) {
	panic("unimplemented")
}

// CaptureLocked captures changes in the current step; the caller holds the
// workspace lock through Begin.
func (e *Engine) CaptureLocked(ctx context.Context, who Caller, changes ...Change) error {
	panic("unimplemented")
}

// Sync makes every capture so far durable (blobs, then the log).
func (e *Engine) Sync() error { panic("unimplemented") }

// StateAt is the state of path at sequence t, ancestors included: a path
// under an ancestor that did not exist at t does not exist.
func (e *Engine) StateAt(path string, t Seq) (Entry, error) { panic("unimplemented") }

// ChildAt is the state of name in directory dir at t, given that dir existed
// as a directory at t (what a FUSE lookup needs: O(log n), no ancestor walk).
func (e *Engine) ChildAt(dir, name string, t Seq) (Entry, error) { panic("unimplemented") }

// ReadDirAt lists directory dir as it was at t, sorted by name. dir must
// have existed at t as a directory. Reserved names at the root are left out.
func (e *Engine) ReadDirAt(dir string, t Seq) ([]DirEntry, error) { panic("unimplemented") }

// OpenContent opens the content of a file state: the verified blob, or for
// a live entry the workspace file, read-only, never following a symlink.
func (e *Engine) OpenContent(ent Entry) (*os.File, error) { panic("unimplemented") }

// ReadLink is a symlink's target at a state (recorded or live).
func (e *Engine) ReadLink(ent Entry) (string, error) { panic("unimplemented") }

// Rewind makes the workspace equal to its state at t, records the rewind,
// and ends the current step. ErrNoSuchSeq when t > head.
func (e *Engine) Rewind(ctx context.Context, t Seq) (Result, error) { panic("unimplemented") }

// LastRewind is the last rewind's payload and sequence, if any.
func (e *Engine) LastRewind() (RewindPayload, Seq, bool) { panic("unimplemented") }

// GCResult is what GC did.
type GCResult struct {
	// Before is the new start of history: @T with T < Before is gone.
	Before Seq `json:"before"`
	// Seq is the history_pruned event's sequence.
	Seq          Seq   `json:"sequence"`
	BlobsRemoved int   `json:"blobsRemoved"`
	BytesFreed   int64 `json:"bytesFreed"`
}

// GC forgets states older than before: it appends a history_pruned event,
// then removes every blob that no checkpoint after before names (including
// blobs no event names at all, left by a crash between blob and event).
// ErrNoSuchSeq when before > head.
func (e *Engine) GC(ctx context.Context, before Seq) (GCResult, error) { panic("unimplemented") }

// PrunedBefore is the start of history: states below it were pruned by GC
// (0 when nothing was).
func (e *Engine) PrunedBefore() Seq { panic("unimplemented") }

// Engine is an open workspace history.
type Engine struct{}

var _ io.Closer = (*Engine)(nil)
