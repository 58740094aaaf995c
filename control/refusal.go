package control

import (
	"encoding/json"
	"errors"

	"github.com/zerofs/zerofs/record"
)

// Refusal is why the daemon refused a request, as the report read back
// from the control file that took it (.zero/rewind, .zero/gc, .zero/step)
// carries it: Error is the refusal's name (record.Refusal: "nothing-to-undo",
// "nothing-to-redo", "no-turn", "no-such-seq", "pruned", "thinned", "conflict",
// "no-such-path", "bad-request", "workspace", "failed"), Message says it in words, and the other fields
// are its details. A client needs nothing else to say why: no re-reading of
// head, status or the log. The write itself fails with an errno as before
// (EINVAL, ENOENT, EBUSY, EIO), for clients that only look at that.
type Refusal struct {
	Error        string               `json:"error,omitempty"`
	Message      string               `json:"message,omitempty"`
	Requested    record.Seq           `json:"requested,omitempty"`
	Head         record.Seq           `json:"head,omitempty"`
	PrunedBefore record.Seq           `json:"prunedBefore,omitempty"`
	Interval     *record.ThinInterval `json:"thinnedInterval,omitempty"`
	Op           string               `json:"op,omitempty"`
	// Step is what the request would have acted on; in a RewindReport of
	// a request done, what it acted on (the step, turn or rewind).
	Step    *record.StepRef `json:"step,omitempty"`
	Missing []string        `json:"missing,omitempty"`
	// MissingBytes holds, at the same position, the exact bytes (base64)
	// of a missing path that is not UTF-8 ("" for one that is).
	MissingBytes []string `json:"missingBytes,omitempty"`
}

// RefusalOf is the refusal err stands for (the zero Refusal for nil).
func RefusalOf(err error) Refusal {
	if err == nil {
		return Refusal{}
	}
	r := Refusal{Error: string(record.RefusalOf(err)), Message: err.Error()}
	if errors.Is(err, ErrBadRequest) {
		r.Error = string(record.RefusedBadRequest)
	}
	var re *record.RefusedError
	if errors.As(err, &re) {
		r.Requested, r.Head, r.PrunedBefore, r.Interval, r.Op, r.Step, r.Missing = re.Seq, re.Head, re.PrunedBefore, re.Thinned, re.Op, re.Step, re.Missing
		r.MissingBytes = record.ExactBytesAll(re.Missing)
	}
	return r
}

// Err is the error the refusal stands for: a *record.RefusedError (nil
// when r refuses nothing). Its message is the daemon's.
func (r Refusal) Err() error {
	if r.Error == "" {
		return nil
	}
	missing := r.Missing
	if m, err := record.FromBytesAll("missing", r.Missing, r.MissingBytes); err == nil {
		missing = m
	}
	return &record.RefusedError{Refusal: record.Refusal(r.Error), Seq: r.Requested, Head: r.Head,
		PrunedBefore: r.PrunedBefore, Thinned: r.Interval, Op: r.Op, Step: r.Step, Missing: missing, Msg: r.Message}
}

// ParseRefusal parses a refusal read back from a control file whose
// request failed; ok is false when b holds none (a daemon from before
// refusals were typed).
func ParseRefusal(b []byte) (Refusal, bool) {
	var r Refusal
	if json.Unmarshal(b, &r) != nil || r.Error == "" {
		return Refusal{}, false
	}
	return r, true
}
