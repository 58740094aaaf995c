package bisect

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Verdict is what a probe made of a state.
type Verdict string

const (
	Good Verdict = "good"
	Bad  Verdict = "bad"
	Skip Verdict = "skip"
	// Timeout: the command ran past Options.Timeout and was killed; the
	// state counts as bad.
	Timeout Verdict = "timeout"
)

// A Probe is one run of the command against one state.
type Probe struct {
	// State is the sequence of the state probed; Candidate the step (or
	// turn) just before it (nil for the oldest state).
	State     Seq        `json:"state"`
	Candidate *Candidate `json:"candidate,omitempty"`
	Verdict   Verdict    `json:"verdict"`
	// ExitCode is the command's exit status (-1 when it was killed).
	ExitCode int           `json:"exitCode"`
	Took     time.Duration `json:"tookNs"`
	// Tail is the last lines the command wrote (stdout and stderr
	// together), at most TailLines.
	Tail []string `json:"tail,omitempty"`
}

// TailLines bounds the lines of a probe's output that are kept.
const TailLines = 20

// maxTailBytes bounds a kept line.
const maxTailBytes = 512

// ErrAbort: the command exited 128 or more (a signal killed it, or it asked
// to stop the search, as git bisect run's command may).
var ErrAbort = errors.New("bisect: the command exited 128 or more: search stopped")

// run runs argv in dir with env and says what it made of the state.
func run(ctx context.Context, argv []string, dir string, timeout time.Duration, env []string) (Probe, error) {
	cctx := ctx
	if timeout > 0 {
		var cancel context.CancelFunc
		cctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = dir
	cmd.Env = env
	out := &tail{}
	cmd.Stdout, cmd.Stderr = out, out
	cmd.Stdin = nil
	// Its own process group: a timeout kills everything it started.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	// A process it left behind in another group may hold its output open:
	// the probe ends anyway.
	cmd.WaitDelay = 5 * time.Second
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return Probe{}, fmt.Errorf("bisect: %w", err)
	}
	done := make(chan struct{})
	killed := false
	var mu sync.Mutex
	go func() {
		select {
		case <-cctx.Done():
			mu.Lock()
			killed = true
			mu.Unlock()
			syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		case <-done:
		}
	}()
	err := cmd.Wait()
	close(done)
	p := Probe{Took: time.Since(start), Tail: out.lines()}
	mu.Lock()
	wasKilled := killed
	mu.Unlock()
	if wasKilled {
		// Whatever it left running in its group goes with it.
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		if ctx.Err() != nil {
			return p, ctx.Err()
		}
		p.Verdict, p.ExitCode = Timeout, -1
		return p, nil
	}
	if err != nil && cmd.ProcessState == nil {
		return p, fmt.Errorf("bisect: %w", err)
	}
	// The exit status (exec.ErrWaitDelay only says its output was held
	// open past it).
	code := cmd.ProcessState.ExitCode()
	if st, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && st.Signaled() {
		code = 128 + int(st.Signal())
	}
	p.ExitCode = code
	switch {
	case code == 0:
		p.Verdict = Good
	case code == 125:
		p.Verdict = Skip
	case code < 128:
		p.Verdict = Bad
	default:
		return p, fmt.Errorf("%w (exit %d)", ErrAbort, code)
	}
	return p, nil
}

// tail keeps the last TailLines lines written to it.
type tail struct {
	mu   sync.Mutex // guards buf, kept
	buf  []byte     // the unfinished last line
	kept []string
}

func (t *tail) Write(b []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := len(b)
	for len(b) > 0 {
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			if len(t.buf) < maxTailBytes {
				t.buf = append(t.buf, b[:min(len(b), maxTailBytes-len(t.buf))]...)
			}
			break
		}
		if len(t.buf) < maxTailBytes {
			t.buf = append(t.buf, b[:min(i, maxTailBytes-len(t.buf))]...)
		}
		t.push(string(t.buf))
		t.buf = t.buf[:0]
		b = b[i+1:]
	}
	return n, nil
}

func (t *tail) push(line string) {
	t.kept = append(t.kept, strings.ToValidUTF8(line, "\uFFFD"))
	if len(t.kept) > TailLines {
		t.kept = t.kept[len(t.kept)-TailLines:]
	}
}

func (t *tail) lines() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.buf) > 0 {
		t.push(string(t.buf))
		t.buf = nil
	}
	return append([]string(nil), t.kept...)
}

// environ is the command's environment: the caller's, and where it runs.
func environ(state Seq, dir string) []string {
	return append(os.Environ(), fmt.Sprintf("ZEROFS_BISECT_STATE=%d", state), "ZEROFS_BISECT_DIR="+dir, "PWD="+dir)
}
