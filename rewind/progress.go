package rewind

import (
	"context"
	"sync/atomic"

	"github.com/zerofs/zerofs/record"
)

// Progress hears how far a long operation has come (a rewind's changes, a
// fork's files), so that a command can show it to a person. Begin says
// what is about to happen and how much (items and bytes; 0 when not known
// in advance); Add, called as the work goes, how much more is done. Calls
// come from the goroutine doing the work; an implementation must be quick
// (it is called once per file).
type Progress interface {
	Begin(what string, items, bytes int64)
	Add(items, bytes int64)
}

// Counting is a Progress that can be told what Begin's items are when
// they are not files ("objects", "blobs", "packs"): BeginCounting is Begin
// with that noun.
type Counting interface {
	BeginCounting(what, noun string, items, bytes int64)
}

// BeginCounting begins a phase of p whose items are nouns: p's
// BeginCounting when it has one, else its Begin (which counts files).
func BeginCounting(p Progress, what, noun string, items, bytes int64) {
	if c, ok := p.(Counting); ok {
		c.BeginCounting(what, noun, items, bytes)
		return
	}
	p.Begin(what, items, bytes)
}

type progressKey struct{}

// WithProgress is ctx carrying p: the engine's long operations run with
// ctx report to p.
func WithProgress(ctx context.Context, p Progress) context.Context {
	return context.WithValue(ctx, progressKey{}, p)
}

// ProgressIn is the Progress ctx carries, or one that hears nothing.
func ProgressIn(ctx context.Context) Progress {
	if p, ok := ctx.Value(progressKey{}).(Progress); ok && p != nil {
		return p
	}
	return noProgress{}
}

type noProgress struct{}

func (noProgress) Begin(string, int64, int64) {}
func (noProgress) Add(int64, int64)           {}

// ProgressOf is the Progress ctx carries, or nil (a client that hands
// the work to a daemon polls the daemon's counts into it).
func ProgressOf(ctx context.Context) Progress {
	if p, ok := ctx.Value(progressKey{}).(Progress); ok {
		return p
	}
	return nil
}

// ProgressCounter is a Progress that others may read while the work goes
// on (Report), without a lock the work holds.
type ProgressCounter struct {
	what   atomic.Pointer[string]
	noun   atomic.Pointer[string]
	items  atomic.Int64
	bytes  atomic.Int64
	doneN  atomic.Int64
	doneB  atomic.Int64
	active atomic.Bool
}

// Start marks the counter as running what (before any Begin).
func (c *ProgressCounter) Start(what string) {
	c.Begin(what, 0, 0)
	c.active.Store(true)
}

// Stop marks the work as over: Report says nothing until the next Start.
func (c *ProgressCounter) Stop() { c.active.Store(false) }

func (c *ProgressCounter) Begin(what string, items, bytes int64) {
	c.BeginCounting(what, "", items, bytes)
}

func (c *ProgressCounter) BeginCounting(what, noun string, items, bytes int64) {
	c.what.Store(&what)
	c.noun.Store(&noun)
	c.items.Store(items)
	c.bytes.Store(bytes)
	c.doneN.Store(0)
	c.doneB.Store(0)
}

func (c *ProgressCounter) Add(items, bytes int64) {
	c.doneN.Add(items)
	c.doneB.Add(bytes)
}

// Report is the counts now; nil when no work runs.
func (c *ProgressCounter) Report() *record.ProgressReport {
	if !c.active.Load() {
		return nil
	}
	r := &record.ProgressReport{Items: c.items.Load(), Bytes: c.bytes.Load(), DoneItems: c.doneN.Load(), DoneBytes: c.doneB.Load()}
	if w := c.what.Load(); w != nil {
		r.What = *w
	}
	if n := c.noun.Load(); n != nil {
		r.Noun = *n
	}
	return r
}
