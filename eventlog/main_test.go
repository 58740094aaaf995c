package eventlog

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/zerofs/zerofs/internal/testsupport"
	"github.com/zerofs/zerofs/record"
)

// Crash and lock tests run parts of themselves in a child process
// (testsupport.StartChild). The child reports on stdout, one line per fact.

// children are the functions a child process can run. Each gets the log path
// and returns the exit code.
var children = map[string]func(path string) int{}

func TestMain(m *testing.M) {
	testsupport.RunChild(children)
	os.Exit(m.Run())
}

// startChild runs children[name] on path in a new process, its stderr in
// the test's log.
func startChild(t *testing.T, name, path string, seed uint64, env ...string) *testsupport.Child {
	t.Helper()
	return testsupport.StartChild(t, name, path, testsupport.ChildOptions{
		Seed: seed, Env: env, Stderr: &testWriter{t: t, prefix: name + ": "}})
}

// testWriter sends a child's stderr to the test log.
type testWriter struct {
	t      *testing.T
	prefix string
	mu     sync.Mutex
}

func (w *testWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, l := range strings.Split(strings.TrimRight(string(p), "\n"), "\n") {
		w.t.Log(w.prefix + l)
	}
	return len(p), nil
}

// quietLogger drops log records; tests that check them use a recorder.
func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// openT opens the log at path for a test and closes it at the end.
func openT(t *testing.T, path string, opts Options) *Log {
	t.Helper()
	if opts.Logger == nil {
		opts.Logger = quietLogger()
	}
	l, err := Open(path, opts)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// appendN appends n events of type "test" with payload {"n":i}.
func appendN(t testing.TB, l *Log, n int) {
	t.Helper()
	for i := range n {
		if _, err := l.Append(context.Background(), "test", map[string]int{"n": i}); err != nil {
			t.Fatalf("append %d: %v", i, err)
		}
	}
}

// readAll reads the log at path from sequence from, failing on any error.
func readAll(t *testing.T, path string, from record.Seq) []record.Event {
	t.Helper()
	var evs []record.Event
	for ev, err := range ReadFile(path, from) {
		if err != nil {
			t.Fatalf("ReadFile: %v", err)
		}
		evs = append(evs, ev)
	}
	return evs
}

// seqs lists the sequences of evs.
func seqs(evs []record.Event) []record.Seq {
	s := make([]record.Seq, len(evs))
	for i, ev := range evs {
		s[i] = ev.Seq
	}
	return s
}

// checkSeqs checks that evs are exactly from, from+1, ..., to.
func checkSeqs(t *testing.T, evs []record.Event, from, to record.Seq) {
	t.Helper()
	if from > to {
		if len(evs) != 0 {
			t.Fatalf("got %d events (%v...), want none", len(evs), evs[0].Seq)
		}
		return
	}
	if got, want := len(evs), int(to-from+1); got != want {
		t.Fatalf("got %d events, want %d (%d..%d)", got, want, from, to)
	}
	for i, ev := range evs {
		if want := from + record.Seq(i); ev.Seq != want {
			t.Fatalf("event %d: got seq %d, want %d", i, ev.Seq, want)
		}
	}
}

// tornFiles lists the torn tails saved next to the log at path.
func tornFiles(t *testing.T, path string) []string {
	t.Helper()
	m, err := filepath.Glob(path + ".torn-*")
	if err != nil {
		t.Fatal(err)
	}
	return m
}
