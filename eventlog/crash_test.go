package eventlog

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/zerofs/zerofs/internal/testsupport"
	"github.com/zerofs/zerofs/record"
)

// Lock and crash tests with child processes (see main_test.go). The crash
// points use the package-variable seams rather than a build tag: the child is
// this very test binary, so `go test ./...` (and scripts/test.sh) runs them
// with nothing to build or skip.

func init() {
	children["try-open"] = childTryOpen
	children["hold"] = childHold
	children["append-loop"] = childAppendLoop
	children["die-mid-append"] = childDieMidAppend
}

// childTryOpen tries to open the log and prints what happened.
func childTryOpen(path string) int {
	start := time.Now()
	l, err := Open(path, Options{Logger: quietLogger()})
	took := time.Since(start)
	switch {
	case errors.Is(err, ErrLocked):
		fmt.Printf("locked %d\n", took.Milliseconds())
	case err != nil:
		fmt.Printf("error %v\n", err)
	default:
		fmt.Printf("opened head=%d\n", l.Head())
		l.Close()
	}
	return 0
}

// childHold opens the log and holds it until killed.
func childHold(path string) int {
	l, err := Open(path, Options{Logger: quietLogger()})
	if err != nil {
		fmt.Printf("error %v\n", err)
		return 1
	}
	fmt.Printf("holding head=%d\n", l.Head())
	time.Sleep(time.Hour) // held until the parent kills it
	return 0
}

func TestLockSameProcess(t *testing.T) {
	path := filepath.Join(t.TempDir(), "events.jsonl")
	l := openT(t, path, Options{})
	start := time.Now()
	l2, err := Open(path, Options{Logger: quietLogger()})
	if !errors.Is(err, ErrLocked) {
		if err == nil {
			l2.Close()
		}
		t.Fatalf("second Open: got %v, want ErrLocked", err)
	}
	if took := time.Since(start); took > time.Second {
		t.Errorf("refusal took %v, want at once", took)
	}
	// The refused Open did not disturb the holder.
	appendN(t, l, 1)
	l.Close()
	l3 := openT(t, path, Options{})
	if h := l3.Head(); h != 1 {
		t.Errorf("got head %d, want 1", h)
	}
}

func TestLockOtherProcess(t *testing.T) {
	t.Run("parent holds", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "events.jsonl")
		l := openT(t, path, Options{})
		c := startChild(t, "try-open", path, 0)
		line := c.Expect(t, "locked ")
		if ms, _ := strconv.Atoi(strings.TrimPrefix(line, "locked ")); ms > 1000 {
			t.Errorf("refusal took %d ms, want at once", ms)
		}
		l.Close()
		c = startChild(t, "try-open", path, 0)
		c.Expect(t, "opened head=0")
	})
	t.Run("child holds, then is killed", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "events.jsonl")
		l := openT(t, path, Options{})
		appendN(t, l, 2)
		l.Close()
		c := startChild(t, "hold", path, 0)
		c.Expect(t, "holding head=2")
		start := time.Now()
		_, err := Open(path, Options{Logger: quietLogger()})
		if !errors.Is(err, ErrLocked) {
			t.Fatalf("got %v, want ErrLocked", err)
		}
		if took := time.Since(start); took > time.Second {
			t.Errorf("refusal took %v, want at once", took)
		}
		c.Kill(t)
		// The kernel drops a dead process's flock with its last descriptor.
		l2 := openT(t, path, Options{})
		if h := l2.Head(); h != 2 {
			t.Errorf("got head %d, want 2", h)
		}
	})
}

// childAppendLoop appends until killed, printing "ack N" once Append (or
// AppendBatch) has returned every sequence up to N. Payloads vary from a few
// bytes to 16 KiB, so that kills land inside writes of many sizes (a SIGKILL
// during a large write can leave part of it: a torn tail).
func childAppendLoop(path string) int {
	syncOn := os.Getenv("EVENTLOG_TEST_SYNC") == "1"
	rand := testsupport.ChildRand()
	l, err := Open(path, Options{Sync: syncOn, Logger: quietLogger()})
	if err != nil {
		fmt.Printf("error %v\n", err)
		return 1
	}
	fmt.Printf("open head=%d\n", l.Head())
	for i := 0; ; i++ {
		n := 1 + rand.IntN(3)
		recs := make([]Record, n)
		for j := range recs {
			size := rand.IntN(16 << 10)
			if rand.IntN(4) > 0 {
				size = rand.IntN(200)
			}
			recs[j] = Record{Type: "t", Payload: loopPayload{Len: size, Pad: strings.Repeat("x", size)}}
		}
		evs, err := l.AppendBatch(context.Background(), recs)
		if err != nil {
			fmt.Printf("error %v\n", err)
			return 1
		}
		fmt.Printf("ack %d\n", evs[len(evs)-1].Seq)
	}
}

type loopPayload struct {
	Len int    `json:"len"`
	Pad string `json:"pad"`
}

// TestCrashLoop SIGKILLs a child appending in a loop at random moments
// (sometimes while it opens and recovers the log), for several rounds on the
// same log, alternating Options.Sync: at least 20 rounds, more while under
// 3 s have passed. Each child's Open must succeed on what the last one left,
// and at the end the log must check out and hold every acknowledged event: a
// process crash loses nothing that was acknowledged, with or without fsync
// (the page cache survives).
func TestCrashLoop(t *testing.T) {
	minRounds, budget := 20, 3*time.Second
	if testing.Short() {
		minRounds, budget = 5, 0
	}
	rnd := testsupport.Rand(t)
	path := filepath.Join(t.TempDir(), "events.jsonl")
	var maxAck record.Seq
	killedEarly, rounds := 0, 0
	for start := time.Now(); rounds < minRounds || time.Since(start) < budget && rounds < 200; rounds++ {
		round := rounds
		syncOn := "0"
		if round%2 == 0 {
			syncOn = "1"
		}
		c := startChild(t, "append-loop", path, rnd.Uint64(), "EVENTLOG_TEST_SYNC="+syncOn)
		opened := false
		if round%4 == 3 {
			// Kill it at a random moment from its start: often before
			// or while it opens and recovers the log.
			time.Sleep(time.Duration(rnd.IntN(30)) * time.Millisecond) // real time: the kill's random moment
		} else {
			c.Expect(t, "open head=")
			opened = true
			time.Sleep(time.Duration(rnd.IntN(100)) * time.Millisecond) // real time: the kill's random moment
		}
		c.Kill(t)
		for line := range c.Lines {
			if strings.HasPrefix(line, "open ") {
				opened = true
			}
			if s, ok := strings.CutPrefix(line, "ack "); ok {
				n, err := strconv.ParseUint(s, 10, 64)
				if err != nil {
					t.Fatalf("round %d: child printed %q", round, line)
				}
				maxAck = max(maxAck, record.Seq(n))
			} else if !strings.HasPrefix(line, "open ") {
				t.Fatalf("round %d: child printed %q", round, line)
			}
		}
		if !opened {
			killedEarly++
		}
		// The next child's Open checks and recovers the log (an error
		// fails the round above); the end checks every acknowledgement.
	}
	l := openT(t, path, Options{})
	head := l.Head()
	l.Close()
	evs := readAll(t, path, 0)
	checkSeqs(t, evs, 1, head)
	for _, ev := range evs {
		var p loopPayload
		if err := json.Unmarshal(ev.Payload, &p); err != nil || len(p.Pad) != p.Len {
			t.Fatalf("seq %d: payload damaged (%v)", ev.Seq, err)
		}
	}
	if head < maxAck || maxAck == 0 {
		t.Fatalf("got head %d, want at least %d acknowledged (and some)", head, maxAck)
	}
	t.Logf("%d rounds (%d killed before opening): %d events, %d acknowledged, %d torn tails cut",
		rounds, killedEarly, head, maxAck, len(tornFiles(t, path)))
}

// childDieMidAppend appends through a writeAt seam that writes only part of
// the bytes and then SIGKILLs the process: a crash exactly in the middle of
// an append. EVENTLOG_TEST_MODE says what to append and where to cut.
func childDieMidAppend(path string) int {
	l, err := Open(path, Options{Sync: true, Logger: quietLogger()})
	if err != nil {
		fmt.Printf("error %v\n", err)
		return 1
	}
	mode := os.Getenv("EVENTLOG_TEST_MODE")
	writeAt = func(f *os.File, p []byte, off int64) (int, error) {
		cut := len(p) / 2
		if mode == "batch-line" {
			cut = bytes.IndexByte(p, '\n') + 1
		}
		f.WriteAt(p[:cut], off)
		testsupport.Die()
		return 0, nil
	}
	if mode == "append" {
		_, err = l.Append(context.Background(), "t", map[string]string{"pad": strings.Repeat("y", 100)})
	} else {
		_, err = l.AppendBatch(context.Background(), []Record{{Type: "a"}, {Type: "b"}, {Type: "c"}})
	}
	fmt.Printf("survived %v\n", err)
	return 1
}

func TestCrashMidAppend(t *testing.T) {
	tests := []struct {
		mode     string
		wantHead record.Seq // after recovery
		wantTorn bool       // a torn tail to cut
	}{
		{"append", 3, true},
		{"batch-half", 4, true}, // the first line of three is whole
		{"batch-line", 4, false},
	}
	for _, tt := range tests {
		t.Run(tt.mode, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "events.jsonl")
			l := openT(t, path, Options{})
			appendN(t, l, 3)
			l.Close()
			before, _ := os.ReadFile(path)

			c := startChild(t, "die-mid-append", path, 0, "EVENTLOG_TEST_MODE="+tt.mode)
			testsupport.WaitKilled(t, c.Cmd)
			for line := range c.Lines {
				t.Errorf("child printed %q, want it dead", line)
			}
			crashed, _ := os.ReadFile(path)
			if !bytes.HasPrefix(crashed, before) || len(crashed) == len(before) {
				t.Fatalf("got %d bytes after the crash, want the %d before plus part of a write", len(crashed), len(before))
			}
			rest := crashed[len(before):]
			good := len(before) + bytes.LastIndexByte(rest, '\n') + 1

			l2 := openT(t, path, Options{})
			if h := l2.Head(); h != tt.wantHead {
				t.Errorf("got head %d, want %d", h, tt.wantHead)
			}
			after, _ := os.ReadFile(path)
			if !bytes.Equal(after, crashed[:good]) {
				t.Errorf("got %d bytes after recovery, want %d", len(after), good)
			}
			torn := tornFiles(t, path)
			if tt.wantTorn {
				if len(torn) != 1 {
					t.Fatalf("got torn files %v, want one", torn)
				}
				if saved, _ := os.ReadFile(torn[0]); !bytes.Equal(saved, crashed[good:]) {
					t.Errorf("got saved tail %q, want %q", saved, crashed[good:])
				}
			} else if len(torn) != 0 {
				t.Errorf("got torn files %v, want none", torn)
			}
			ev, err := l2.Append(context.Background(), "next", nil)
			if err != nil || ev.Seq != tt.wantHead+1 {
				t.Errorf("next append: got %d, %v; want %d, nil", ev.Seq, err, tt.wantHead+1)
			}
		})
	}
}
