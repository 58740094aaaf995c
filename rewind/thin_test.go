package rewind

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	mrand "math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strconv"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/zerofs/zerofs/blobstore"
	"github.com/zerofs/zerofs/eventlog"
	"github.com/zerofs/zerofs/record"
	"github.com/zerofs/zerofs/rewind/internal/index"
)

// fakeClock stamps events at a time a test moves on.
type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time { return c.t }

// thinModel is what a history must keep after thins, independently of
// thin.go: every state from the start of history on, except those
// strictly after the start of history at a thin and before its
// ThinBefore that are not the first step of their UTC day.
type thinModel struct {
	pruned record.Seq
	// firsts holds the first step of each UTC day.
	firsts map[record.Seq]bool
	// thins are the (start of history, ThinBefore) of each thin asked for.
	thins [][2]record.Seq
}

func newThinModel(stepTimes map[record.Seq]time.Time) *thinModel {
	var steps []record.Seq
	for s := range stepTimes {
		steps = append(steps, s)
	}
	sort.Slice(steps, func(i, j int) bool { return steps[i] < steps[j] })
	m := &thinModel{firsts: map[record.Seq]bool{}}
	seen := map[string]bool{}
	for _, s := range steps {
		day := stepTimes[s].UTC().Format(time.DateOnly)
		if !seen[day] {
			seen[day] = true
			m.firsts[s] = true
		}
	}
	return m
}

// has reports whether the state at t must still exist.
func (m *thinModel) has(t record.Seq) bool {
	if t < m.pruned {
		return false
	}
	for _, th := range m.thins {
		if th[0] < t && t < th[1] && !m.firsts[t] {
			return false
		}
	}
	return true
}

// cut is a gc's cut at before: it moves on to the next state still there.
func (m *thinModel) cut(before, head record.Seq) {
	if before <= m.pruned {
		return
	}
	for before < head && !m.has(before) {
		before++
	}
	m.pruned = before
}

// indexRecords counts the index's records with seq > after.
func indexRecords(e *Engine, after record.Seq) int {
	n := 0
	e.index.Each(func(_ string, seqs []record.Seq, _ func(int) record.FileState) {
		for _, s := range seqs {
			if s > after {
				n++
			}
		}
	})
	return n
}

// thinnedEvents lists the history_thinned events of the log.
func thinnedEvents(t fataler, e *Engine) []record.ThinnedPayload {
	var out []record.ThinnedPayload
	for ev, err := range e.Log().Events(1) {
		if err != nil {
			t.Fatal(err)
		}
		if ev.Type == record.TypeHistoryThinned {
			var p record.ThinnedPayload
			if err := json.Unmarshal(ev.Payload, &p); err != nil {
				t.Fatal(err)
			}
			out = append(out, p)
		}
	}
	return out
}

// checkThinModel checks e against the model: every state the model keeps
// reads back byte for byte as recorded, every other one is gone (@T, a
// rewind, the lookups all refuse it with ErrNoSuchSeq), the thinned
// intervals are exactly the states gone since the cut, the blobs every
// surviving before-state names verify, and no blob is left that none
// names. A Retention folding the log alone agrees with the index.
func checkThinModel(rt *rapid.T, e *Engine, tm *thinModel, states map[record.Seq]tree, what string) {
	rt.Helper()
	if e.PrunedBefore() != tm.pruned {
		rt.Fatalf("%s: history starts at %d, want %d", what, e.PrunedBefore(), tm.pruned)
	}
	for s := record.Seq(0); s <= e.Head(); s++ {
		want := tm.has(s)
		if got := e.HasState(s); got != want {
			rt.Fatalf("%s: HasState(%d) = %v, want %v (thinned %v, start %d)", what, s, got, want, e.Thinned(), e.PrunedBefore())
		}
		if _, inside := index.ThinnedAt(e.Thinned(), s); s >= tm.pruned && inside == want {
			rt.Fatalf("%s: state %d: inside a thinned interval %v, want %v", what, s, inside, !want)
		}
		if want {
			if tr, ok := states[s]; ok {
				if d := diffTrees(indexTree(rt, e, s), tr); d != "" {
					rt.Fatalf("%s: @%d differs from the model:\n%s", what, s, d)
				}
			}
			continue
		}
		if _, err := e.StateAt("", s); !errors.Is(err, record.ErrNoSuchSeq) {
			rt.Fatalf("%s: StateAt(@%d) gone: got %v, want ErrNoSuchSeq", what, s, err)
		}
		if _, err := e.ReadDirAt("", s); !errors.Is(err, record.ErrNoSuchSeq) {
			rt.Fatalf("%s: ReadDirAt(@%d) gone: got %v, want ErrNoSuchSeq", what, s, err)
		}
		if _, ok := states[s]; ok {
			head := e.Head()
			if _, err := e.Rewind(context.Background(), s); !errors.Is(err, record.ErrNoSuchSeq) {
				rt.Fatalf("%s: Rewind(%d) to a state gone: got %v, want ErrNoSuchSeq", what, s, err)
			}
			if e.Head() != head {
				rt.Fatalf("%s: a refused Rewind(%d) appended to the log", what, s)
			}
		}
	}
	keep, err := e.blobsNamedAfter(e.PrunedBefore())
	if err != nil {
		rt.Fatal(err)
	}
	for id := range keep {
		if err := e.Blobs().Verify(id); err != nil {
			rt.Fatalf("%s: a blob a kept state needs: %v", what, err)
		}
	}
	if r, err := e.Blobs().Reclaimable(func(id blobstore.ID) bool { return keep[id] }); err != nil || len(r.Removed) != 0 {
		rt.Fatalf("%s: blobs no kept state needs are left: %v (%v)", what, r.Removed, err)
	}
	// The log alone, folded by a Retention, gives the same records.
	ret := NewRetention()
	for ev, err := range e.Log().Events(1) {
		if err != nil {
			rt.Fatal(err)
		}
		if err := ret.Add(ev); err != nil {
			rt.Fatal(err)
		}
	}
	if !reflect.DeepEqual(ret.Thinned(), e.Thinned()) || ret.Pruned() != e.PrunedBefore() {
		rt.Fatalf("%s: the log alone thins %v from %d, the index %v from %d", what, ret.Thinned(), ret.Pruned(), e.Thinned(), e.PrunedBefore())
	}
	var fromLog, fromIndex []string
	ret.Records(func(seq record.Seq, st record.FileState) {
		fromLog = append(fromLog, fmt.Sprint(seq, st.Path, st.Blob))
	})
	e.index.RecordsAfter(e.PrunedBefore(), func(seq record.Seq, st record.FileState) error {
		fromIndex = append(fromIndex, fmt.Sprint(seq, st.Path, st.Blob))
		return nil
	})
	sort.Strings(fromLog)
	sort.Strings(fromIndex)
	if !reflect.DeepEqual(fromLog, fromIndex) {
		rt.Fatalf("%s: the log alone keeps %d records, the index %d", what, len(fromLog), len(fromIndex))
	}
}

// TestThinModel runs random operations in steps spread over random days
// (a fake clock), then gcs that thin (some also cut) at random points, and
// checks each against the model: every state the model keeps (each kept
// day boundary, the start of history, everything from ThinBefore on) is
// byte for byte what was recorded, every state inside a thinned interval
// is gone, the history_thinned event counts exactly the steps and records
// that went, and all of it again after a reopen from the index snapshot
// and after a reopen that reads the log alone.
func TestThinModel(t *testing.T) {
	if f := flag.Lookup("rapid.checks"); f != nil && !flagSetByUser("rapid.checks") {
		old := f.Value.String()
		f.Value.Set("100")
		defer f.Value.Set(old)
	}
	var thinStats struct{ thins, steps, records, blobs int }
	defer func() {
		t.Logf("%d thins gave up the states of %d steps and %d before-states; gc removed %d blobs",
			thinStats.thins, thinStats.steps, thinStats.records, thinStats.blobs)
	}()
	rapid.Check(t, func(rt *rapid.T) {
		ctx := context.Background()
		clock := &fakeClock{t: time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(rapid.IntRange(0, 23).Draw(rt, "hour")) * time.Hour)}
		e, ws := openT(t, Options{Now: clock.now, RenameRecords: rapid.Bool().Draw(rt, "rename records")})
		m := &model{t: rt, e: e, ws: ws, states: map[record.Seq]tree{0: {}}}
		stepTimes := map[record.Seq]time.Time{}
		m.tick = func(rt *rapid.T) {
			// Mostly a few steps a day, now and then a day or more apart.
			clock.t = clock.t.Add(time.Duration(rapid.SampledFrom([]int{0, 1, 1, 2, 3, 5, 8, 24, 40}).Draw(rt, "hours")) * time.Hour)
			stepTimes[e.Head()+1] = clock.t
		}
		for range rapid.IntRange(10, 120).Draw(rt, "ops") {
			m.randomOp(rt)
		}
		m.step(rt)
		tm := newThinModel(stepTimes)
		var seqs []record.Seq
		for s := range m.states {
			seqs = append(seqs, s)
		}
		sort.Slice(seqs, func(i, j int) bool { return seqs[i] < seqs[j] })
		for round := range rapid.IntRange(1, 3).Draw(rt, "gcs") {
			head := e.Head()
			req := record.GCRequest{ThinBefore: head - record.Seq(rapid.IntRange(0, int(head)).Draw(rt, "thin before head"))}
			if rapid.IntRange(0, 3).Draw(rt, "cut too") == 0 {
				req.Before = record.Seq(rapid.IntRange(0, int(req.ThinBefore)).Draw(rt, "cut"))
			}
			tm.cut(req.Before, head)
			// The records and steps the model says this gc's thin gives up.
			goneBefore := map[record.Seq]bool{}
			for s := record.Seq(0); s <= head; s++ {
				goneBefore[s] = !tm.has(s)
			}
			recsAfterCut := indexRecords(e, tm.pruned)
			tm.thins = append(tm.thins, [2]record.Seq{tm.pruned, req.ThinBefore})
			steps := 0
			for s := range stepTimes {
				if s >= tm.pruned && !goneBefore[s] && !tm.has(s) {
					steps++
				}
			}
			res, err := e.GCWith(ctx, req)
			if err != nil {
				rt.Fatalf("gc %+v: %v", req, err)
			}
			what := fmt.Sprintf("gc %d %+v", round, req)
			if res.Before != tm.pruned {
				rt.Fatalf("%s: cut at %d, want %d", what, res.Before, tm.pruned)
			}
			recs := 0
			if tp := res.Thinned; tp != nil {
				recs = tp.Records
				if tp.Steps != steps {
					rt.Fatalf("%s: history_thinned says the states of %d steps went, want %d (%+v)", what, tp.Steps, steps, tp)
				}
				n, s := 0, 0
				for _, iv := range tp.Intervals {
					n += iv.Records
					s += iv.Steps
				}
				if n != tp.Records || s != tp.Steps {
					rt.Fatalf("%s: the intervals add up to %d records and %d steps, the event says %d and %d", what, n, s, tp.Records, tp.Steps)
				}
				if evs := thinnedEvents(rt, e); len(evs) == 0 || !reflect.DeepEqual(evs[len(evs)-1], *tp) {
					rt.Fatalf("%s: the log's last history_thinned is not what gc reported: %+v", what, tp)
				}
			} else if steps != 0 {
				rt.Fatalf("%s: nothing thinned, want the states of %d steps gone", what, steps)
			}
			if got := indexRecords(e, tm.pruned); got != recsAfterCut-recs {
				rt.Fatalf("%s: the index kept %d records of %d, the event says %d went", what, got, recsAfterCut, recs)
			}
			checkThinModel(rt, e, tm, m.states, what)
			if res.Thinned != nil {
				thinStats.thins++
				thinStats.steps += res.Thinned.Steps
				thinStats.records += res.Thinned.Records
			}
			thinStats.blobs += res.BlobsRemoved
		}
		// A rewind to a kept state gives its tree, and undoing it the
		// tree before (the plan reads the thinned index).
		var kept []record.Seq
		for _, s := range seqs {
			if tm.has(s) {
				kept = append(kept, s)
			}
		}
		final := diskTree(rt, ws)
		kept = append(kept, e.Head()) // (a cut may have left no recorded state)
		m.states[e.Head()] = final
		target := rapid.SampledFrom(kept).Draw(rt, "rewind to")
		if _, err := e.Rewind(ctx, target); err != nil {
			rt.Fatalf("Rewind(%d) to a kept state: %v", target, err)
		}
		if d := diffTrees(diskTree(rt, ws), m.states[target]); d != "" {
			rt.Fatalf("after Rewind(%d) to a kept state the workspace differs:\n%s", target, d)
		}
		if last, _, _ := e.LastRewind(); last.CheckpointSequence > 0 {
			if _, err := e.Rewind(ctx, last.CheckpointSequence-1); err != nil {
				rt.Fatalf("undo Rewind(%d): %v", target, err)
			}
		}
		if d := diffTrees(diskTree(rt, ws), final); d != "" {
			rt.Fatalf("undoing Rewind(%d) did not bring the tree back:\n%s", target, d)
		}
		e2 := reopen(t, e, ws)
		if !e2.log.Resumed() {
			rt.Fatalf("the reopened engine did not start from the index snapshot")
		}
		checkThinModel(rt, e2, tm, m.states, "after a reopen from the snapshot")
		e3 := rebuilt(t, e2)
		checkThinModel(rt, e3, tm, m.states, "after a reopen from the log alone")
		sameHistory(t, e2, e3)
	})
}

// buildDays makes a history of four days with three steps each (a fake
// clock), every step rewriting f0..f3 with new content. It returns the
// tree at every step boundary and the first step of the last day.
func buildDays(t *testing.T) (ws, store string, states map[record.Seq]tree, firsts map[record.Seq]bool, lastDay record.Seq) {
	t.Helper()
	ctx := context.Background()
	dir := t.TempDir()
	ws, store = filepath.Join(dir, "ws"), filepath.Join(dir, "store")
	os.Mkdir(ws, 0o755)
	clock := &fakeClock{t: time.Date(2026, 5, 4, 9, 0, 0, 0, time.UTC)}
	e := openAt(t, ws, Options{StoreDir: store, Sync: true, Now: clock.now})
	states, firsts = map[record.Seq]tree{}, map[record.Seq]bool{}
	for day := range 4 {
		for step := range 3 {
			clock.t = time.Date(2026, 5, 4+day, 9+3*step, 0, 0, 0, time.UTC)
			ev, err := e.BeginStep(ctx, fmt.Sprintf("day %d step %d", day, step), nil)
			if err != nil {
				t.Fatal(err)
			}
			states[ev.Seq] = diskTree(t, ws)
			if step == 0 {
				firsts[ev.Seq], lastDay = true, ev.Seq
			}
			for i := range 4 {
				p := "f" + strconv.Itoa(i)
				b := make([]byte, 3000)
				mrand.NewChaCha8([32]byte{byte(day), byte(step), byte(i)}).Read(b)
				change(t, e, func() error { return os.WriteFile(filepath.Join(ws, p), b, 0o644) }, Change{Path: p})
			}
		}
	}
	clock.t = clock.t.Add(time.Hour)
	ev, err := e.BeginStep(ctx, "last", nil)
	if err != nil {
		t.Fatal(err)
	}
	states[ev.Seq] = diskTree(t, ws)
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	return ws, store, states, firsts, lastDay
}

// TestThinCrash SIGKILLs a gc that thins at each point: before its event,
// after the event and before any blob goes, and while it removes blobs.
// After reopening, the log holds no history_thinned (and every state is
// there) or exactly the one an uninterrupted gc writes; every state that
// gc keeps (each day's first step, the start of history, everything from
// ThinBefore on) reads back byte for byte; the states it gave up are gone;
// and the next gc removes what the killed one left, thinning nothing more.
func TestThinCrash(t *testing.T) {
	for _, point := range []string{"thin:planned", "thin:appended", "gc:removing"} {
		t.Run(point, func(t *testing.T) {
			ctx := context.Background()
			ws, store, states, firsts, thinBefore := buildDays(t)
			// What an uninterrupted gc does, on a copy of the store.
			want := func() record.GCResult {
				copyStore := filepath.Join(t.TempDir(), "store")
				copyTree(t, store, copyStore)
				e := openAt(t, ws, Options{StoreDir: copyStore, Sync: true})
				defer e.Close()
				res, err := e.GCWith(ctx, record.GCRequest{ThinBefore: thinBefore})
				if err != nil {
					t.Fatal(err)
				}
				return res
			}()
			if want.Thinned == nil || want.Thinned.Steps != 6 || want.BlobsRemoved == 0 {
				t.Fatalf("an uninterrupted thin of 3 days of 3 steps: %+v, want the states of 6 steps and some blobs gone", want)
			}
			killedAt(t, "crash", point, "ZEROFS_TEST_WS="+ws, "ZEROFS_TEST_FORM=thin",
				"ZEROFS_TEST_STORE="+store, "ZEROFS_TEST_SEQ="+strconv.FormatUint(uint64(thinBefore), 10))
			root, _ := os.Open(ws)
			defer root.Close()
			e, err := Open(ctx, root, Options{StoreDir: store, Sync: true})
			if err != nil {
				t.Fatalf("reopen after a crash at %s: %v", point, err)
			}
			defer e.Close()
			evs := thinnedEvents(t, e)
			appended := point != "thin:planned"
			switch {
			case !appended && len(evs) != 0:
				t.Fatalf("a crash before the event left history_thinned %+v", evs)
			case appended && (len(evs) != 1 || !reflect.DeepEqual(evs[0], *want.Thinned)):
				t.Fatalf("after a crash at %s the log holds %+v, want exactly %+v", point, evs, *want.Thinned)
			}
			check := func(thinned bool) {
				t.Helper()
				for s, tr := range states {
					kept := !thinned || s >= thinBefore || s == 0 || firsts[s]
					if e.HasState(s) != kept {
						t.Fatalf("after a crash at %s: @%d there %v, want %v", point, s, e.HasState(s), kept)
					}
					if !kept {
						continue
					}
					if d := diffTrees(indexTree(t, e, s), tr); d != "" {
						t.Fatalf("after a crash at %s: @%d differs:\n%s", point, s, d)
					}
				}
			}
			check(appended)
			res, err := e.GCWith(ctx, record.GCRequest{ThinBefore: thinBefore})
			if err != nil {
				t.Fatal(err)
			}
			if appended && res.Thinned != nil {
				t.Fatalf("the gc after the crash thinned again: %+v", res.Thinned)
			}
			check(true)
			keep, err := e.blobsNamedAfter(0)
			if err != nil {
				t.Fatal(err)
			}
			if r, err := e.Blobs().Reclaimable(func(id blobstore.ID) bool { return keep[id] }); err != nil || len(r.Removed) != 0 {
				t.Fatalf("after the next gc, blobs no state needs are left: %v (%v)", r.Removed, err)
			}
		})
	}
}

// TestThinnedTampered: a history_thinned event zerofs never writes (an
// interval holding no state, one not before the event, intervals out of
// order) is damage: the mount refuses the store, naming the line.
func TestThinnedTampered(t *testing.T) {
	for _, tc := range []struct {
		name string
		ivs  []record.ThinInterval
	}{
		{"empty", []record.ThinInterval{{After: 1, Before: 2}}},
		{"backwards", []record.ThinInterval{{After: 3, Before: 1}}},
		{"after itself", []record.ThinInterval{{After: 0, Before: 99}}},
		{"out of order", []record.ThinInterval{{After: 2, Before: 5}, {After: 0, Before: 3}}},
		{"negative count", []record.ThinInterval{{After: 0, Before: 3, Steps: -1}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e, ws := openT(t, Options{})
			for i := range 3 {
				change(t, e, func() error { return os.WriteFile(filepath.Join(ws, "f"), []byte{byte(i)}, 0o644) }, Change{Path: "f"})
			}
			store := e.opts.StoreDir
			e.Close()
			log, err := eventlog.Open(filepath.Join(store, record.LogName), eventlog.Options{Sync: true})
			if err != nil {
				t.Fatal(err)
			}
			ev, err := log.Append(context.Background(), record.TypeHistoryThinned, record.ThinnedPayload{Intervals: tc.ivs})
			if err != nil {
				t.Fatal(err)
			}
			log.Close()
			os.Remove(filepath.Join(store, index.SnapshotName))
			root, _ := os.Open(ws)
			defer root.Close()
			_, err = Open(context.Background(), root, Options{StoreDir: store})
			var de *record.DamageError
			if !errors.As(err, &de) || de.Line != int(ev.Seq) || !errors.Is(err, record.ErrCorrupt) {
				t.Fatalf("open with a history_thinned %v at line %d: got %v, want damage at that line", tc.ivs, ev.Seq, err)
			}
		})
	}
}
