package record

import (
	"encoding/json"
	"fmt"
)

// What gc records (history_pruned, history_thinned) and what naming a
// removed file's stash records (stash_named), with the checks their
// payloads pass when read.

// PrunedPayload is the payload of a history_pruned event: states before
// Before no longer exist.
type PrunedPayload struct {
	Before Seq `json:"before"`
	// Reason is why: "gc" (asked for) or "max-store-size" (the store
	// reached its bound; then StoreBytes and MaxStoreSize say how far).
	Reason       string `json:"reason,omitempty"`
	StoreBytes   int64  `json:"storeBytes,omitempty"`
	MaxStoreSize int64  `json:"maxStoreSize,omitempty"`
	// Steps is how many steps (tool_call events) began between the
	// previous cut and Before: the states this prune dropped.
	Steps int `json:"steps"`
}

// ThinInterval is one interval a thin gave up: the states T with After <
// T < Before no longer exist; After and Before stay. Steps is how many
// steps (tool_calls) began inside it whose states this thin dropped, and
// Records how many before-states (one path in one checkpoint) it dropped.
type ThinInterval struct {
	After   Seq `json:"after"`
	Before  Seq `json:"before"`
	Steps   int `json:"steps"`
	Records int `json:"records"`
}

// ThinnedPayload is the payload of a history_thinned event: what one thin
// gave up.
type ThinnedPayload struct {
	// Reason is why: "gc".
	Reason string `json:"reason,omitempty"`
	// Before: history before it was thinned to one state a day; the states
	// from Before on are untouched.
	Before Seq `json:"before"`
	// Intervals lists what went, oldest first.
	Intervals []ThinInterval `json:"intervals"`
	// Steps and Records are the intervals' totals.
	Steps   int `json:"steps"`
	Records int `json:"records"`
}

// NamedPayload is the payload of a stash_named event.
type NamedPayload struct {
	Named []Named `json:"named"`
}

// Named is one stash named: the checkpoint whose record names it, the blob
// its content hashed to and its size, or why it could not be named.
type Named struct {
	Sequence Seq    `json:"sequence"`
	Kept     string `json:"kept"`
	Blob     string `json:"blob,omitempty"`
	Bytes    int64  `json:"bytes"`
	Lost     string `json:"lost,omitempty"`
}

// CheckThinned checks a history_thinned payload read from the log: its
// intervals hold at least one state each, are sorted and apart, and lie
// before the event itself.
func CheckThinned(seq Seq, p ThinnedPayload) string {
	var prev Seq
	for i, iv := range p.Intervals {
		switch {
		case iv.After+1 >= iv.Before:
			return fmt.Sprintf("history_thinned interval (%d, %d) holds no state", iv.After, iv.Before)
		case iv.Before >= seq:
			return fmt.Sprintf("history_thinned interval (%d, %d) is not before it", iv.After, iv.Before)
		case i > 0 && iv.After < prev:
			return fmt.Sprintf("history_thinned intervals overlap or are out of order at (%d, %d)", iv.After, iv.Before)
		case iv.Steps < 0 || iv.Records < 0:
			return "history_thinned counts are negative"
		}
		prev = iv.Before
	}
	return ""
}

// decodeThinned parses and checks a history_thinned payload.
func decodeThinned(logPath string, ev Event) (ThinnedPayload, error) {
	var tp ThinnedPayload
	if err := json.Unmarshal(ev.Payload, &tp); err != nil {
		return tp, &DamageError{File: logPath, Line: int(ev.Seq), Reason: fmt.Sprintf("bad history_thinned payload: %v", err)}
	}
	if why := CheckThinned(ev.Seq, tp); why != "" {
		return tp, &DamageError{File: logPath, Line: int(ev.Seq), Reason: why}
	}
	return tp, nil
}

// decodeNamed parses and checks a stash_named payload (untrusted).
func decodeNamed(logPath string, ev Event) (NamedPayload, error) {
	var np NamedPayload
	bad := func(reason string) error {
		return &DamageError{File: logPath, Line: int(ev.Seq), Reason: reason}
	}
	if err := json.Unmarshal(ev.Payload, &np); err != nil {
		return np, bad(fmt.Sprintf("bad stash_named payload: %v", err))
	}
	for _, n := range np.Named {
		switch {
		case n.Sequence >= ev.Seq:
			return np, bad(fmt.Sprintf("stash_named names checkpoint %d, not before it", n.Sequence))
		case !IsStashName(n.Kept):
			return np, bad(fmt.Sprintf("stash_named holds a bad stash name %q", n.Kept))
		case n.Bytes < 0:
			return np, bad(fmt.Sprintf("stash_named holds a negative size %d", n.Bytes))
		case n.Lost != "" && n.Blob != "":
			return np, bad("stash_named both names and loses a stash")
		case n.Lost == "":
			if !IsBlobID(n.Blob) {
				return np, bad(fmt.Sprintf("stash_named holds a bad blob id %q", n.Blob))
			}
		}
	}
	return np, nil
}
