package record

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"
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
	return e.AppendJSON(nil)
}

// AppendJSON appends the envelope to buf, in the order and form SPEC gives:
// the bytes encoding/json writes for it. The
// payload is written as it is: eventlog's Append passes one it has checked
// and compacted, and json.Marshal checks MarshalJSON's output for any other
// caller. It is written by hand so that no payload is scanned again
// (encoding/json scans a RawMessage field, then a Marshaler's output), as
// every change appends a checkpoint (docs/performance.md, Code written for
// speed).
func (e Event) AppendJSON(buf []byte) ([]byte, error) {
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

// ErrCorrupt is the sentinel of a damaged store: inside every
// eventlog.CorruptError (a line that is not an event) and every
// *DamageError (an event zerofs never writes).
var ErrCorrupt = errors.New("eventlog: corrupt log")
