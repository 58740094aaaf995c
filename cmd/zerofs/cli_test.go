package main

import (
	"bytes"
	"context"
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/zerofs/zerofs/record"
	"github.com/zerofs/zerofs/rewind"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// result is one in-process run of the CLI.
type result struct {
	stdout, stderr string
	code           int
}

// zerofs runs the CLI in-process from cwd with stdin.
func zerofs(t *testing.T, cwd, stdin string, args ...string) result {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(args, strings.NewReader(stdin), &out, &errb, cwd)
	return result{out.String(), errb.String(), code}
}

// mustRun runs the CLI and fails the test unless it exits 0.
func mustRun(t *testing.T, cwd string, args ...string) string {
	t.Helper()
	r := zerofs(t, cwd, "", args...)
	if r.code != 0 {
		t.Fatalf("zerofs %s: exit %d, stderr %q", strings.Join(args, " "), r.code, r.stderr)
	}
	return r.stdout
}

// wantFail runs the CLI and checks its exit code and that stderr has the
// one-line reason (or the usage, for 2) containing want.
func wantFail(t *testing.T, cwd string, code int, want string, args ...string) result {
	t.Helper()
	r := zerofs(t, cwd, "", args...)
	if r.code != code {
		t.Fatalf("zerofs %s: exit %d, want %d (stdout %q, stderr %q)", strings.Join(args, " "), r.code, code, r.stdout, r.stderr)
	}
	if !strings.Contains(r.stderr, want) {
		t.Fatalf("zerofs %s: stderr %q, want it to contain %q", strings.Join(args, " "), r.stderr, want)
	}
	if code == 1 && (strings.Count(r.stderr, "\n") != 1 || !strings.HasPrefix(r.stderr, "zerofs: ")) {
		t.Fatalf("zerofs %s: stderr %q, want one line \"zerofs: ...\"", strings.Join(args, " "), r.stderr)
	}
	return r
}

// store is a workspace with a store built by driving the engine the way
// the FUSE layer does.
type store struct {
	t   *testing.T
	ws  string
	eng *rewind.Engine
	dir *os.File
}

// newStore makes a workspace with files in it and opens the engine on it.
func newStore(t *testing.T, files map[string]string) *store {
	t.Helper()
	ws := filepath.Join(t.TempDir(), "ws")
	if err := os.Mkdir(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	for p, content := range files {
		writeFile(t, filepath.Join(ws, p), content)
	}
	s := &store{t: t, ws: ws}
	s.open()
	t.Cleanup(s.close)
	return s
}

func writeFile(t *testing.T, p, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func (s *store) open() {
	s.t.Helper()
	dir, err := os.Open(s.ws)
	if err != nil {
		s.t.Fatal(err)
	}
	eng, err := rewind.Open(context.Background(), dir, rewind.Options{StoreDir: filepath.Join(s.ws, record.StoreName)})
	if err != nil {
		s.t.Fatal(err)
	}
	s.dir, s.eng = dir, eng
}

// close releases the store so the CLI can open it.
func (s *store) close() {
	if s.eng != nil {
		if err := s.eng.Close(); err != nil {
			s.t.Error(err)
		}
		s.dir.Close()
		s.eng = nil
	}
}

func (s *store) step(label string) record.Seq {
	s.t.Helper()
	ev, err := s.eng.BeginStep(context.Background(), label, nil)
	if err != nil {
		s.t.Fatal(err)
	}
	return ev.Seq
}

// change captures paths, then runs fn on the workspace, as the FUSE layer
// does for one operation.
func (s *store) change(fn func(ws string) error, paths ...string) {
	s.t.Helper()
	var cs []rewind.Change
	for _, p := range paths {
		cs = append(cs, rewind.Change{Path: p})
	}
	release, _, err := s.eng.Begin(context.Background(), rewind.Caller{PID: 4242, Comm: "test"}, cs...)
	if err != nil {
		s.t.Fatal(err)
	}
	defer release()
	if err := fn(s.ws); err != nil {
		s.t.Fatal(err)
	}
}

func (s *store) write(p, content string) {
	s.t.Helper()
	s.change(func(ws string) error {
		return os.WriteFile(filepath.Join(ws, p), []byte(content), 0o644)
	}, p)
}

// timeRE matches the local times `zerofs log` prints; byRE the process
// that made a change, which differs between the engine-driven history
// (test[4242]) and the mounted one (this test process).
var (
	timeRE = regexp.MustCompile(`\d{4}-\d\d-\d\d \d\d:\d\d:\d\d`)
	byRE   = regexp.MustCompile(`  by \S+\[\d+\]`)
)

// golden compares got with testdata/name, after replacing the times (the
// engine's clock is real), or rewrites the file with -update.
func golden(t *testing.T, name, got string) {
	t.Helper()
	got = timeRE.ReplaceAllString(got, "YYYY-MM-DD hh:mm:ss")
	got = byRE.ReplaceAllString(got, "  by COMM[PID]")
	p := filepath.Join("testdata", name)
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(p)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if got != string(want) {
		t.Errorf("%s differs (go test -update rewrites it):\ngot:\n%s\nwant:\n%s", p, got, want)
	}
}
