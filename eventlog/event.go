package eventlog

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/zerofs/zerofs/record"
)

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

func (e *CorruptError) Unwrap() error { return record.ErrCorrupt }

// parseLine decodes one line (without its newline) and checks the envelope.
func parseLine(line []byte) (record.Event, error) {
	var ev record.Event
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
