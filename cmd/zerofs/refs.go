package main

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/zerofs/zerofs/history"
	"github.com/zerofs/zerofs/record"
)

// A ref is a sequence as the user wrote it: absolute ("42", "@42") or
// relative to the current step, as jj writes it ("@" the current step,
// "@-1" or "-1" the one before it, "@-2" or "-2" the one before that).
// Relative refs count steps as SPEC defines them: tool calls (each begun
// by a tool_call event), and the implicit step of changes made outside
// any; a rewind or a gc is no step, so `-1` is the step before the
// current one however many rewinds came between.
// Used as a state, a relative ref is the state just after that step (so
// "@-1" is the state before the current step and `zerofs diff @-1` shows
// what the current step did); used as a step (show, revert), it is the
// step itself.
type ref struct {
	seq  record.Seq
	back int // steps back from the current one, when rel
	rel  bool
	text string
}

// parseRef reads a SEQ or STEP argument.
func parseRef(c *command, s string) (ref, error) {
	body := strings.TrimPrefix(s, "@")
	if s == "@" {
		return ref{rel: true, text: s}, nil
	}
	if strings.HasPrefix(body, "-") {
		n, err := strconv.Atoi(body[1:])
		if err != nil || n < 0 || body[1:] == "" || strings.HasPrefix(body[1:], "+") {
			return ref{}, usagef(c, "bad reference %q: want a sequence like 42, or -1 / @-1 for the step before the current one", s)
		}
		return ref{back: n, rel: true, text: s}, nil
	}
	n, err := strconv.ParseUint(body, 10, 64)
	if err != nil {
		return ref{}, usagef(c, "bad sequence %q: want a number like 42, or -1 / @-1 for the step before the current one", s)
	}
	return ref{seq: record.Seq(n), text: s}, nil
}

// stepBlock is the block a ref names as a step: for an absolute ref, the
// block holding that sequence (a step or a rewind); for a relative one,
// the step that many before the current (last) one, counting steps only.
func (r ref) stepBlock(src history.Source) (*history.Block, error) {
	blocks, _, err := history.Blocks(src)
	if err != nil {
		return nil, err
	}
	var steps, all []*history.Block
	for _, b := range blocks {
		if b.Type == history.BlockStep {
			steps = append(steps, b)
		}
		if b.Type != history.BlockPruned {
			all = append(all, b)
		}
	}
	if r.rel {
		if r.back >= len(steps) {
			if len(steps) == 0 {
				return nil, fmt.Errorf("%s: %w", r.text, errors.New("no steps yet"))
			}
			return nil, fmt.Errorf("%s: %w", r.text, fmt.Errorf("the history holds only %d steps (the oldest is %s)", len(steps), oldestRef(len(steps))))
		}
		return steps[len(steps)-1-r.back], nil
	}
	// An absolute ref names whatever holds it: a step, or a rewind.
	for i := len(all) - 1; i >= 0; i-- {
		if b := all[i]; b.Start <= r.seq && r.seq <= b.End {
			return b, nil
		}
	}
	return nil, nil
}

func oldestRef(n int) string {
	if n == 1 {
		return "@"
	}
	return fmt.Sprintf("@-%d", n-1)
}

// state is the sequence a ref names as a state: itself when absolute; the
// state just after the named step when relative, which is the state just
// before the step after it ("@" is the head; "@-1" the state before the
// current step, whatever happened since; "@-N" with N steps in the
// history, the state before the oldest).
func (r ref) state(src history.Source) (record.Seq, error) {
	if !r.rel {
		return r.seq, nil
	}
	if r.back == 0 {
		return src.Head()
	}
	after := r
	after.back--
	b, err := after.stepBlock(src)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", r.text, errors.Unwrap(err))
	}
	return b.Before(), nil
}
