package replicate

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"strconv"
	"sync"
	"time"
)

// Every S3 request has its own deadline and is retried on its own, so an
// endpoint that accepts a connection and never answers costs one request
// its deadline, not an attempt its whole Options.Timeout, and a request
// that has waited long is shown in status (Request, State.Stalled).
//
// The deadline is on silence, not on the whole request: a request is
// given up when no byte of its body has been read for requestTimeout and
// no answer came (a large upload on a slow link goes on as long as it
// moves). A request given up, refused by a 5xx, 408 or 429, or cut off by
// the network is sent again after a pause that doubles (with jitter), up
// to requestAttempts times; any other answer (a 4xx: refused, exists, not
// found) is final at once. The SDK's own retries are off: these are them.
var (
	requestTimeout        = 20 * time.Second
	requestAttempts       = 4
	requestBackoff        = 500 * time.Millisecond
	stallAfter            = 5 * time.Second
	completeTimeoutFactor = 10 // CompleteMultipartUpload may take long to answer
)

// onceKey in a context: its requests are not retried (Replicator.Claim
// at mount, which must not keep a mount waiting on an endpoint that is
// down).
type onceKey struct{}

// errNoAnswer: a request went unanswered for its deadline.
var errNoAnswer = errors.New("no answer from the endpoint")

// Request is one S3 request of a replicator that has waited long: what
// status shows while it waits (State.Stalled).
type Request struct {
	Op      string    `json:"op"`
	Object  string    `json:"object"`
	Attempt int       `json:"attempt"`
	Of      int       `json:"of"`
	Since   time.Time `json:"since"`
	// LastError is why the attempt before this one failed ("" on the
	// first).
	LastError string `json:"lastError,omitempty"`
	// PID and Start name the process that sent it (its pid and start
	// time, field 22 of /proc/PID/stat): a writer killed while it waited
	// leaves its request in replica.json, and status shows it only while
	// that process runs.
	PID   int    `json:"pid,omitempty"`
	Start uint64 `json:"start,omitempty"`
}

// selfStart is this process's start time (0 when /proc does not say).
var selfStart = sync.OnceValue(func() uint64 {
	b, err := os.ReadFile("/proc/self/stat")
	if err != nil {
		return 0
	}
	// The command name, in parentheses, may itself hold ") ".
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0
	}
	f := bytes.Fields(b[i+1:])
	if len(f) < 20 {
		return 0
	}
	n, _ := strconv.ParseUint(string(f[19]), 10, 64)
	return n
})

// watcher hears of requests that have waited long (stalled) and of their
// end (done).
type watcher func(req Request, done bool)

// requester runs requests with their deadlines and retries.
type requester struct {
	mu    sync.Mutex // guards watch
	watch watcher
}

func (q *requester) setWatch(w watcher) {
	q.mu.Lock()
	q.watch = w
	q.mu.Unlock()
}

func (q *requester) note(req Request, done bool) {
	q.mu.Lock()
	w := q.watch
	q.mu.Unlock()
	if w != nil {
		w(req, done)
	}
}

// do runs fn (one S3 request of op on object) until it succeeds, fails
// for good, or its attempts are spent. body, when not nil, is what fn
// sends: rewound for each attempt, and read through a reader that tells
// the deadline the request moves. factor stretches the deadline.
func (q *requester) do(ctx context.Context, op, object string, body io.ReadSeeker, factor int, fn func(ctx context.Context, body io.Reader) error) error {
	_, err := q.run(ctx, op, object, body, factor, false, fn)
	return err
}

// held is a request that succeeded and whose answer is still being read
// (a GET's body): moved restarts its silence, release ends it.
type held struct {
	ctx    context.Context
	d      *deadline
	cancel context.CancelCauseFunc
	done   func()
}

func (h *held) moved() { h.d.moved() }

func (h *held) release() {
	h.d.stop()
	h.cancel(nil)
	h.done()
}

// run is do; with hold, a request that succeeds keeps its context and
// deadline for the reading of its answer, until the held's release.
func (q *requester) run(ctx context.Context, op, object string, body io.ReadSeeker, factor int, hold bool, fn func(ctx context.Context, body io.Reader) error) (*held, error) {
	var last error
	var mu sync.Mutex // guards noted (set by a timer)
	noted := false
	done := func() {
		mu.Lock()
		n := noted
		noted = false
		mu.Unlock()
		if n {
			q.note(Request{Op: op, Object: object}, true)
		}
	}
	for attempt := 1; ; attempt++ {
		var rd io.Reader
		if body != nil {
			if _, err := body.Seek(0, io.SeekStart); err != nil {
				done()
				return nil, err
			}
		}
		req := Request{Op: op, Object: object, Attempt: attempt, Of: requestAttempts, Since: time.Now().UTC()}
		if last != nil {
			req.LastError = last.Error()
		}
		rctx, cancel := context.WithCancelCause(ctx)
		dl := newDeadline(time.Duration(max(factor, 1))*requestTimeout, func() { cancel(errNoAnswer) }, func() {
			mu.Lock()
			noted = true
			mu.Unlock()
			q.note(req, false)
		})
		if body != nil {
			rd = &movingReader{r: body, d: dl}
		}
		err := fn(rctx, rd)
		if err == nil && hold {
			return &held{ctx: rctx, d: dl, cancel: cancel, done: done}, nil
		}
		dl.stop()
		if err != nil && errors.Is(context.Cause(rctx), errNoAnswer) && ctx.Err() == nil {
			err = fmt.Errorf("%w for %v", errNoAnswer, time.Duration(max(factor, 1))*requestTimeout)
		}
		cancel(nil)
		if err == nil || !retryable(err) || ctx.Err() != nil || attempt >= requestAttempts || ctx.Value(onceKey{}) != nil {
			if err != nil && attempt > 1 && ctx.Err() == nil {
				err = fmt.Errorf("%w (attempt %d of %d)", err, attempt, requestAttempts)
			}
			done()
			return nil, err
		}
		last = err
		pause := requestBackoff << (attempt - 1)
		pause += rand.N(pause/2 + 1)
		select {
		case <-ctx.Done():
			done()
			return nil, err
		case <-time.After(pause):
		}
	}
}

// retryable: a request given up for silence, refused by a 5xx, 408 or 429,
// or that got no answer at all (a connection refused, reset or cut).
func retryable(err error) bool {
	if errors.Is(err, errNoAnswer) {
		return true
	}
	if errors.Is(err, ErrExists) || errors.Is(err, ErrNotFound) {
		return false
	}
	switch s := status(err); {
	case s >= 500, s == http.StatusTooManyRequests, s == http.StatusRequestTimeout:
		return true
	case s != 0:
		return false
	}
	return !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded)
}

// deadline fires expire once a request has been silent for d, and stall
// once it has been for stallAfter (both restarted by every move).
type deadline struct {
	mu           sync.Mutex // guards the timers' restarts against stop
	d            time.Duration
	expire, warn *time.Timer
	stopped      bool
}

func newDeadline(d time.Duration, expire, stall func()) *deadline {
	return &deadline{d: d, expire: time.AfterFunc(d, expire), warn: time.AfterFunc(min(stallAfter, d), stall)}
}

// moved restarts the silence.
func (t *deadline) moved() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.stopped {
		t.expire.Reset(t.d)
		t.warn.Reset(min(stallAfter, t.d))
	}
}

func (t *deadline) stop() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.stopped = true
	t.expire.Stop()
	t.warn.Stop()
}

// movingReader tells a deadline of every read of a request's body.
type movingReader struct {
	r io.Reader
	d *deadline
}

func (m *movingReader) Read(p []byte) (int, error) {
	n, err := m.r.Read(p)
	if n > 0 {
		m.d.moved()
	}
	return n, err
}

// Seek lets the SDK rewind the body (it reads it once to sign it).
func (m *movingReader) Seek(off int64, whence int) (int64, error) {
	s, ok := m.r.(io.Seeker)
	if !ok {
		return 0, errors.New("replicate: body cannot seek")
	}
	return s.Seek(off, whence)
}

// heldBody is a GET's body read under its request's deadline: a read
// that moves restarts the silence, Close ends the request.
type heldBody struct {
	rc   io.ReadCloser
	h    *held
	once sync.Once
}

func (b *heldBody) Read(p []byte) (int, error) {
	n, err := b.rc.Read(p)
	if n > 0 {
		b.h.moved()
	}
	if err != nil && err != io.EOF && errors.Is(context.Cause(b.h.ctx), errNoAnswer) {
		err = fmt.Errorf("%w for %v", errNoAnswer, b.h.d.d)
	}
	return n, err
}

func (b *heldBody) Close() error {
	err := b.rc.Close()
	b.once.Do(b.h.release)
	return err
}
