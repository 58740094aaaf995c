package history

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"log/slog"
	"math"

	"github.com/zerofs/zerofs/control"
	"github.com/zerofs/zerofs/record"
)

// Now stands for "the workspace as it is now" where a sequence is expected.
const Now record.Seq = math.MaxUint64

// Node is one path's state at some sequence.
type Node struct {
	Exists bool
	Kind   record.Kind
	Mode   uint32 // permission bits, setuid, setgid and sticky included
	Bytes  int64
	// Blob is the recorded blob, "" when unknown (live or mounted).
	Blob    string
	Target  string // a symlink's target
	Skipped bool   // the before-state was not kept
	Reason  string // why, when Skipped
}

// A Source is a workspace's history, read and changed the same way whether
// the workspace is mounted (through the daemon's control files and @T/
// views; the store is the daemon's) or not (through the engine, which then
// holds the store's lock until Close). Every front end (the CLI, an MCP
// server, a web timeline) is written once against it.
//
// Paths are workspace paths: slash-separated, relative to the root, clean,
// "" for the root. No method reads outside the workspace: a path under a
// symlink does not exist, and a symlink is never followed.
type Source interface {
	// Head is the last sequence written.
	Head() (record.Seq, error)
	// PrunedBefore is the start of history (0 when gc never ran).
	PrunedBefore() (record.Seq, error)
	// Thinned is the intervals of states gc thinned away (rewind.Engine.Thinned).
	Thinned() ([]record.ThinInterval, error)
	// Events yields the whole log in order.
	Events() iter.Seq2[record.Event, error]
	// Stat is path's state at t (Now for the live workspace). A sequence
	// above head or below the pruned history is record.ErrNoSuchSeq.
	Stat(path string, t record.Seq) (Node, error)
	// Content is a file's bytes or a symlink's target at t.
	Content(path string, t record.Seq) ([]byte, error)
	// Xattrs is a file's or directory's kept extended attributes at t (the
	// ACLs among them): nil when unknown (not recorded, not readable by
	// this user, a symlink, no such path).
	Xattrs(path string, t record.Seq) (map[string][]byte, error)
	// List is a directory's names at t, sorted, reserved names left out.
	List(dir string, t record.Seq) ([]string, error)
	// BeginStep begins a step; extra is a JSON object or nil.
	BeginStep(ctx context.Context, label string, extra json.RawMessage) error
	// BeginTurn records a turn (a person's prompt to an agent; payload is
	// the turn event's JSON object) and ends the current step.
	BeginTurn(ctx context.Context, payload json.RawMessage) error
	// RecordResult records what came of a step's tool call (a tool_result
	// event; rewind.Engine.RecordResult finds its step) and reports the
	// event's sequence and the step. A result no step matches is
	// rewind.ErrNoStepForResult.
	RecordResult(ctx context.Context, r record.ToolResultPayload) (control.ResultReport, error)
	// Rewind runs one rewind request (a target, or undo, or redo) and
	// reports what it did. Undo and redo choose their target under the
	// workspace lock: nothing lands between the choice and the rewind.
	// Nothing to undo or redo is ErrNothingToUndo or ErrNothingToRedo.
	Rewind(ctx context.Context, req record.Request) (control.RewindReport, error)
	// GC forgets the states before req.Before and thins the history before
	// req.ThinBefore to one state a day.
	GC(ctx context.Context, req record.GCRequest) (control.GCReport, error)
	// Close releases the source (the engine's store lock, when unmounted).
	Close() error
}

// Options configure Open.
type Options struct {
	// Logger receives the engine's recovery notes and warnings when the
	// workspace is not mounted. Default slog.Default().
	Logger *slog.Logger
}

// Open opens ws's history: through the mount when it is mounted, else by
// opening the engine on the store (taking its lock, so a caller never races
// a daemon: a store in use is an *InUseError). The caller closes it.
func Open(ctx context.Context, ws *Workspace, opts Options) (Source, error) {
	if ws.Mounted {
		return openMounted(ws.Root)
	}
	return openEngine(ctx, ws, opts)
}

// OpenDir finds the workspace around dir and opens its history.
func OpenDir(ctx context.Context, dir string, opts Options) (*Workspace, Source, error) {
	ws, err := Find(dir)
	if err != nil {
		return nil, nil, err
	}
	src, err := Open(ctx, ws, opts)
	if err != nil {
		return nil, nil, err
	}
	return ws, src, nil
}

// SeqError explains a sequence that is not in the history.
type SeqError struct {
	Seq, Head, PrunedBefore record.Seq
	// Thinned is the thinned interval holding Seq, if any, or (with
	// ThinnedAfter) the one just after it: a revert of the step at Seq
	// needs the states after it too.
	Thinned      *record.ThinInterval
	ThinnedAfter bool
}

func (e *SeqError) Error() string {
	switch {
	case e.Seq > e.Head:
		return fmt.Sprintf("no sequence %d (head is %d)", e.Seq, e.Head)
	case e.Seq < e.PrunedBefore:
		return fmt.Sprintf("no sequence %d: history before %d was pruned", e.Seq, e.PrunedBefore)
	case e.Thinned != nil && e.ThinnedAfter:
		return fmt.Sprintf("the states after %d were thinned to one state a day (history between %d and %d; %d and %d remain)",
			e.Seq, e.Thinned.After, e.Thinned.Before, e.Thinned.After, e.Thinned.Before)
	case e.Thinned != nil:
		return fmt.Sprintf("no sequence %d: history between %d and %d was thinned to one state a day (%d and %d remain)",
			e.Seq, e.Thinned.After, e.Thinned.Before, e.Thinned.After, e.Thinned.Before)
	}
	return fmt.Sprintf("no sequence %d", e.Seq)
}

func (e *SeqError) Unwrap() error { return record.ErrNoSuchSeq }

// ExplainSeq is err, or a *SeqError that says why t is not in src's
// history when err is record.ErrNoSuchSeq.
func ExplainSeq(src Source, t record.Seq, err error) error {
	var se *SeqError
	if err == nil || !errors.Is(err, record.ErrNoSuchSeq) || errors.As(err, &se) {
		return err
	}
	// The engine's refusal names the history's bounds: nothing to read.
	var re *record.RefusedError
	if errors.As(err, &re) && (re.Head != 0 || re.Thinned != nil) {
		se = &SeqError{Seq: t, Head: re.Head, PrunedBefore: re.PrunedBefore, Thinned: re.Thinned}
		se.ThinnedAfter = re.Thinned != nil && re.Seq != t
		return se
	}
	head, _ := src.Head()
	pruned, _ := src.PrunedBefore()
	se = &SeqError{Seq: t, Head: head, PrunedBefore: pruned}
	if iv, ok := ThinnedAt(src, t); ok {
		se.Thinned = &iv
	} else if iv, ok := ThinnedAt(src, t+1); ok && t >= pruned && t <= head {
		se.Thinned, se.ThinnedAfter = &iv, true
	}
	return se
}

// ThinnedAt is the thinned interval of src that holds the state t strictly
// inside it, if any.
func ThinnedAt(src Source, t record.Seq) (record.ThinInterval, bool) {
	ivs, err := src.Thinned()
	if err != nil {
		return record.ThinInterval{}, false
	}
	for _, iv := range ivs {
		if iv.After < t && t < iv.Before {
			return iv, true
		}
	}
	return record.ThinInterval{}, false
}

// checkedEvents passes on events, checked as the engine's Open checks them:
// the log is read again, and what was written to it since the daemon
// checked it is untrusted too (a checkpoint naming "../../secret" must not
// lead a diff outside the workspace). It stops at the first damaged one
// with its error, naming the line.
func checkedEvents(path string, events iter.Seq2[record.Event, error]) iter.Seq2[record.Event, error] {
	return func(yield func(record.Event, error) bool) {
		for ev, err := range events {
			if err == nil {
				err = record.CheckEvent(path, ev)
			}
			if !yield(ev, err) || err != nil {
				return
			}
		}
	}
}
