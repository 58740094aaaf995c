package rewind

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/zerofs/zerofs/internal/durable"
	"github.com/zerofs/zerofs/internal/testsupport"
	"github.com/zerofs/zerofs/record"
)

// version is the content file f has after step i: 200 KiB of incompressible
// bytes, so that every step's before-state takes its room in the store.
func version(i int) []byte {
	b := make([]byte, 200<<10)
	rand.NewChaCha8([32]byte{byte(i), byte(i >> 8), 9}).Read(b)
	return b
}

// prunedEvents lists the history_pruned events of the log.
func prunedEvents(t *testing.T, e *Engine) []record.PrunedPayload {
	t.Helper()
	var out []record.PrunedPayload
	for ev, err := range e.Log().Events(1) {
		if err != nil {
			t.Fatal(err)
		}
		if ev.Type == record.TypeHistoryPruned {
			var p record.PrunedPayload
			if err := json.Unmarshal(ev.Payload, &p); err != nil {
				t.Fatal(err)
			}
			out = append(out, p)
		}
	}
	return out
}

// checkRetained checks every acknowledged step state at or after the cut
// (f as it was when that step began), that every state below the cut is
// gone, and that each history_pruned event counts the steps before its cut.
func checkRetained(t *testing.T, e *Engine, acked map[record.Seq]int) {
	t.Helper()
	cut := e.PrunedBefore()
	for seq, v := range acked {
		if seq < cut {
			if _, err := e.StateAt("f", seq); !errors.Is(err, record.ErrNoSuchSeq) {
				t.Fatalf("@%d below the cut %d: got %v, want ErrNoSuchSeq", seq, cut, err)
			}
			continue
		}
		got, ok := readAt(t, e, "f", seq)
		if want := string(version(v)); !ok || got != want {
			t.Fatalf("f at step %d (cut %d): got %d bytes, want version %d", seq, cut, len(got), v)
		}
	}
	steps := 0
	var prev record.Seq
	var tools []record.Seq
	for ev, err := range e.Log().Events(1) {
		if err != nil {
			t.Fatal(err)
		}
		switch ev.Type {
		case record.TypeToolCall:
			tools = append(tools, ev.Seq)
		case record.TypeHistoryPruned:
			var p record.PrunedPayload
			json.Unmarshal(ev.Payload, &p)
			steps = 0
			for _, s := range tools {
				if s >= prev && s < p.Before {
					steps++
				}
			}
			if p.Steps != steps {
				t.Fatalf("history_pruned before %d (previous cut %d) says %d steps went, want %d", p.Before, prev, p.Steps, steps)
			}
			prev = p.Before
		}
	}
}

// TestMaxStoreSize: with a bound, the store stays near it however many
// steps run; the oldest history goes first, each cut recorded with its
// reason, and every state since the cut reads back.
func TestMaxStoreSize(t *testing.T) {
	ctx := context.Background()
	const bound = 2 << 20
	e, ws := openT(t, Options{MaxStoreSize: bound})
	f := filepath.Join(ws, "f")
	acked := map[record.Seq]int{}
	os.WriteFile(f, version(0), 0o644)
	for i := 1; i <= 40; i++ {
		s, err := e.BeginStep(ctx, "s", nil)
		if err != nil {
			t.Fatal(err)
		}
		acked[s.Seq] = i - 1
		change(t, e, func() error { return os.WriteFile(f, version(i), 0o644) }, Change{Path: "f"})
		e.pruner.wait() // the step's prune runs after it returns
		if got := e.storeBytes(); got > bound+2*(200<<10)+64<<10 {
			t.Fatalf("step %d: store is %d bytes, bound %d", i, got, bound)
		}
	}
	pruned := prunedEvents(t, e)
	if len(pruned) == 0 {
		t.Fatal("no history_pruned event")
	}
	for _, p := range pruned {
		if p.Reason != "max-store-size" || p.StoreBytes <= bound || p.MaxStoreSize != bound {
			t.Errorf("history_pruned %+v: want reason max-store-size, the size over the bound", p)
		}
	}
	if e.PrunedBefore() == 0 || e.PrunedBefore() > e.Step().Seq {
		t.Errorf("cut at %d, current step %d", e.PrunedBefore(), e.Step().Seq)
	}
	checkRetained(t, e, acked)
	t.Logf("%d prunes; the cut is at %d of %d", len(pruned), e.PrunedBefore(), e.Head())
}

// boundChild runs steps on the workspace in $ZEROFS_TEST_WS under a small
// bound until killed, printing "ack SEQ V" once the step that began at SEQ
// has captured f (version V) and changed it. With $ZEROFS_TEST_KILL_AT=N it
// kills itself inside the Nth gc, after the first old pack is removed.
func boundChild(string) int {
	ctx := context.Background()
	if n, err := strconv.Atoi(os.Getenv("ZEROFS_TEST_KILL_AT")); err == nil && n > 0 {
		durable.TestHook = func(point, path string) {
			if point == "prune:removing" {
				if n--; n == 0 {
					testsupport.Die()
				}
			}
		}
	}
	ws := os.Getenv("ZEROFS_TEST_WS")
	root, err := os.Open(ws)
	if err != nil {
		os.Exit(3)
	}
	sync := os.Getenv("ZEROFS_TEST_SYNC") == "always"
	e, err := Open(ctx, root, Options{StoreDir: os.Getenv("ZEROFS_TEST_STORE"), Sync: sync, MaxStoreSize: 1 << 20})
	if err != nil {
		fmt.Println("error", err)
		os.Exit(4)
	}
	f := filepath.Join(ws, "f")
	v, _ := strconv.Atoi(os.Getenv("ZEROFS_TEST_V"))
	for {
		s, err := e.BeginStep(ctx, "s", nil)
		if err != nil {
			fmt.Println("error", err)
			os.Exit(5)
		}
		release, _, err := e.Begin(ctx, Caller{}, Change{Path: "f"})
		if err != nil {
			fmt.Println("error", err)
			os.Exit(6)
		}
		// Written aside and renamed over f, so that a kill leaves f
		// whole, in one version or the next.
		if err := os.WriteFile(f+".new", version(v+1), 0o644); err != nil {
			os.Exit(7)
		}
		if err := os.Rename(f+".new", f); err != nil {
			os.Exit(7)
		}
		release()
		if !sync {
			if err := e.Sync(); err != nil {
				os.Exit(8)
			}
		}
		fmt.Println("ack", s.Seq, v)
		v++
	}
}

// TestMaxStoreSizeCrash SIGKILLs a child running steps under a small bound,
// at random moments and inside gc's removals: after each round, every
// acknowledged state at or after the cut reads back, every state below it
// is gone, each history_pruned event counts what it dropped, and verify
// finds every blob a kept state needs.
func TestMaxStoreSizeCrash(t *testing.T) {
	rounds := 12
	if testing.Short() {
		rounds = 4
	}
	dir := t.TempDir()
	ws, store := filepath.Join(dir, "ws"), filepath.Join(dir, "store")
	os.Mkdir(ws, 0o755)
	os.WriteFile(filepath.Join(ws, "f"), version(0), 0o644)
	acked := map[record.Seq]int{}
	v := 0
	rnd := testsupport.Rand(t)
	for round := range rounds {
		killAt := 0
		if round%2 == 1 {
			killAt = 1 + rnd.IntN(3)
		}
		mode := []string{"batch", "always"}[round%3%2]
		c := testsupport.StartChild(t, "bound", "", testsupport.ChildOptions{Env: []string{
			"ZEROFS_TEST_WS=" + ws, "ZEROFS_TEST_STORE=" + store, "ZEROFS_TEST_V=" + strconv.Itoa(v),
			"ZEROFS_TEST_KILL_AT=" + strconv.Itoa(killAt), "ZEROFS_TEST_SYNC=" + mode}})
		lines := c.Lines
		if killAt == 0 {
			// Let it run some steps, then kill at a random moment.
			deadline := time.After(60 * time.Second)
			n := 0
		wait:
			for n < 5 {
				select {
				case l, ok := <-lines:
					if !ok {
						break wait
					}
					n++
					recordAck(t, l, acked, &v)
				case <-deadline:
					t.Fatalf("round %d: the child made no progress", round)
				}
			}
			time.Sleep(time.Duration(rnd.IntN(200)) * time.Millisecond) // real time: the kill's random moment
			c.Cmd.Process.Signal(syscall.SIGKILL)
		}
		c.Cmd.Wait()
		if !testsupport.KilledBySIGKILL(c.Cmd.ProcessState) {
			t.Fatalf("round %d: child ended with %v, want SIGKILL", round, c.Cmd.ProcessState)
		}
		for l := range lines {
			recordAck(t, l, acked, &v)
		}
		root, err := os.Open(ws)
		if err != nil {
			t.Fatal(err)
		}
		e, err := Open(context.Background(), root, Options{StoreDir: store})
		if err != nil {
			t.Fatalf("round %d: reopen: %v", round, err)
		}
		checkRetained(t, e, acked)
		keep, err := e.blobsNamedAfter(e.PrunedBefore())
		if err != nil {
			t.Fatal(err)
		}
		for id := range keep {
			if err := e.Blobs().Verify(id); err != nil {
				t.Fatalf("round %d: a blob a kept state needs: %v", round, err)
			}
		}
		// f's live content is the last version written (the child may
		// have died after writing it, before acknowledging).
		if b, err := os.ReadFile(filepath.Join(ws, "f")); err == nil && string(b) != string(version(v)) && string(b) != string(version(v+1)) {
			t.Fatalf("round %d: f holds neither version %d nor %d", round, v, v+1)
		} else if string(b) == string(version(v+1)) {
			v++
		}
		e.Close()
		root.Close()
	}
	if len(acked) == 0 {
		t.Fatal("nothing acknowledged")
	}
	var prunes int
	root, _ := os.Open(ws)
	e, err := Open(context.Background(), root, Options{StoreDir: store})
	if err != nil {
		t.Fatal(err)
	}
	prunes = len(prunedEvents(t, e))
	e.Close()
	root.Close()
	if prunes == 0 {
		t.Fatal("no history was pruned: the bound was never reached")
	}
	t.Logf("%d rounds: %d steps acknowledged, %d prunes", rounds, len(acked), prunes)
}

func recordAck(t *testing.T, line string, acked map[record.Seq]int, v *int) {
	t.Helper()
	f := strings.Fields(line)
	if len(f) != 3 || f[0] != "ack" {
		t.Fatalf("child printed %q", line)
	}
	seq, _ := strconv.ParseUint(f[1], 10, 64)
	n, _ := strconv.Atoi(f[2])
	acked[record.Seq(seq)] = n
	*v = n + 1
}

// TestStepDoesNotWaitForPruning (issue 26): a step that finds the store
// over its bound returns before the pruning it starts has finished (held
// here inside the gc's removal of blobs; before, the step ran the whole
// gc before it returned); the pruning then brings the store within the
// bound, its cut recorded with its reason and every state since it kept.
func TestStepDoesNotWaitForPruning(t *testing.T) {
	ctx := context.Background()
	entered, release := make(chan struct{}), make(chan struct{})
	var once, releaseOnce sync.Once
	unblock := func() { releaseOnce.Do(func() { close(release) }) }
	// Cleanups run last first: the gc is let go, the engine closed
	// (openT's), then the hook restored.
	t.Cleanup(func() { durable.TestHook = nil })
	durable.TestHook = func(point, _ string) {
		if strings.HasPrefix(point, "prune:") {
			once.Do(func() { close(entered); <-release })
		}
	}
	const bound = 1 << 20
	e, ws := openT(t, Options{MaxStoreSize: bound})
	t.Cleanup(unblock)
	f := filepath.Join(ws, "f")
	acked := map[record.Seq]int{}
	os.WriteFile(f, version(0), 0o644)
	for i := 1; ; i++ {
		if i > 40 {
			t.Fatal("the store never went over its bound")
		}
		stepped := make(chan error, 1)
		var s record.Event
		go func() {
			var err error
			s, err = e.BeginStep(ctx, "s", nil)
			stepped <- err
		}()
		select {
		case err := <-stepped:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("step %d waited for the pruning it started", i)
		}
		acked[s.Seq] = i - 1
		// The step has returned: is its pruning under way (held)?
		if testsupport.Poll(200*time.Millisecond, func() bool {
			select {
			case <-entered:
				return true
			default:
				return false
			}
		}) == nil {
			break
		}
		change(t, e, func() error { return os.WriteFile(f, version(i), 0o644) }, Change{Path: "f"})
	}
	if len(prunedEvents(t, e)) == 0 {
		t.Fatal("the pruning held in its removals appended no history_pruned event")
	}
	unblock()
	e.pruner.wait()
	if got := e.storeBytes(); got > bound {
		t.Fatalf("store is %d bytes after the pruning, bound %d", got, bound)
	}
	for _, p := range prunedEvents(t, e) {
		if p.Reason != "max-store-size" || p.StoreBytes <= bound || p.MaxStoreSize != bound {
			t.Errorf("history_pruned %+v: want reason max-store-size, the size over the bound", p)
		}
	}
	checkRetained(t, e, acked)
}
