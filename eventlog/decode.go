package eventlog

import (
	"bufio"
	"errors"
	"fmt"
	"io"

	"github.com/zerofs/zerofs/record"
)

// decoder reads the log format, one line at a time, holding one line in
// memory: each line must be whole (end in a newline), parse as an event
// (parseLine) and hold the sequence after the previous one. It is the one
// reader of the format: Open's scan, Check, Events and ReadFile stand on it
// and differ only in what they make of a line that fails.
type decoder struct {
	br   *bufio.Reader
	path string
	off  int64      // byte offset of the next line in the log
	head record.Seq // the sequence of the last valid line
}

// newDecoder reads r, which starts at byte off of the log, just after the
// line of sequence head.
func newDecoder(r io.Reader, path string, off int64, head record.Seq) *decoder {
	return &decoder{br: bufio.NewReaderSize(r, 1<<16), path: path, off: off, head: head}
}

// tailError is a *CorruptError for a line that a crash in the middle of an
// append can leave as the last one: incomplete, or whole but not parsing.
// Whether it is a torn tail or damage depends on what follows it
// (validLineFollows). A whole line that parses but holds the wrong sequence
// was written whole: it is damage wherever it stands (a plain
// *CorruptError).
type tailError struct {
	*CorruptError
	incomplete bool // the input ended inside the line
}

// next decodes the next line and returns its event and its bytes (newline
// included). At the end of the input it returns io.EOF; for a line that is
// not the next valid event, a *tailError or a *CorruptError;
// for a failed read, that error.
func (d *decoder) next() (record.Event, []byte, error) {
	b, err := d.br.ReadBytes('\n')
	if len(b) == 0 && err == io.EOF {
		return record.Event{}, nil, io.EOF
	}
	if err != nil && err != io.EOF {
		return record.Event{}, nil, fmt.Errorf("eventlog: read %s: %w", d.path, err)
	}
	start := d.off
	d.off += int64(len(b))
	bad := func(reason string) *CorruptError {
		return &CorruptError{Path: d.path, Line: int(d.head) + 1, Offset: start, Reason: reason}
	}
	if err == io.EOF {
		return record.Event{}, b, &tailError{CorruptError: bad("incomplete final line"), incomplete: true}
	}
	ev, perr := parseLine(b[:len(b)-1])
	if perr != nil {
		return record.Event{}, b, &tailError{CorruptError: bad(perr.Error())}
	}
	if ev.Seq != d.head+1 {
		return record.Event{}, b, bad(fmt.Sprintf("sequence %d after %d", ev.Seq, d.head))
	}
	d.head = ev.Seq
	return ev, b, nil
}

// validLineFollows reports whether any whole line left in the input parses:
// the difference between damage and a torn tail. It reads to the end (or to
// that line).
func (d *decoder) validLineFollows() bool {
	for {
		b, err := d.br.ReadBytes('\n')
		d.off += int64(len(b))
		if err != nil {
			return false
		}
		if _, perr := parseLine(b[:len(b)-1]); perr == nil {
			return true
		}
	}
}

// readLines yields the events of d with from <= seq <= upto. Damage ends the
// iteration with a *CorruptError, except, with torn set (a log that may not
// have been recovered yet), a torn tail: an incomplete last line (a line
// being written, or a crash's), or lines that do not parse with no valid
// line after them, as Open and Check see it. Those end it quietly.
func readLines(d *decoder, from, upto record.Seq, torn bool, yield func(record.Event, error) bool) {
	for {
		ev, _, err := d.next()
		if err == io.EOF {
			return
		}
		var te *tailError
		if errors.As(err, &te) && (te.incomplete || torn && !d.validLineFollows()) {
			return
		}
		if te != nil {
			err = te.CorruptError // a torn-tail candidate that was damage after all
		}
		if err != nil {
			yield(record.Event{}, err)
			return
		}
		if ev.Seq < from {
			continue
		}
		if ev.Seq > upto || !yield(ev, nil) {
			return
		}
	}
}
