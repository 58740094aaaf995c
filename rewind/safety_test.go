package rewind

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/zerofs/zerofs/blobstore"
	"github.com/zerofs/zerofs/record"
)

// A symlink planted in the workspace behind the engine's back, pointing
// outside, must not lead a rewind to write or delete anything outside.
func TestRewindNeverFollowsPlantedSymlink(t *testing.T) {
	ctx := context.Background()
	e, ws := openT(t, Options{Sync: true})
	outside := t.TempDir()
	os.WriteFile(filepath.Join(outside, "x"), []byte("outside"), 0o644)
	change(t, e, func() error { return os.Mkdir(filepath.Join(ws, "d"), 0o755) }, Change{Path: "d"})
	change(t, e, func() error { return os.WriteFile(filepath.Join(ws, "d/x"), []byte("1"), 0o644) }, Change{Path: "d/x"})
	change(t, e, func() error { return os.WriteFile(filepath.Join(ws, "d/y"), []byte("y"), 0o644) }, Change{Path: "d/y"})
	s1, _ := e.BeginStep(ctx, "s1", nil)
	change(t, e, func() error { return os.WriteFile(filepath.Join(ws, "d/x"), []byte("2"), 0o644) }, Change{Path: "d/x"})
	change(t, e, func() error { return os.Remove(filepath.Join(ws, "d/y")) }, Change{Path: "d/y"})
	// Behind the engine's back: d becomes a symlink to the outside.
	os.RemoveAll(filepath.Join(ws, "d"))
	if err := os.Symlink(outside, filepath.Join(ws, "d")); err != nil {
		t.Fatal(err)
	}
	for _, target := range []record.Seq{s1.Seq, 0} {
		if _, err := e.Rewind(ctx, target); err != nil {
			t.Fatalf("Rewind(%d): %v", target, err)
		}
		ents, _ := os.ReadDir(outside)
		if len(ents) != 1 || ents[0].Name() != "x" {
			t.Fatalf("rewind to %d changed the outside directory: %v", target, ents)
		}
		if b, _ := os.ReadFile(filepath.Join(outside, "x")); string(b) != "outside" {
			t.Fatalf("rewind to %d wrote outside: x = %q", target, b)
		}
	}
	// The paths themselves refuse to cross the symlink.
	if ent, err := e.StateAt("d/x", e.Head()); err != nil || ent.Exists {
		t.Fatalf("d/x through a symlink: got %+v, %v; want it absent", ent, err)
	}
}

func TestCapturePathsAreConfined(t *testing.T) {
	e, _ := openT(t, Options{})
	for _, p := range []string{"../x", "/etc/passwd", "a/../../x", "a//b", ".zero", ".zero/events.jsonl", "@3", "a/"} {
		release, _, err := e.Begin(context.Background(), Caller{}, Change{Path: p})
		if err == nil {
			release()
			t.Errorf("Begin(%q): got nil error, want ErrUnsafePath or ErrReserved", p)
			continue
		}
		if !errors.Is(err, record.ErrUnsafePath) && !errors.Is(err, record.ErrReserved) {
			t.Errorf("Begin(%q): got %v, want ErrUnsafePath or ErrReserved", p, err)
		}
	}
	// "@3" is reserved only at the root.
	release, _, err := e.Begin(context.Background(), Caller{}, Change{Path: "sub/@3"})
	if err != nil {
		t.Fatalf("sub/@3: %v", err)
	}
	release()
}

// A damaged blob fails the rewind before anything changes.
func TestRewindRefusesDamagedBlob(t *testing.T) {
	ctx := context.Background()
	e, ws := openT(t, Options{Sync: true})
	a := filepath.Join(ws, "a")
	change(t, e, func() error { return os.WriteFile(a, []byte("precious"), 0o644) }, Change{Path: "a"})
	s, _ := e.BeginStep(ctx, "edit", nil)
	change(t, e, func() error { return os.WriteFile(a, []byte("changed"), 0o644) }, Change{Path: "a"})
	change(t, e, func() error { return os.WriteFile(filepath.Join(ws, "b"), []byte("b"), 0o644) }, Change{Path: "b"})
	ent, _ := e.StateAt("a", s.Seq)
	id, _ := blobstore.ParseID(ent.State.Blob)
	blob, off, _, err := e.Blobs().Locate(id)
	if err != nil {
		t.Fatal(err)
	}
	fl, err := os.OpenFile(blob, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	b := make([]byte, 1)
	fl.ReadAt(b, off)
	b[0] ^= 0xff
	if _, err := fl.WriteAt(b, off); err != nil {
		t.Fatal(err)
	}
	fl.Close()
	head := e.Head()
	_, err = e.Rewind(ctx, s.Seq)
	if !errors.Is(err, blobstore.ErrCorrupt) {
		t.Fatalf("Rewind over a damaged blob: got %v, want ErrCorrupt", err)
	}
	if got, _ := os.ReadFile(a); string(got) != "changed" {
		t.Fatalf("a = %q after a refused rewind, want it unchanged", got)
	}
	if _, err := os.Stat(filepath.Join(ws, "b")); err != nil {
		t.Fatalf("b removed by a refused rewind: %v", err)
	}
	if e.Head() != head {
		t.Fatalf("a refused rewind appended events: head %d, want %d", e.Head(), head)
	}
	// Reading the damaged state through a view fails too.
	if _, err := e.OpenContent(ent); !errors.Is(err, blobstore.ErrCorrupt) {
		t.Fatalf("OpenContent of a damaged blob: got %v, want ErrCorrupt", err)
	}
}

func TestRewindBadTargets(t *testing.T) {
	e, _ := openT(t, Options{})
	for _, s := range []record.Seq{e.Head() + 1, 1 << 40} {
		if _, err := e.Rewind(context.Background(), s); !errors.Is(err, record.ErrNoSuchSeq) {
			t.Errorf("Rewind(%d): got %v, want ErrNoSuchSeq", s, err)
		}
		if _, err := e.StateAt("a", s); !errors.Is(err, record.ErrNoSuchSeq) {
			t.Errorf("StateAt(%d): got %v, want ErrNoSuchSeq", s, err)
		}
	}
}

// Checkpoints name the process that caused them and the step's label; each
// path is captured once per step.
func TestCheckpointRecords(t *testing.T) {
	ctx := context.Background()
	e, ws := openT(t, Options{})
	e.BeginStep(ctx, "Bash", []byte(`{"input":{"command":"sed -i s/a/b/ f"}}`))
	f := filepath.Join(ws, "f")
	for range 3 {
		release, _, err := e.Begin(ctx, Caller{PID: 4242, Comm: "sed"}, Change{Path: "f"})
		if err != nil {
			t.Fatal(err)
		}
		os.WriteFile(f, []byte("x"), 0o640)
		release()
	}
	e.Sync()
	var cps []record.Checkpoint
	var calls []string
	for ev, err := range e.Log().Events(1) {
		if err != nil {
			t.Fatal(err)
		}
		switch ev.Type {
		case record.TypeCheckpoint:
			var cp record.Checkpoint
			if err := json.Unmarshal(ev.Payload, &cp); err != nil {
				t.Fatal(err)
			}
			cps = append(cps, cp)
		case record.TypeToolCall:
			calls = append(calls, string(ev.Payload))
		}
	}
	if len(calls) != 1 || !strings.Contains(calls[0], `"name":"Bash"`) || !strings.Contains(calls[0], `"command":"sed -i s/a/b/ f"`) {
		t.Fatalf("tool_call payloads: %v", calls)
	}
	if len(cps) != 1 || len(cps[0].Files) != 1 {
		t.Fatalf("got %d checkpoints %+v, want one naming f once", len(cps), cps)
	}
	got := cps[0]
	if got.Tool != "Bash" || got.Files[0].PID != 4242 || got.Files[0].Comm != "sed" || !got.Files[0].Absent || got.Files[0].Path != "f" {
		t.Fatalf("checkpoint: got %+v", got)
	}
}

func TestMaxBlobSizeRecordsSkipped(t *testing.T) {
	ctx := context.Background()
	e, ws := openT(t, Options{MaxBlobSize: 10})
	big := filepath.Join(ws, "big")
	os.WriteFile(big, []byte(strings.Repeat("x", 100)), 0o644)
	s, _ := e.BeginStep(ctx, "s", nil)
	change(t, e, func() error { return os.WriteFile(big, []byte("small"), 0o644) }, Change{Path: "big"})
	ent, err := e.StateAt("big", s.Seq)
	if err != nil || !ent.State.Skipped || !strings.Contains(ent.State.Reason, "cap") {
		t.Fatalf("big at %d: %+v %v; want skipped with a reason", s.Seq, ent, err)
	}
	res, err := e.Rewind(ctx, s.Seq)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Report.Skipped) != 1 || res.Report.Skipped[0] != "big" {
		t.Fatalf("report skipped: %v, want [big]", res.Report.Skipped)
	}
	if b, _ := os.ReadFile(big); string(b) != "small" {
		t.Fatalf("a skipped path was given invented content: %q", b)
	}
}

// TestAutoStep runs on a clock of its own (Options.Now): the idle gap is
// the clock's, never the machine's, so a loaded machine cannot split a step
// or fail to.
func TestAutoStep(t *testing.T) {
	var mu sync.Mutex
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
	e, ws := openT(t, Options{AutoStep: time.Minute, Now: clock})
	f := filepath.Join(ws, "f")
	change(t, e, func() error { return os.WriteFile(f, []byte("1"), 0o644) }, Change{Path: "f"})
	first := e.Step()
	advance(59 * time.Second)
	change(t, e, func() error { return os.WriteFile(f, []byte("2"), 0o644) }, Change{Path: "f"})
	if e.Step() != first {
		t.Fatalf("a change within the idle time of another began a new step")
	}
	advance(time.Minute + time.Second)
	change(t, e, func() error { return os.WriteFile(f, []byte("3"), 0o644) }, Change{Path: "f"})
	if s := e.Step(); s == first || s.Label != "auto" {
		t.Fatalf("after an idle gap: step %+v, want a new auto step", s)
	}
	if got, _ := readAt(t, e, "f", e.Step().Seq); got != "2" {
		t.Fatalf("f at the auto step's start: %q, want 2", got)
	}
}

// A rewind captures what it changes, not whole subtrees: undoing a chmod of
// a directory names that directory alone.
func TestRewindCapturesOnlyWhatItChanges(t *testing.T) {
	ctx := context.Background()
	e, ws := openT(t, Options{})
	d := filepath.Join(ws, "d")
	os.Mkdir(d, 0o755)
	for i := range 50 {
		os.WriteFile(filepath.Join(d, strconv.Itoa(i)), []byte("x"), 0o644)
	}
	s, _ := e.BeginStep(ctx, "chmod", nil)
	change(t, e, func() error { return os.Chmod(d, 0o700) }, Change{Path: "d"})
	res, err := e.Rewind(ctx, s.Seq)
	if err != nil {
		t.Fatal(err)
	}
	last, _, _ := e.LastRewind()
	var cp record.Checkpoint
	for ev, err := range e.Log().Events(last.CheckpointSequence) {
		if err != nil {
			t.Fatal(err)
		}
		json.Unmarshal(ev.Payload, &cp)
		break
	}
	if len(cp.Files) != 1 || cp.Files[0].Path != "d" || res.Report.Restored != 1 {
		t.Fatalf("rewind of a chmod captured %d paths (%+v), report %+v; want d alone", len(cp.Files), cp.Files, res.Report)
	}
	if fi, _ := os.Stat(d); fi.Mode().Perm() != 0o755 {
		t.Fatalf("d mode %v after rewind, want 0755", fi.Mode().Perm())
	}
}
