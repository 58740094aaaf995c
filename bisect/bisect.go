package bisect

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/zerofs/zerofs/history"
	"github.com/zerofs/zerofs/record"
)

// Options say what to run and over which states.
type Options struct {
	// Argv is the command and its arguments (never a shell string).
	Argv []string
	// Turns searches the turns instead of the steps.
	Turns bool
	// Good and Bad bound the search (0: the oldest state kept, the head).
	Good, Bad Seq
	// Timeout, when > 0, bounds each probe; a probe past it is killed and
	// its state counts as bad.
	Timeout time.Duration
	// Dir is the directory, relative to the workspace root, the command
	// runs in (the scratch copy of it; its root when it did not exist).
	Dir string
	// Scratch is where the scratch directory is made (default the system's
	// temporary directory). It must lie outside the workspace.
	Scratch string
	// Probing, when not nil, hears of each probe before it runs (n: the
	// probes so far; left: at most how many more the search needs).
	Probing func(state Seq, c *Candidate, n, left int)
	// Probed, when not nil, hears of each probe when it is done.
	Probed func(Probe)
}

// A Report is what a search found.
type Report struct {
	// FirstBad is the first step (or turn) after which the command fails.
	FirstBad Candidate `json:"firstBad"`
	// Good and Bad are the states the search began from.
	Good Seq `json:"good"`
	Bad  Seq `json:"bad"`
	// Steps is how many steps (or turns) lay between them.
	Steps int `json:"steps"`
	// Probes are the runs of the command, in order; Tail the last lines
	// the command wrote at the first bad state.
	Probes []Probe       `json:"probes"`
	Tail   []string      `json:"tail,omitempty"`
	Took   time.Duration `json:"tookNs"`
	// Forks and Rewritten say how the scratch directory moved: written
	// whole, and paths rewritten between probes.
	Forks     int `json:"forks"`
	Rewritten int `json:"rewritten"`
}

// ErrNotBad: the command does not fail at the bad (newest) state, so there
// is nothing to look for.
var ErrNotBad = errors.New("bisect: the command does not fail at the bad state")

// ErrBadAtOldest: the command fails at the good (oldest) state too, so no
// step in the range broke it.
var ErrBadAtOldest = errors.New("bisect: the command fails at the good state too")

// ErrOnlySkipped: the command skipped (exit 125) every state that could
// tell; the first bad step is one of SkippedError.Candidates.
var ErrOnlySkipped = errors.New("bisect: only skipped states are left")

// A SearchError is a search that ended without a first bad step, with what
// it saw.
type SearchError struct {
	Err    error
	Report Report // the probes (FirstBad unset)
	// Candidates are the steps the first bad one is among (ErrOnlySkipped).
	Candidates []Candidate
}

func (e *SearchError) Error() string { return e.Err.Error() }
func (e *SearchError) Unwrap() error { return e.Err }

// Run searches src's history for the first step (or turn) after which
// opts.Argv fails. Each probe runs in a scratch directory under
// opts.Scratch; the workspace, its head and its log are only read.
func Run(ctx context.Context, src history.Source, opts Options) (Report, error) {
	if len(opts.Argv) == 0 {
		return Report{}, errors.New("bisect: no command")
	}
	start := time.Now()
	p, err := makePlan(src, opts.Turns, opts.Good, opts.Bad, opts.Argv)
	if err != nil {
		return Report{}, err
	}
	n := len(p.states) - 1
	rep := Report{Good: p.states[0], Bad: p.states[n], Steps: len(p.cands)}
	parent := opts.Scratch
	if parent == "" {
		parent = os.TempDir()
	}
	s, err := newScratch(ctx, src, p, parent, p.states[n])
	if err != nil {
		return rep, err
	}
	defer s.remove()
	thinned, err := src.Thinned()
	if err != nil {
		return rep, err
	}
	verdict := map[int]Probe{}
	probe := func(i int, left int) (Probe, error) {
		var c *Candidate
		if i > 0 {
			c = &p.cands[i-1]
		}
		if gone(thinned, p.states[i]) {
			// gc thinned this state away: it cannot be tested, so it is
			// skipped, as a state the command skips.
			pr := Probe{State: p.states[i], Candidate: c, Verdict: Skip, ExitCode: -1}
			rep.Probes = append(rep.Probes, pr)
			verdict[i] = pr
			if opts.Probed != nil {
				opts.Probed(pr)
			}
			return pr, nil
		}
		if opts.Probing != nil {
			opts.Probing(p.states[i], c, len(rep.Probes), left)
		}
		if err := s.moveTo(ctx, p.states[i]); err != nil {
			return Probe{}, err
		}
		dir := s.dir
		if opts.Dir != "" {
			if fi, err := os.Stat(filepath.Join(s.dir, opts.Dir)); err == nil && fi.IsDir() {
				dir = filepath.Join(s.dir, opts.Dir)
			}
		}
		pr, err := run(ctx, opts.Argv, dir, opts.Timeout, environ(p.states[i], dir))
		pr.State, pr.Candidate = p.states[i], c
		if err != nil {
			return pr, err
		}
		rep.Probes = append(rep.Probes, pr)
		verdict[i] = pr
		if opts.Probed != nil {
			opts.Probed(pr)
		}
		return pr, nil
	}
	finish := func(err error) (Report, error) {
		rep.Took, rep.Forks, rep.Rewritten = time.Since(start), s.forks, s.rewritten
		if err != nil {
			return rep, err
		}
		return rep, nil
	}
	// The bad end must be bad.
	pr, err := probe(n, bits(n+1))
	if err != nil {
		return finish(err)
	}
	switch pr.Verdict {
	case Good:
		return finish(&SearchError{Err: ErrNotBad, Report: rep})
	case Skip:
		return finish(&SearchError{Err: fmt.Errorf("%w: the command skipped it (exit 125)", ErrNotBad), Report: rep})
	}
	// The first bad state is in (lo, hi]: hi is known bad, lo known good
	// (-1: nothing is known good, so s0 may be the first bad one).
	lo, hi := -1, n
	search := func() error {
		for hi-lo > 1 {
			mid, ok := pick(lo, hi, verdict)
			if !ok {
				var cands []Candidate
				for i := lo + 1; i <= hi; i++ {
					if i > 0 {
						cands = append(cands, p.cands[i-1])
					}
				}
				return &SearchError{Err: ErrOnlySkipped, Report: rep, Candidates: cands}
			}
			pr, err := probe(mid, bits(hi-lo))
			if err != nil {
				return err
			}
			switch pr.Verdict {
			case Good:
				lo = mid
			case Bad, Timeout:
				hi = mid
			}
		}
		return nil
	}
	if p.hint > 0 {
		// An ok result of the same command vouches for the state at hint:
		// search above it first, and check it if the search ends there.
		lo = p.hint
		if err := search(); err != nil {
			return finish(err)
		}
		if hi == p.hint+1 {
			pr, err := probe(p.hint, 1)
			if err != nil {
				return finish(err)
			}
			if pr.Verdict != Good {
				// It does not hold (or cannot tell): search below it too.
				lo = -1
				if pr.Verdict != Skip {
					hi = p.hint
				}
				if err := search(); err != nil {
					return finish(err)
				}
			}
		}
	} else if err := search(); err != nil {
		return finish(err)
	}
	if hi == 0 {
		return finish(&SearchError{Err: ErrBadAtOldest, Report: rep})
	}
	rep.FirstBad = p.cands[hi-1]
	rep.Tail = verdict[hi].Tail
	return finish(nil)
}

// pick is the state to probe next in (lo, hi): the middle one, or the
// nearest to it that was not skipped.
func pick(lo, hi int, verdict map[int]Probe) (int, bool) {
	mid := lo + (hi-lo)/2
	for d := 0; d < hi-lo; d++ {
		for _, i := range []int{mid - d, mid + d} {
			if i > lo && i < hi {
				if _, probed := verdict[i]; !probed {
					return i, true
				}
			}
		}
	}
	return 0, false
}

// bits is ceil(log2(k)): the probes a search over k possibilities needs.
func bits(k int) int {
	n := 0
	for 1<<n < k {
		n++
	}
	return n
}

// gone reports whether the state t lies strictly inside one of the
// intervals a thin gave up.
func gone(thinned []record.ThinInterval, t Seq) bool {
	for _, iv := range thinned {
		if iv.After < t && t < iv.Before {
			return true
		}
	}
	return false
}
