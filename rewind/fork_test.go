package rewind

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/zerofs/zerofs/eventlog"
	"github.com/zerofs/zerofs/record"
)

func TestFork(t *testing.T) {
	ctx := context.Background()
	e, ws := openT(t, Options{})
	steps, at := history3(t, e, ws)
	change(t, e, func() error { return os.Symlink("a.txt", filepath.Join(ws, "link")) }, Change{Path: "link"})
	change(t, e, func() error { return os.Chmod(filepath.Join(ws, "d"), 0o500) }, Change{Path: "d"})
	t.Cleanup(func() { os.Chmod(filepath.Join(ws, "d"), 0o755) })
	for _, tc := range []struct {
		seq  record.Seq
		want tree
	}{{steps[1], at[1]}, {steps[2], at[2]}, {e.Head(), diskTree(t, ws)}} {
		dir := filepath.Join(t.TempDir(), "fork")
		res, err := e.Fork(ctx, tc.seq, dir, ws)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.Chmod(filepath.Join(dir, "d"), 0o755) })
		if d := diffTrees(forkTree(t, dir), tc.want); d != "" {
			t.Fatalf("fork of @%d differs:\n%s", tc.seq, d)
		}
		if res.Sequence != tc.seq || res.Source != ws || res.Files+res.Dirs+res.Symlinks != len(tc.want) {
			t.Fatalf("fork result: %+v (want %d entries)", res, len(tc.want))
		}
		// The fork's store begins with where it came from, and opens.
		var first record.Event
		for ev, err := range eventlog.ReadFile(filepath.Join(dir, record.StoreName, "events.jsonl"), 1) {
			if err != nil {
				t.Fatal(err)
			}
			first = ev
			break
		}
		var p record.ForkPayload
		if err := json.Unmarshal(first.Payload, &p); err != nil || first.Type != record.TypeForked || first.Seq != 1 || p.Source != ws || p.Sequence != tc.seq {
			t.Fatalf("fork's first event: %+v %s (%v)", first, first.Payload, err)
		}
		if b, err := os.ReadFile(filepath.Join(dir, record.StoreName, ".gitignore")); err != nil || string(b) != "*\n" {
			t.Fatalf("fork's store .gitignore: %q, %v", b, err)
		}
		fe := openAt(t, dir, Options{StoreDir: filepath.Join(dir, record.StoreName)})
		if d := diffTrees(indexTree(t, fe, 1), tc.want); d != "" {
			t.Fatalf("the fork's @1 differs:\n%s", d)
		}
		fe.Close()
	}
	// A directory that exists, or one inside the workspace, is refused.
	if _, err := e.Fork(ctx, 0, t.TempDir(), ws); !errors.Is(err, ErrForkTarget) {
		t.Fatalf("fork into an existing directory: %v", err)
	}
	if _, err := e.Fork(ctx, 0, filepath.Join(ws, "inside"), ws); !errors.Is(err, ErrForkTarget) {
		t.Fatalf("fork into the workspace: %v", err)
	}
	if _, err := e.Fork(ctx, e.Head()+1, filepath.Join(t.TempDir(), "x"), ws); !errors.Is(err, record.ErrNoSuchSeq) {
		t.Fatalf("fork of a sequence above head: %v", err)
	}
}

// TestForkDirMatchesFork: a fork from a directory that shows a state
// (ForkDir, as from a mount's @T/) writes the tree a fork from the engine
// writes, with the same result and the same progress totals (both list
// then copy through copyForkTree). Here the directory is the workspace
// itself, at head.
func TestForkDirMatchesFork(t *testing.T) {
	ctx := context.Background()
	e, ws := openT(t, Options{})
	history3(t, e, ws)
	change(t, e, func() error { return os.Symlink("a.txt", filepath.Join(ws, "link")) }, Change{Path: "link"})
	change(t, e, func() error { return os.Chmod(filepath.Join(ws, "d"), 0o750) }, Change{Path: "d"})
	var fromEngine, fromDir recProgress
	a, b := filepath.Join(t.TempDir(), "fork"), filepath.Join(t.TempDir(), "fork")
	ra, err := e.Fork(WithProgress(ctx, &fromEngine), e.Head(), a, ws)
	if err != nil {
		t.Fatal(err)
	}
	rb, err := ForkDirIgnoring(WithProgress(ctx, &fromDir), ws, e.Head(), b, ws, nil)
	if err != nil {
		t.Fatal(err)
	}
	// The stores differ (the engine's fork names its session), the trees
	// must not.
	if d := diffTrees(forkTree(t, b), forkTree(t, a)); d != "" {
		t.Fatalf("ForkDir's tree differs from Fork's:\n%s", d)
	}
	ra.Dir, rb.Dir, ra.Cloned, rb.Cloned = "", "", 0, 0
	if !reflect.DeepEqual(ra, rb) {
		t.Errorf("results: Fork %+v, ForkDir %+v", ra, rb)
	}
	if !reflect.DeepEqual(fromEngine, fromDir) || fromEngine.items < 5 || fromEngine.doneN != fromEngine.items || fromEngine.doneBy != fromEngine.bytes {
		t.Errorf("progress: Fork %+v, ForkDir %+v; want the same totals, all done", fromEngine, fromDir)
	}
}
