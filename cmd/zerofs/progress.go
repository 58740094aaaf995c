package main

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/schollz/progressbar/v3"

	"github.com/zerofs/zerofs/rewind"
)

// A progress shows how far a long operation (a rewind, revert, undo or
// redo, fork, verify, gc, restore, replicate --once) has come, as rsync, restic and git do:
// a bar on stderr with the files and bytes done of the total, the rate and
// the time left, drawn by a well-kept library (schollz/progressbar). Only
// when stderr is a terminal and -q was not given: never on stdout, nothing
// in pipes, files or logs. Until the work says how much there is (Begin),
// or when it cannot (the daemon carries out a mounted rewind, gc, ...), it
// is a spinner with the time spent. Done clears it, so the command's own
// output stands alone. A nil *progress shows nothing; every method may be
// called on it.
//
// It is a rewind.Progress, so the engine reports to it through the
// context (rewind.WithProgress) when it runs in this process.
type progress struct {
	mu    sync.Mutex // guards the fields below; the bar is drawn under it
	e     *env
	what  string
	noun  string // what the items are: "files" unless Begun otherwise
	bar   *progressbar.ProgressBar
	items int64 // the total, 0 when not known
	bytes int64
	doneN int64 // items done
	doneB int64 // bytes done
	ended bool
}

// startProgress begins showing what (a spinner until Begin says how much),
// or returns nil when stderr is not a terminal or -q was given.
func startProgress(e *env, what string) *progress {
	if e.quiet || !isTerminal(e.stderr) {
		return nil
	}
	p := &progress{e: e, what: what, noun: "files"}
	p.bar = p.newBar(-1, false)
	return p
}

func (p *progress) newBar(max int64, bytes bool) *progressbar.ProgressBar {
	opts := []progressbar.Option{
		progressbar.OptionSetWriter(p.e.stderr),
		progressbar.OptionSetDescription(p.label()),
		progressbar.OptionThrottle(100 * time.Millisecond),
		progressbar.OptionClearOnFinish(),
		progressbar.OptionSetElapsedTime(true),
		progressbar.OptionSetPredictTime(max > 0),
		progressbar.OptionSetWidth(24),
		progressbar.OptionUseIECUnits(true),
		progressbar.OptionSpinnerType(14),
		progressbar.OptionEnableColorCodes(false),
		// Drawn at once (then at most every 100 ms), so that even a short
		// operation says what it is doing.
		progressbar.OptionSetRenderBlankState(true),
	}
	switch {
	case bytes:
		// The bytes done of the total (OptionShowCount shows them), the rate.
		opts = append(opts, progressbar.OptionShowBytes(true), progressbar.OptionShowTotalBytes(true), progressbar.OptionShowCount())
	case max > 0:
		opts = append(opts, progressbar.OptionShowCount(), progressbar.OptionShowIts(), progressbar.OptionSetItsString(p.noun))
	default:
		// A spinner: its label says what it counted ("0/-, 0 files/hr"
		// said nothing).
	}
	return progressbar.NewOptions64(max, opts...)
}

// with is ctx carrying p for the engine (and a mounted source, which polls
// the daemon's counts into it); ctx itself when p shows nothing.
func (p *progress) with(ctx context.Context) context.Context {
	if p == nil {
		return ctx
	}
	return rewind.WithProgress(ctx, p)
}

// Begin says how much there is to do: a bar over the bytes when there are
// any (the files counted in its description), else over the files; with
// neither known, the spinner goes on, counting.
func (p *progress) Begin(what string, items, bytes int64) {
	p.BeginCounting(what, "files", items, bytes)
}

// BeginCounting is Begin of items that are nouns ("objects", "blobs",
// "packs"; "" is files): a rewind.Counting.
func (p *progress) BeginCounting(what, noun string, items, bytes int64) {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ended {
		return
	}
	if noun == "" {
		noun = "files"
	}
	p.what, p.noun, p.items, p.bytes, p.doneN, p.doneB = what, noun, items, bytes, 0, 0
	p.end()
	switch {
	case bytes > 0:
		p.bar = p.newBar(bytes, true)
	case items > 0:
		p.bar = p.newBar(items, false)
	default:
		p.bar = p.newBar(-1, false)
	}
}

// Add says that items more files and bytes more bytes are done.
func (p *progress) Add(items, bytes int64) {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ended {
		return
	}
	p.doneN += items
	p.doneB += bytes
	p.bar.Describe(p.label())
	if p.bytes > 0 {
		p.bar.Add64(bytes)
		return
	}
	p.bar.Add64(items)
}

// label is the bar's description: what, with the count of items when the
// bar counts bytes (and the bytes when a spinner counts items).
func (p *progress) label() string {
	switch {
	case p.bytes > 0:
		return fmt.Sprintf("%s: %d/%d %s", p.what, p.doneN, p.items, p.noun)
	case p.items == 0 && p.doneN > 0:
		return fmt.Sprintf("%s: %d %s, %s", p.what, p.doneN, p.noun, humanBytes(p.doneB))
	}
	return p.what
}

// Done clears the line (the command's own report follows).
func (p *progress) Done() {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ended {
		return
	}
	p.ended = true
	p.end()
}

// end stops the bar (and its spinner's ticker) and clears its line.
func (p *progress) end() {
	p.bar.Finish()
	p.bar.Exit()
	fmt.Fprint(p.e.stderr, "\r\x1b[K")
}
