package rewind

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/zerofs/zerofs/record"
	"github.com/zerofs/zerofs/rewind/internal/index"
)

// writeStep begins a step labelled label and writes content to p in it.
func writeStep(t *testing.T, e *Engine, ws, label, p, content string) record.Seq {
	t.Helper()
	ev, err := e.BeginStep(context.Background(), label, nil)
	if err != nil {
		t.Fatal(err)
	}
	change(t, e, func() error { return os.WriteFile(filepath.Join(ws, p), []byte(content), 0o644) }, Change{Path: p})
	return ev.Seq
}

// TestUndoInEngine: the engine resolves undo and redo itself, names what
// it acted on, records the form and the step in the session_rewind, and
// undo after a rewind takes the rewind back.
func TestUndoInEngine(t *testing.T) {
	ctx := context.Background()
	e, ws := openT(t, Options{})
	s1 := writeStep(t, e, ws, "one", "a", "1")
	s2 := writeStep(t, e, ws, "two", "a", "2")
	res, err := e.Apply(ctx, record.Request{Undo: true})
	if err != nil || res.Undid == nil || res.Undid.Sequence != s2 || res.Undid.Label != "two" || res.Record.Form != record.FormUndo {
		t.Fatalf("undo: %+v, %v", res, err)
	}
	if got := readFile(t, ws, "a"); got != "1" {
		t.Fatalf("after undo a = %q", got)
	}
	if last, _, _ := e.LastRewind(); last.Form != record.FormUndo || last.Step == nil || last.Step.Sequence != s2 {
		t.Fatalf("the session_rewind does not record the undo: %+v", last)
	}
	res, err = e.Apply(ctx, record.Request{Redo: true})
	if err != nil || res.Redid == nil || res.Redid.Sequence != s2 || res.Record.Form != record.FormRedo || readFile(t, ws, "a") != "2" {
		t.Fatalf("redo: %+v, %v", res, err)
	}
	// A rewind, then undo: the rewind is taken back, not the step before.
	if _, err := e.Apply(ctx, record.Request{Target: s1}); err != nil {
		t.Fatal(err)
	}
	if readFile(t, ws, "a") != "" {
		t.Fatal("rewind to before step one left a")
	}
	res, err = e.Apply(ctx, record.Request{Undo: true})
	if err != nil || res.Undid == nil || res.Undid.Kind != "rewind" || readFile(t, ws, "a") != "2" {
		t.Fatalf("undo after a rewind: %+v, %v; a = %q", res, err, readFile(t, ws, "a"))
	}
	// The next undo goes on with step two; redo brings the rewind's undo back.
	res, err = e.Apply(ctx, record.Request{Undo: true})
	if err != nil || res.Undid == nil || res.Undid.Sequence != s2 || readFile(t, ws, "a") != "1" {
		t.Fatalf("second undo: %+v, %v", res, err)
	}
	// The same after a reopen from the snapshot (marks and the redo stack
	// are saved, not rescanned).
	e = reopen(t, e, ws)
	if !e.log.Resumed() {
		t.Fatal("the reopen did not start from the snapshot")
	}
	res, err = e.Apply(ctx, record.Request{Redo: true})
	if err != nil || res.Redid == nil || res.Redid.Sequence != s2 || readFile(t, ws, "a") != "2" {
		t.Fatalf("redo after reopen: %+v, %v", res, err)
	}
}

func readFile(t *testing.T, ws, p string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(ws, p))
	if errors.Is(err, os.ErrNotExist) {
		return ""
	}
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestRefusals: every refusal of the engine is a *RefusedError (or a
// *ConflictError) naming its reason, with its details, and matching its
// sentinel.
func TestRefusals(t *testing.T) {
	ctx := context.Background()
	e, ws := openT(t, Options{})
	refused := func(what string, err error, want record.Refusal, sentinel error) *record.RefusedError {
		t.Helper()
		if record.RefusalOf(err) != want || !errors.Is(err, sentinel) {
			t.Fatalf("%s: got %v (%s), want %s", what, err, record.RefusalOf(err), want)
		}
		var re *record.RefusedError
		errors.As(err, &re)
		return re
	}
	_, err := e.Apply(ctx, record.Request{Undo: true})
	refused("undo of nothing", err, record.RefusedNothingToUndo, record.ErrNothingToUndo)
	_, err = e.Apply(ctx, record.Request{Redo: true})
	refused("redo of nothing", err, record.RefusedNothingToRedo, record.ErrNothingToRedo)
	s1 := writeStep(t, e, ws, "one", "a", "1")
	writeStep(t, e, ws, "two", "b", "2")
	re := refused("above head", func() error { _, err := e.Apply(ctx, record.Request{Target: 999}); return err }(), record.RefusedNoSuchSeq, record.ErrNoSuchSeq)
	if re.Seq != 999 || re.Head != e.Head() {
		t.Fatalf("no-such-seq details: %+v", re)
	}
	_, err = e.Apply(ctx, record.Request{Revert: 999})
	refused("revert above head", err, record.RefusedNoSuchSeq, record.ErrNoSuchSeq)
	_, err = e.Apply(ctx, record.Request{Undo: true, Target: 3})
	refused("two forms", err, record.RefusedBadRequest, record.ErrBadRequest)
	_, err = e.Apply(ctx, record.Request{Revert: s1, Paths: []string{"a"}})
	refused("revert with paths", err, record.RefusedBadRequest, record.ErrBadRequest)
	// A revert over a later change: a conflict.
	writeStep(t, e, ws, "three", "a", "3")
	_, err = e.Apply(ctx, record.Request{Revert: s1})
	var ce *record.ConflictError
	if record.RefusalOf(err) != record.RefusedConflict || !errors.As(err, &ce) || len(ce.Paths) != 1 {
		t.Fatalf("conflict: %v", err)
	}
	// Pruned: the state before step one is gone; undo of every step after.
	head := e.Head()
	if _, err := e.GC(ctx, s1+2); err != nil {
		t.Fatal(err)
	}
	re = refused("rewind below the cut", func() error { _, err := e.Apply(ctx, record.Request{Target: s1}); return err }(), record.RefusedPruned, record.ErrNoSuchSeq)
	if re.Seq != s1 || re.PrunedBefore != s1+2 {
		t.Fatalf("pruned details: %+v", re)
	}
	for range 2 {
		if _, err := e.Apply(ctx, record.Request{Undo: true}); err != nil {
			t.Fatal(err)
		}
	}
	_, err = e.Apply(ctx, record.Request{Undo: true})
	re = refused("undo of a pruned step", err, record.RefusedPruned, record.ErrNoSuchSeq)
	if re.Op != "undo" || re.Step == nil || re.Step.Sequence != s1 {
		t.Fatalf("undo pruned details: %+v (%v)", re, err)
	}
	_, err = e.GC(ctx, head+100)
	refused("gc above head", err, record.RefusedNoSuchSeq, record.ErrNoSuchSeq)
}

// arriving makes steps arrive until the returned stop is called (it waits
// for the last): begin(i) begins the i-th (a step, or a turn and its step)
// and returns the sequence that names it; the step then writes a file of
// its own, f<that sequence>.
func arriving(t *testing.T, e *Engine, ws string, begin func(i int) (record.Seq, error)) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for i := 0; ; i++ {
			select {
			case <-done:
				return
			default:
			}
			seq, err := begin(i)
			if err != nil {
				t.Error(err)
				return
			}
			p := fmt.Sprintf("f%d", seq)
			release, _, err := e.Begin(context.Background(), Caller{}, Change{Path: p})
			if err != nil {
				t.Error(err)
				return
			}
			err = os.WriteFile(filepath.Join(ws, p), []byte("x"), 0o644)
			release()
			if err != nil {
				t.Error(err)
				return
			}
		}
	})
	var once sync.Once
	return func() { once.Do(func() { close(done); wg.Wait() }) }
}

// TestUndoWhileStepsArrive: an undo (and its dry run) chooses its step
// and plans it under the workspace lock, so while other steps arrive the
// step it names, the paths its preview lists and the paths it changes are
// always the same step's: each step writes a file of its own (a write that
// lands after an undo ended its step belongs to the implicit step after
// the undo, which undo takes back like any step).
func TestUndoWhileStepsArrive(t *testing.T) {
	ctx := context.Background()
	e, ws := openT(t, Options{})
	stop := arriving(t, e, ws, func(i int) (record.Seq, error) {
		ev, err := e.BeginStep(ctx, fmt.Sprintf("s%d", i), nil)
		return ev.Seq, err
	})
	undos := 0
	for undos < 20 {
		dry := undos%2 == 0
		res, err := e.Apply(ctx, record.Request{Undo: true, DryRun: dry})
		if errors.Is(err, record.ErrNothingToUndo) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		want := firstCaptured(t, e, res.Undid.Sequence)
		var got []string
		if dry {
			for _, c := range res.Preview {
				got = append(got, c.Path)
			}
		} else {
			got = res.Changed
		}
		if len(got) != 1 || got[0] != want {
			stop()
			for ev, err := range e.Log().Events(1) {
				if err == nil {
					t.Logf("%d %s %s", ev.Seq, ev.Type, ev.Payload)
				}
			}
			t.Logf("result %+v", res.Record)
			t.Fatalf("undo (dry %v) names step %d (%s) but acts on %v", dry, res.Undid.Sequence, want, got)
		}
		undos++
	}
	stop()
	// With nothing arriving, the dry run and the undo choose the same step.
	dry, err := e.Apply(ctx, record.Request{Undo: true, DryRun: true})
	if err != nil {
		t.Fatal(err)
	}
	real, err := e.Apply(ctx, record.Request{Undo: true})
	if err != nil || *real.Undid != *dry.Undid || real.Record.TargetSequence != dry.Record.TargetSequence {
		t.Fatalf("dry run chose %+v, the undo %+v (%v)", dry.Undid, real.Undid, err)
	}
}

// firstCaptured is the path captured by the first checkpoint at or after
// seq: the file the step at seq (or the implicit step beginning with the
// checkpoint at seq) wrote.
func firstCaptured(t *testing.T, e *Engine, seq record.Seq) string {
	t.Helper()
	for ev, err := range e.Log().Events(seq) {
		if err != nil {
			t.Fatal(err)
		}
		if ev.Type != record.TypeCheckpoint {
			continue
		}
		var cp record.Checkpoint
		if err := json.Unmarshal(ev.Payload, &cp); err != nil || len(cp.Files) == 0 {
			t.Fatalf("checkpoint %d: %v", ev.Seq, err)
		}
		return cp.Files[0].Path
	}
	t.Fatalf("no checkpoint after %d", seq)
	return ""
}

// BenchmarkUndo is `zerofs undo` at 1k, 100k and 1M events of history: a
// dry run (choose, plan, preview) and a real undo then redo of the newest
// step. The engine chooses from its marks, never reading the log, so the
// cost should not grow with the history.
func BenchmarkUndo(b *testing.B) {
	ctx := context.Background()
	for _, n := range []int{1_000, 100_000, 1_000_000} {
		ws, store := b.TempDir(), b.TempDir()
		writeSyntheticLog(b, store, n, 10_000)
		root, err := os.Open(ws)
		if err != nil {
			b.Fatal(err)
		}
		e, err := Open(ctx, root, Options{StoreDir: store})
		if err != nil {
			b.Fatal(err)
		}
		if _, err := e.BeginStep(ctx, "Edit a.go", nil); err != nil {
			b.Fatal(err)
		}
		release, _, err := e.Begin(ctx, Caller{}, Change{Path: "a.go"})
		if err != nil {
			b.Fatal(err)
		}
		os.WriteFile(filepath.Join(ws, "a.go"), []byte("package a\n"), 0o644)
		release()
		b.Run(fmt.Sprintf("events=%d/dry-run", n), func(b *testing.B) {
			for b.Loop() {
				if _, err := e.Apply(ctx, record.Request{Undo: true, DryRun: true}); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(fmt.Sprintf("events=%d/undo+redo", n), func(b *testing.B) {
			for b.Loop() {
				if _, err := e.Apply(ctx, record.Request{Undo: true}); err != nil {
					b.Fatal(err)
				}
				if _, err := e.Apply(ctx, record.Request{Redo: true}); err != nil {
					b.Fatal(err)
				}
			}
		})
		e.Close()
		root.Close()
	}
}

// TestUndoTurnWhileStepsArrive: an undo of a whole turn ({"undo": true,
// "turn": true}) chooses its turn under the lock it rewinds under, so while
// other turns and steps arrive, each real one takes back the turn of the
// step an undo would have taken back just before its own events (the fold
// of the log up to there says which), and each dry run names the turn of
// some instant during its call. A dry run followed by a second request for
// the turn it named (what the CLI did) fails this when a turn arrives
// between them. Once nothing arrives, the dry run and the real undo choose
// the same turn.
func TestUndoTurnWhileStepsArrive(t *testing.T) {
	ctx := context.Background()
	e, ws := openT(t, Options{})
	stop := arriving(t, e, ws, func(i int) (record.Seq, error) {
		turn, err := e.BeginTurn(ctx, json.RawMessage(`{"prompt":"p","agentSession":"a"}`))
		if err == nil {
			_, err = e.BeginStep(ctx, fmt.Sprintf("s%d", i), json.RawMessage(`{"agentSession":"a"}`))
		}
		return turn.Seq, err
	})
	type dryRun struct{ from, to, turn record.Seq }
	var drys []dryRun
	for undos := 0; undos < 20; {
		dry := undos%2 == 0
		from := e.Head()
		res, err := e.Apply(ctx, record.Request{Undo: true, WholeTurn: true, DryRun: dry})
		if errors.Is(err, record.ErrNothingToUndo) || errors.Is(err, record.ErrNoTurn) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		x := res.Undid.Sequence
		if res.Undid.Kind != "turn" || res.Record.Form != record.FormTurn || res.Record.TargetSequence != x-1 {
			t.Fatalf("undo of a turn: %+v, record %+v", res.Undid, res.Record)
		}
		if dry {
			drys = append(drys, dryRun{from, e.Head(), x})
		}
		undos++
	}
	stop()
	if t.Failed() {
		return
	}
	// The oracle: the turn an undo of a whole turn takes back after the
	// events up to h, from a fold of the log's first h events.
	var evs []record.Event
	for ev, err := range e.Log().Events(1) {
		if err != nil {
			t.Fatal(err)
		}
		evs = append(evs, ev)
	}
	turnAfter := func(h record.Seq) record.Seq {
		st := index.NewState()
		for _, ev := range evs[:h] {
			if err := st.Add(ev); err != nil {
				t.Fatal(err)
			}
		}
		if _, w, ok := st.UndoTarget(); ok && w.Kind == "step" {
			if turn, ok := st.TurnOf(w); ok {
				return turn.Seq
			}
		}
		return 0
	}
	reals := 0
	for _, ev := range evs {
		var p record.RewindPayload
		if ev.Type != record.TypeRewind || json.Unmarshal(ev.Payload, &p) != nil {
			continue
		}
		before := ev.Seq - 1 // the rewind's own events begin after it
		if p.CheckpointSequence != 0 {
			before = p.CheckpointSequence - 1
		}
		if want := turnAfter(before); p.Step == nil || p.Step.Sequence != want {
			t.Errorf("the undo at %d took back turn %v; just before it, the step in effect was in turn %d", ev.Seq, p.Step, want)
		}
		reals++
	}
	for _, d := range drys {
		ok := false
		for h := d.from; h <= d.to && !ok; h++ {
			ok = turnAfter(h) == d.turn
		}
		if !ok {
			t.Errorf("a dry run between %d and %d named turn %d, the turn of no instant between", d.from, d.to, d.turn)
		}
	}
	if reals != 10 || len(drys) != 10 {
		t.Errorf("%d real undos and %d dry runs checked, want 10 each", reals, len(drys))
	}
	// With nothing arriving, the dry run and the undo choose the same turn.
	dry, err := e.Apply(ctx, record.Request{Undo: true, WholeTurn: true, DryRun: true})
	if err != nil {
		t.Fatal(err)
	}
	real, err := e.Apply(ctx, record.Request{Undo: true, WholeTurn: true})
	if err != nil || *real.Undid != *dry.Undid || real.Record.TargetSequence != dry.Record.TargetSequence {
		t.Fatalf("dry run chose %+v, the undo %+v (%v)", dry.Undid, real.Undid, err)
	}
}

// TestUndoTurnRefusals: an undo of a whole turn refuses, typed, when the
// step it would take back came before any turn, or the action in effect is
// a rewind; a step of a session that began no turn belongs to the last
// turn, and one of a session that did, to that session's.
func TestUndoTurnRefusals(t *testing.T) {
	ctx := context.Background()
	e, ws := openT(t, Options{})
	if _, err := e.Apply(ctx, record.Request{Undo: true, WholeTurn: true}); record.RefusalOf(err) != record.RefusedNothingToUndo {
		t.Fatalf("empty history: %v", err)
	}
	s1 := writeStep(t, e, ws, "one", "a", "1")
	_, err := e.Apply(ctx, record.Request{Undo: true, WholeTurn: true})
	var re *record.RefusedError
	if !errors.As(err, &re) || re.Refusal != record.RefusedNoTurn || !errors.Is(err, record.ErrNoTurn) || re.Step == nil || re.Step.Sequence != s1 {
		t.Fatalf("a step before any turn: %v (%+v)", err, re)
	}
	turnA, _ := e.BeginTurn(ctx, json.RawMessage(`{"agentSession":"A"}`))
	if _, err := e.BeginTurn(ctx, json.RawMessage(`{"agentSession":"B"}`)); err != nil {
		t.Fatal(err)
	}
	if _, err := e.BeginStep(ctx, "A's edit", json.RawMessage(`{"agentSession":"A"}`)); err != nil {
		t.Fatal(err)
	}
	change(t, e, func() error { return os.WriteFile(filepath.Join(ws, "b"), []byte("A"), 0o644) }, Change{Path: "b"})
	res, err := e.Apply(ctx, record.Request{Undo: true, WholeTurn: true, DryRun: true})
	if err != nil || res.Undid == nil || res.Undid.Sequence != turnA.Seq {
		t.Fatalf("A's step after B's turn: took back %+v (%v), want A's turn %d", res.Undid, err, turnA.Seq)
	}
	if _, err := e.Apply(ctx, record.Request{Target: s1}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Apply(ctx, record.Request{Undo: true, WholeTurn: true}); record.RefusalOf(err) != record.RefusedNoTurn {
		t.Fatalf("a rewind in effect: %v", err)
	}
}
