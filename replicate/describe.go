package replicate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/zerofs/zerofs/record"
	"github.com/zerofs/zerofs/rewind"
)

// Summary is what a replica holds, read without restoring it.
type Summary struct {
	URL   string `json:"url"`
	Lease Lease  `json:"lease"`
	// Logged is the last event of the unbroken log from 1; Segments how
	// many segments it is read from.
	Logged   record.Seq `json:"logged"`
	Segments int        `json:"segments"`
	// Bases are the sequences of the bases within the log; states up to
	// the newest can be restored, from PrunedBefore on (the start of the
	// history the newest base's log keeps: gc's cut), except those in
	// Thinned.
	Bases        []record.Seq          `json:"bases"`
	PrunedBefore record.Seq            `json:"prunedBefore"`
	Thinned      []record.ThinInterval `json:"thinned,omitempty"`
	// Steps are the log's steps and rewinds, oldest first.
	Steps []SummaryStep `json:"steps"`
}

// SummaryStep is one tool_call or session_rewind of a replica's log.
type SummaryStep struct {
	Seq   record.Seq `json:"sequence"`
	Type  string     `json:"type"`
	At    time.Time  `json:"createdAt"`
	Label string     `json:"label"`
}

// Describe reads what the replica u holds: its lease, its log (every
// segment checked as a restore checks it) and its bases. key is the
// replica key (nil: none).
// A segment gone while it is read (the writer compacted the log) sends it
// back to the listing, as a restore does.
func Describe(ctx context.Context, b Bucket, u URL, key []byte) (Summary, error) {
	var err error
	for range relist {
		var sum Summary
		sum, err = describe(ctx, b, u, key)
		if !errors.Is(err, ErrNotFound) || errors.Is(err, ErrNoState) {
			return sum, err
		}
	}
	return Summary{}, changing(u, err)
}

func describe(ctx context.Context, b Bucket, u URL, key []byte) (Summary, error) {
	c, err := newCodec(key)
	if err != nil {
		return Summary{}, err
	}
	lease, err := readLease(ctx, b, u)
	if errors.Is(err, ErrNotFound) {
		return Summary{}, fmt.Errorf("%w: %s holds no replica (no %s)", ErrNoState, u, leaseName)
	}
	if err != nil {
		return Summary{}, err
	}
	if err := checkKey(u, lease, c.keyCheck()); err != nil {
		return Summary{}, err
	}
	segs, bases, err := listReplica(ctx, b)
	if err != nil {
		return Summary{}, err
	}
	run, end := chain(segs)
	if err := gap(segs, bases, end); err != nil {
		return Summary{}, err
	}
	sum := Summary{URL: u.String(), Lease: lease, Logged: end, Segments: len(run), Bases: []record.Seq{}, Steps: []SummaryStep{}}
	for _, br := range bases {
		if br.Seq <= end {
			sum.Bases = append(sum.Bases, br.Seq)
		}
	}
	newest, _ := newestBase(bases, end)
	ret := rewind.NewRetention()
	next := record.Seq(1)
	for _, s := range run {
		err := eachLine(ctx, b, c, s, "", func(line []byte) error {
			var ev struct {
				Seq     record.Seq `json:"sequence"`
				Type    string     `json:"type"`
				At      time.Time  `json:"createdAt"`
				Payload struct {
					Name   string     `json:"name"`
					Target record.Seq `json:"targetSequence"`
					Form   string     `json:"form"`
				} `json:"payload"`
			}
			if err := json.Unmarshal(line, &ev); err != nil {
				return &DamageError{Object: s.Name, Why: err.Error()}
			}
			if ev.Seq < next {
				return nil
			}
			next = ev.Seq + 1
			if ev.Seq <= newest.Seq && (ev.Type == record.TypeHistoryPruned || ev.Type == record.TypeHistoryThinned) {
				var full record.Event
				if err := json.Unmarshal(line, &full); err != nil {
					return &DamageError{Object: s.Name, Why: err.Error()}
				}
				if err := ret.Add(full); err != nil {
					return &DamageError{Object: s.Name, Why: err.Error()}
				}
			}
			switch ev.Type {
			case record.TypeToolCall:
				sum.Steps = append(sum.Steps, SummaryStep{Seq: ev.Seq, Type: ev.Type, At: ev.At, Label: ev.Payload.Name})
			case record.TypeRewind:
				sum.Steps = append(sum.Steps, SummaryStep{Seq: ev.Seq, Type: ev.Type, At: ev.At,
					Label: fmt.Sprintf("%s to %d", ev.Payload.Form, ev.Payload.Target)})
			}
			return nil
		})
		if err != nil {
			return Summary{}, err
		}
	}
	sum.PrunedBefore, sum.Thinned = ret.Pruned(), ret.Thinned()
	return sum, nil
}
