package rewind

import "context"

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

type progressKey struct{}

// WithProgress is ctx carrying p: the engine's long operations run with
// ctx report to p.
func WithProgress(ctx context.Context, p Progress) context.Context {
	return context.WithValue(ctx, progressKey{}, p)
}

// progressOf is the Progress ctx carries, or one that hears nothing.
func progressOf(ctx context.Context) Progress {
	if p, ok := ctx.Value(progressKey{}).(Progress); ok && p != nil {
		return p
	}
	return noProgress{}
}

type noProgress struct{}

func (noProgress) Begin(string, int64, int64) {}
func (noProgress) Add(int64, int64)           {}
