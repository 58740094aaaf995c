package e2e

import (
	"bytes"
	"context"
	"fmt"
	"github.com/zerofs/zerofs/internal/testsupport"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// writerScript is one writer, k, for n rounds: it rewrites o<k> in place
// with the lines 1..i (O_TRUNC), replaces r<k> atomically with the same,
// creates and removes t<k>.<i>, and when $3 is "append" appends i to a<k>.
// Rewinds run under it, so a command may fail (mv of a temp file the rewind
// just removed): it carries on, as a retried tool would.
//
// What holds at every moment, so in every @T: o<k> and r<k> are exactly
// 1..m for some m; a<k> is strictly increasing numbers, one a line (an
// append adds a number above any written before, and a rewind brings back
// an earlier such state).
const writerScript = `
k=$1; n=$2; i=1
while [ $i -le $n ]; do
	seq 1 $i > o$k
	seq 1 $i > .r$k.tmp && mv -f .r$k.tmp r$k
	: > t$k.$i; rm -f t$k.$((i-1))
	[ "$3" = append ] && echo $i >> a$k
	i=$((i+1))
done
`

// A deadlock is told from a slow machine by progress, not by time: these
// tests fail when the workspace's head stops moving for stuckAfter while
// commands still run. A fixed deadline for the whole work (two minutes)
// failed them at load 19-24, where the same work takes four. commandsBound
// only keeps a hung command from outliving the test.
const (
	stuckAfter    = 90 * time.Second
	commandsBound = 15 * time.Minute
)

// waitWhileProgressing waits for n results on done and returns them. It
// fails the test when head stays put for stuckAfter while some are still
// running (a deadlock: every writer's work appends events), or when ctx
// ends.
func waitWhileProgressing[R any](t *testing.T, ctx context.Context, ws string, n int, done <-chan R, what string) []R {
	t.Helper()
	var out []R
	last, since := head(t, ws), time.Now()
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for len(out) < n {
		select {
		case r := <-done:
			out = append(out, r)
		case <-tick.C:
			if h := head(t, ws); h != last {
				last, since = h, time.Now()
			} else if time.Since(since) > stuckAfter {
				t.Fatalf("%s: head stayed at %d for %v with %d of %d still running: deadlock?", what, last, stuckAfter, n-len(out), n)
			}
		case <-ctx.Done():
			t.Fatalf("%s: still running after %v", what, commandsBound)
		}
	}
	return out
}

// TestParallelWritersAndRewinds: four shell writers run while steps begin
// and rewinds run. Nothing deadlocks (the work keeps moving), and
// every view of a recorded step shows writer files in a state a writer
// could have left, the same whether read while the writers ran or
// afterwards.
func TestParallelWritersAndRewinds(t *testing.T) {
	parallelWriters(t, "")
}

// TestAppendDuringRewind: the same with writers that also append with >>,
// the commonest way a tool writes a log.
func TestAppendDuringRewind(t *testing.T) {
	parallelWriters(t, "append")
}

func parallelWriters(t *testing.T, mode string) {
	ws := mountT(t)
	const writers, iterations, rounds = 4, 150, 4
	w := filepath.Join(ws, "w")
	if err := os.Mkdir(w, 0o755); err != nil {
		t.Fatal(err)
	}
	step(t, ws, "start")

	ctx, cancel := context.WithTimeout(context.Background(), commandsBound)
	defer cancel()
	done := make(chan error, writers)
	for k := range writers {
		cmd := exec.CommandContext(ctx, "bash", "-c", writerScript, "writer", strconv.Itoa(k), strconv.Itoa(iterations), mode)
		cmd.Dir = w
		cmd.WaitDelay = 5 * time.Second
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		go func() { done <- cmd.Wait() }()
	}

	// Each round: let the writers make some history, begin a step, take
	// a first look at its view while they still write, let them make more,
	// then rewind to the step before.
	heads := []int64{}
	early := map[int64]tree{}
	waitProgress := func() {
		t.Helper()
		h0 := head(t, ws)
		if err := testsupport.Poll(stuckAfter, func() bool { return head(t, ws) >= h0+30 }); err != nil {
			t.Fatalf("head stayed near %d for %v: the writers are stuck", h0, stuckAfter)
		}
	}
	for r := range rounds {
		waitProgress()
		T := step(t, ws, fmt.Sprintf("round %d", r))
		heads = append(heads, T)
		early[T] = snapshot(t, view(ws, T))
		waitProgress()
		target := heads[max(0, r-1)]
		rewindTo(t, ws, target)
	}
	for _, err := range waitWhileProgressing(t, ctx, ws, writers, done, "writers") {
		if err != nil {
			t.Errorf("writer: %v", err)
		}
	}

	// Views of the recorded heads, read again now, and of seqs spread over
	// the whole history (any seq is a valid T, also inside a step).
	h := head(t, ws)
	for _, T := range heads {
		late := snapshot(t, view(ws, T))
		checkWriterState(t, "@"+itoa(T), late.Sub("w"), writers)
		sameTree(t, "@"+itoa(T)+" read after the writers vs. while they ran", early[T], late)
	}
	for T := int64(0); T <= h; T += max(1, h/15) {
		checkWriterState(t, "@"+itoa(T), snapshot(t, view(ws, T)).Sub("w"), writers)
	}
	final := snapshot(t, ws).Sub("w")
	checkWriterState(t, "the workspace", final, writers)
	readLog(t, filepath.Join(ws, ".zero/log"))
}

// checkWriterState checks the writers' invariants on the files of a view.
func checkWriterState(t *testing.T, what string, w tree, writers int) {
	t.Helper()
	for k := range writers {
		a := fmt.Sprintf("a%d", k)
		if e, ok := w[a]; ok {
			prev := 0
			for _, line := range strings.SplitAfter(e.Content, "\n") {
				if line == "" {
					break
				}
				n, err := strconv.Atoi(strings.TrimSuffix(line, "\n"))
				if err != nil || n <= prev || !strings.HasSuffix(line, "\n") {
					t.Errorf("%s/w/%s: line %q after %d: want a complete line with a number above it\n%s", what, a, line, prev, e.Content)
					break
				}
				prev = n
			}
		}
		for _, name := range []string{fmt.Sprintf("o%d", k), fmt.Sprintf("r%d", k)} {
			if e, ok := w[name]; ok {
				n := strings.Count(e.Content, "\n")
				if e.Content != seqLines(n) {
					t.Errorf("%s/w/%s: got %q, want 1..%d", what, name, e.Content, n)
				}
			}
		}
	}
}

// seqLines is `seq 1 n`.
func seqLines(n int) string {
	var b strings.Builder
	for i := 1; i <= n; i++ {
		fmt.Fprintf(&b, "%d\n", i)
	}
	return b.String()
}

// creatorScript creates new-1.txt, new-2.txt, ... with `printf x >` until
// the file $1 exists, reports each failure on stderr as "FAIL new-i.txt:
// <the shell's message>", and ends by printing "DONE <count>".
const creatorScript = `
stop=$1; i=0; err=$(mktemp)
while [ ! -e "$stop" ]; do
	i=$((i+1))
	if ! { printf x > new-$i.txt; } 2>"$err"; then
		echo "FAIL new-$i.txt: $(cat "$err")" >&2
	fi
done
rm -f "$err"
echo "DONE $i"
`

// TestCreatorsWaitForRewinds: two shells create files in a loop, the same
// names one after the other (one creates new-i.txt, the other truncates
// it or creates it), while rewinds run one after another, each removing
// the files created since its target. SPEC: writers wait for a rewind;
// none of their calls fails. (On 66d441b a few creates in a thousand
// failed with ENOENT: the kernel still had new-i.txt, which the rewind had
// just removed, and the open that waited for the rewind found it gone.)
func TestCreatorsWaitForRewinds(t *testing.T) {
	ws := mountT(t)
	const creators, rewinds = 2, 20
	stop := filepath.Join(t.TempDir(), "stop")
	step(t, ws, "start")

	ctx, cancel := context.WithTimeout(context.Background(), commandsBound)
	defer cancel()
	type result struct {
		stdout, stderr string
		err            error
	}
	done := make(chan result, creators)
	for range creators {
		cmd := exec.CommandContext(ctx, "bash", "-c", creatorScript, "creator", stop)
		cmd.Dir = ws
		cmd.WaitDelay = 5 * time.Second
		var out, errOut bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errOut
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		go func() {
			err := cmd.Wait()
			done <- result{out.String(), errOut.String(), err}
		}()
	}
	stopOnce := func() {
		if _, err := os.Stat(stop); err != nil {
			if err := os.WriteFile(stop, nil, 0o644); err != nil {
				t.Error(err)
			}
		}
	}
	defer stopOnce()

	waitProgress := func() {
		t.Helper()
		h0 := head(t, ws)
		if err := testsupport.Poll(stuckAfter, func() bool { return head(t, ws) >= h0+20 }); err != nil {
			t.Fatalf("head stayed near %d for %v: the creators are stuck", h0, stuckAfter)
		}
	}
	var heads []int64
	for r := range rewinds {
		waitProgress()
		heads = append(heads, step(t, ws, fmt.Sprintf("round %d", r)))
		waitProgress()
		rewindTo(t, ws, heads[max(0, len(heads)-2)])
	}
	stopOnce()

	total, failed := 0, 0
	for _, r := range waitWhileProgressing(t, ctx, ws, creators, done, "creators") {
		if r.err != nil {
			t.Errorf("creator: %v\n%s", r.err, r.stderr)
		}
		n, ok := strings.CutPrefix(strings.TrimSpace(r.stdout), "DONE ")
		k, err := strconv.Atoi(n)
		if !ok || err != nil {
			t.Errorf("creator printed %q, want DONE <count>", r.stdout)
		}
		total += k
		for _, line := range strings.Split(strings.TrimSpace(r.stderr), "\n") {
			if line == "" {
				continue
			}
			if failed++; failed <= 10 {
				t.Errorf("%s", line)
			}
		}
	}
	t.Logf("%d creates during %d rewinds, %d failed", total, rewinds, failed)
	if failed > 0 {
		t.Errorf("%d of %d creates failed while rewinds ran; want none", failed, total)
	}
}
