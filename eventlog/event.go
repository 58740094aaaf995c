package eventlog

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
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
	// TypeToolResult: what came of a step's tool call (rewind.ToolResult).
	TypeToolResult = "tool_result"
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
	return e.appendJSON(nil)
}

// appendJSON appends the envelope to buf, in the order and form SPEC gives
// (the bytes encoding/json wrote before: TestEnvelopeBytes). The payload is
// written as it is: Append passes one marshalPayload made (valid and
// compact), and json.Marshal checks MarshalJSON's output for any other
// caller. Written by hand because encoding/json scanned each payload twice
// more (RawMessage, then the Marshaler's output): ~2% of the daemon's CPU
// in an rm -rf, whose every removal appends a checkpoint.
func (e Event) appendJSON(buf []byte) ([]byte, error) {
	t := e.CreatedAt.UTC()
	if y := t.Year(); y < 0 || y > 9999 {
		return nil, fmt.Errorf("eventlog: createdAt year %d outside [0,9999]", y)
	}
	payload := []byte(e.Payload)
	if payload == nil {
		payload = []byte("null")
	}
	buf = append(buf, `{"id":`...)
	buf = appendString(buf, e.ID)
	buf = append(buf, `,"sessionId":`...)
	buf = appendString(buf, e.SessionID)
	buf = append(buf, `,"sequence":`...)
	buf = strconv.AppendUint(buf, uint64(e.Seq), 10)
	buf = append(buf, `,"type":`...)
	buf = appendString(buf, e.Type)
	buf = append(buf, `,"createdAt":"`...)
	buf = t.AppendFormat(buf, createdAtLayout)
	buf = append(buf, `","payload":`...)
	buf = append(buf, payload...)
	return append(buf, '}'), nil
}

// appendString appends s as a JSON string, as encoding/json writes it: the
// ids and types zerofs makes are plain ASCII and are copied; anything else
// goes through encoding/json (its escapes: \u003c for <, U+FFFD for bytes
// that are not UTF-8).
func appendString(buf []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c > 0x7e || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			b, _ := json.Marshal(s) // a string always marshals
			return append(buf, b...)
		}
	}
	buf = append(buf, '"')
	buf = append(buf, s...)
	return append(buf, '"')
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
