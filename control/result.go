package control

import (
	"bytes"
	"encoding/json"
	"strings"
	"unicode/utf8"

	"github.com/zerofs/zerofs/record"
)

// MaxSummary bounds a tool_result's summary, in bytes (SPEC: the first line
// of an error, at most 512 bytes).
const MaxSummary = 512

// ParseResult parses a write to "result": one JSON object, a tool_result's
// payload. A status other than "ok", "error" or none, a summary that is
// more than one line or MaxSummary bytes or not UTF-8, or a negative
// duration is ErrBadRequest.
func ParseResult(data []byte) (record.ToolResultPayload, error) {
	line := bytes.TrimSpace(data)
	if len(line) == 0 || line[0] != '{' {
		return record.ToolResultPayload{}, badRequest("result request is not a JSON object")
	}
	var r record.ToolResultPayload
	dec := json.NewDecoder(bytes.NewReader(line))
	if err := dec.Decode(&r); err != nil {
		return record.ToolResultPayload{}, badRequest("result request: %v", err)
	}
	if dec.More() {
		return record.ToolResultPayload{}, badRequest("result request: more than one JSON value")
	}
	switch {
	case r.Status != "" && r.Status != "ok" && r.Status != "error":
		return record.ToolResultPayload{}, badRequest("result status %q: want ok or error", r.Status)
	case len(r.Summary) > MaxSummary || !utf8.ValidString(r.Summary) || strings.ContainsAny(r.Summary, "\n\r"):
		return record.ToolResultPayload{}, badRequest("result summary: want one line of at most %d bytes of UTF-8", MaxSummary)
	case r.DurationMs != nil && *r.DurationMs < 0:
		return record.ToolResultPayload{}, badRequest("result duration %d ms is negative", *r.DurationMs)
	}
	return r, nil
}

// FormatResult is the request that records r.
func FormatResult(r record.ToolResultPayload) ([]byte, error) {
	return JSONLine(r)
}

// ResultReport is what reading "result" shows the handle that recorded
// one: the tool_result event's sequence and the step it belongs to.
type ResultReport struct {
	Sequence record.Seq `json:"sequence"`
	Step     record.Seq `json:"step"`
	Refusal
}
