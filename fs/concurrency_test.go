package fs

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/zerofs/zerofs/record"
)

// TestParallelWritesDuringRewinds: several goroutines write their own files
// and begin steps while rewinds run. Nothing deadlocks, no write fails, and
// every state a writer saw at a step boundary is what the view shows there
// (no capture was lost).
func TestParallelWritesDuringRewinds(t *testing.T) {
	m := mountT(t, Options{})
	mp := m.Mountpoint()
	const writers = 4
	if err := os.Mkdir(filepath.Join(mp, "w"), 0o755); err != nil {
		t.Fatal(err)
	}
	file := func(i int) string { return filepath.Join(mp, "w", fmt.Sprintf("g%d", i)) }
	for i := range writers {
		writeFile(t, file(i), "init")
	}
	t0 := stepT(t, mp, "start")

	// rewinding is odd while a rewind runs; it changes with each start
	// and end, so a writer can tell whether one overlapped its look.
	var rewinding atomic.Int64
	type seen struct {
		step    record.Seq
		content string
	}
	records := make([][]seen, writers)
	errs := make(chan error, 100)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for i := range writers {
		wg.Go(func() {
			for k := 0; ; k++ {
				select {
				case <-stop:
					return
				default:
				}
				if k%3 == 0 {
					g1 := rewinding.Load()
					label := fmt.Sprintf("w%d-%d", i, k)
					if err := ctlWrite(mp, "step", label); err != nil {
						errs <- fmt.Errorf("writer %d: step: %w", i, err)
						return
					}
					// The step's own sequence, while it is still the
					// current one: not the head, which may already be
					// past the captures the boundary made in the step.
					cur, err := os.ReadFile(filepath.Join(mp, ".zero/step"))
					if err != nil {
						errs <- err
						return
					}
					b, err := os.ReadFile(file(i))
					if err != nil {
						errs <- fmt.Errorf("writer %d: read: %w", i, err)
						return
					}
					var s record.Seq
					var curLabel string
					fmt.Sscan(string(cur), &s, &curLabel)
					if g2 := rewinding.Load(); g1 == g2 && g1%2 == 0 && curLabel == label {
						records[i] = append(records[i], seen{s, string(b)})
					}
				}
				if err := os.WriteFile(file(i), fmt.Appendf(nil, "g%d-v%d", i, k), 0o644); err != nil {
					errs <- fmt.Errorf("writer %d: write: %w", i, err)
					return
				}
			}
		})
	}
	wg.Go(func() {
		for range 8 {
			time.Sleep(150 * time.Millisecond) // real time: rewinds spread among the writes
			rewinding.Add(1)
			err := ctlWrite(mp, "rewind", fmt.Sprint(t0))
			rewinding.Add(1)
			if err != nil {
				errs <- fmt.Errorf("rewind: %w", err)
				return
			}
		}
	})
	time.Sleep(1500 * time.Millisecond) // real time: how long writers and rewinds overlap
	close(stop)
	finished := make(chan struct{})
	go func() { wg.Wait(); close(finished) }()
	select {
	case <-finished:
	case <-time.After(60 * time.Second):
		buf := make([]byte, 1<<20)
		t.Fatalf("deadlock: writers and rewinds still running after 60s\n%s", buf[:runtime.Stack(buf, true)])
	}
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if t.Failed() {
		return
	}

	checked := 0
	for i, rs := range records {
		for _, r := range rs {
			got, err := os.ReadFile(filepath.Join(view(mp, r.step), "w", fmt.Sprintf("g%d", i)))
			if err != nil {
				t.Errorf("@%d/w/g%d: %v", r.step, i, err)
				continue
			}
			if string(got) != r.content {
				t.Errorf("@%d/w/g%d = %q, but the writer saw %q there", r.step, i, got, r.content)
			}
			checked++
		}
	}
	if checked == 0 {
		t.Errorf("no step boundary was checked")
	}
	rewindT(t, mp, t0)
	for i := range writers {
		if got := readFile(t, file(i)); got != "init" {
			t.Errorf("g%d after rewind to %d = %q, want init", i, t0, got)
		}
	}
	// One per rewind that changed something (one that found the workspace
	// already at t0 records nothing); the last one always did.
	if n := strings.Count(ctlRead(t, mp, "log"), `"session_rewind"`); n < 1 || n > 9 {
		t.Errorf("%d session_rewind events, want 1 to 9", n)
	}
	t.Logf("checked %d step boundaries, head %d", checked, headOf(t, mp))
}
