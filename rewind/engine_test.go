package rewind

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/zerofs/zerofs/record"
)

// openT opens an engine on a fresh workspace with the store outside it.
func openT(t *testing.T, opts Options) (*Engine, string) {
	t.Helper()
	ws := filepath.Join(t.TempDir(), "ws")
	if err := os.Mkdir(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	if opts.StoreDir == "" {
		opts.StoreDir = filepath.Join(filepath.Dir(ws), "store")
	}
	return openAt(t, ws, opts), ws
}

// openAt opens an engine on the existing workspace ws. The test's cleanup
// closes it and its root (Close may come first: it is idempotent).
func openAt(t testing.TB, ws string, opts Options) *Engine {
	t.Helper()
	root, err := os.Open(ws)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { root.Close() })
	e, err := Open(context.Background(), root, opts)
	if err != nil {
		t.Fatalf("open the engine on %s: %v", ws, err)
	}
	t.Cleanup(func() { e.Close() })
	return e
}

// openRefused opens an engine on ws that must be refused, and returns why;
// one that opens fails the test (what says what was refused).
func openRefused(t testing.TB, what, ws string, opts Options) error {
	t.Helper()
	root, err := os.Open(ws)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	e, err := Open(context.Background(), root, opts)
	if err == nil {
		e.Close()
		t.Fatalf("%s: opened, want it refused", what)
	}
	return err
}

// change runs fn on the workspace after capturing changes, as the FUSE
// layer does.
func change(t *testing.T, e *Engine, fn func() error, changes ...Change) {
	t.Helper()
	release, _, err := e.Begin(context.Background(), Caller{PID: os.Getpid(), Comm: "test"}, changes...)
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	if err := fn(); err != nil {
		t.Fatal(err)
	}
}

func readAt(t *testing.T, e *Engine, p string, seq record.Seq) (string, bool) {
	t.Helper()
	ent, err := e.StateAt(p, seq)
	if err != nil {
		t.Fatal(err)
	}
	if !ent.Exists {
		return "", false
	}
	f, err := e.OpenContent(ent)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b, err := io.ReadAll(f)
	if err != nil {
		t.Fatal(err)
	}
	return string(b), true
}

func TestCaptureAndRewindBasics(t *testing.T) {
	ctx := context.Background()
	for _, sync := range []bool{true, false} {
		e, ws := openT(t, Options{Sync: sync})
		a := filepath.Join(ws, "a.txt")
		change(t, e, func() error { return os.WriteFile(a, []byte("one"), 0o644) }, Change{Path: "a.txt"})
		s1, err := e.BeginStep(ctx, "edit", nil)
		if err != nil {
			t.Fatal(err)
		}
		change(t, e, func() error { return os.WriteFile(a, []byte("two"), 0o644) }, Change{Path: "a.txt"})
		change(t, e, func() error { return os.Mkdir(filepath.Join(ws, "d"), 0o755) }, Change{Path: "d"})
		change(t, e, func() error { return os.WriteFile(filepath.Join(ws, "d/x"), []byte("x"), 0o600) }, Change{Path: "d/x"})
		if got, ok := readAt(t, e, "a.txt", s1.Seq); !ok || got != "one" {
			t.Fatalf("a.txt at %d: got %q %v, want one", s1.Seq, got, ok)
		}
		if _, ok := readAt(t, e, "a.txt", 0); ok {
			t.Fatalf("a.txt at 0 exists, want absent")
		}
		if got, _ := readAt(t, e, "a.txt", e.Head()); got != "two" {
			t.Fatalf("a.txt now: got %q", got)
		}
		ents, err := e.ReadDirAt("", s1.Seq)
		if err != nil || len(ents) != 1 || ents[0].Name != "a.txt" {
			t.Fatalf("readdir at %d: %+v %v", s1.Seq, ents, err)
		}
		res, err := e.Rewind(ctx, s1.Seq)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := os.ReadFile(a)
		if string(b) != "one" {
			t.Fatalf("after rewind a.txt = %q", b)
		}
		if _, err := os.Stat(filepath.Join(ws, "d")); !os.IsNotExist(err) {
			t.Fatalf("d still exists after rewind: %v", err)
		}
		// Deleted counts d and d/x: everything the rewind removed.
		if res.Report.Restored != 1 || res.Report.Deleted != 2 {
			t.Fatalf("report %+v, want restored 1, deleted 2 (d and d/x)", res.Report)
		}
		last, _, _ := e.LastRewind()
		if _, err := e.Rewind(ctx, last.CheckpointSequence-1); err != nil {
			t.Fatal(err)
		}
		b, _ = os.ReadFile(filepath.Join(ws, "d/x"))
		if string(b) != "x" {
			t.Fatalf("after undoing the rewind d/x = %q", b)
		}
	}
}
