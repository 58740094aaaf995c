package eventlog

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// Seq is an event's position in the log: 1, 2, 3, ... Seq 0 names the state
// before any event.
type Seq uint64

// Event types zerofs writes. Readers skip types they do not know.
const (
	TypeToolCall      = "tool_call"
	TypeCheckpoint    = "session_checkpoint"
	TypeRewind        = "session_rewind"
	TypeHistoryPruned = "history_pruned"
	// TypeHistoryThinned: gc thinned old history to one state a day.
	TypeHistoryThinned = "history_thinned"
	// TypeTurn: a person's prompt to an agent began a turn; the steps after
	// it belong to it until the next turn.
	TypeTurn = "turn"
	// TypeStashNamed: the blobs of removed files' stashes, which earlier
	// checkpoints name by their stash (rewind/internal/index/named.go).
	TypeStashNamed = "stash_named"
)

// Event is one line of the log.
type Event struct {
	ID        string          `json:"id"`
	SessionID string          `json:"sessionId"`
	Seq       Seq             `json:"sequence"`
	Type      string          `json:"type"`
	CreatedAt time.Time       `json:"createdAt"`
	Payload   json.RawMessage `json:"payload"`
}

// createdAtLayout is RFC 3339 with all nine fractional digits: SPEC asks for
// nanoseconds, and a fixed width keeps every createdAt the same length and
// sorting as text in time order. (time.RFC3339Nano drops trailing zeros.)
const createdAtLayout = "2006-01-02T15:04:05.000000000Z07:00"

// MarshalJSON writes the envelope with the keys SPEC names and createdAt in
// UTC with nanoseconds.
func (e Event) MarshalJSON() ([]byte, error) {
	t := e.CreatedAt.UTC()
	if y := t.Year(); y < 0 || y > 9999 {
		return nil, fmt.Errorf("eventlog: createdAt year %d outside [0,9999]", y)
	}
	return json.Marshal(struct {
		ID        string          `json:"id"`
		SessionID string          `json:"sessionId"`
		Seq       Seq             `json:"sequence"`
		Type      string          `json:"type"`
		CreatedAt string          `json:"createdAt"`
		Payload   json.RawMessage `json:"payload"`
	}{e.ID, e.SessionID, e.Seq, e.Type, t.Format(createdAtLayout), e.Payload})
}

// ErrCorrupt is the sentinel inside every *CorruptError.
var ErrCorrupt = errors.New("eventlog: corrupt log")

// ErrLocked means another writer holds the log.
var ErrLocked = errors.New("eventlog: log is in use by another writer")

// ErrClosed is returned by calls on a closed Log.
var ErrClosed = errors.New("eventlog: log is closed")

// ErrFailed means an fsync of the log failed, or a failed write could not be
// cut back: what is on disk after the last acknowledged line is unknown, so
// the Log refuses every later Append and Sync (the errors wrap both ErrFailed
// and the cause). Close it and Open the log again: Open checks the file and
// cuts a torn tail.
var ErrFailed = errors.New("eventlog: an earlier write or fsync failed; reopen the log")

// CorruptError names the damaged line. errors.Is(err, ErrCorrupt) holds.
type CorruptError struct {
	Path   string
	Line   int   // 1-based line number
	Offset int64 // byte offset of the line's start
	Reason string
}

func (e *CorruptError) Error() string {
	return fmt.Sprintf("eventlog: corrupt log %s: line %d (byte %d): %s", e.Path, e.Line, e.Offset, e.Reason)
}

func (e *CorruptError) Unwrap() error { return ErrCorrupt }

// parseLine decodes one line (without its newline) and checks the envelope.
func parseLine(line []byte) (Event, error) {
	var ev Event
	if err := json.Unmarshal(line, &ev); err != nil {
		return ev, fmt.Errorf("not a JSON event: %v", err)
	}
	if ev.Seq == 0 {
		return ev, errors.New("missing or zero sequence")
	}
	if ev.Type == "" {
		return ev, errors.New("missing type")
	}
	return ev, nil
}
