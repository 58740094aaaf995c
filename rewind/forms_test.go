package rewind

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/zerofs/zerofs/record"
)

// history3 builds three steps: step 1 writes a.txt and d/x, step 2 edits
// a.txt and writes b.txt, step 3 writes c.txt and d/y. It returns the
// step sequences and the trees at each step's start.
func history3(t *testing.T, e *Engine, ws string) (steps [3]record.Seq, at [4]tree) {
	t.Helper()
	ctx := context.Background()
	w := func(p, content string) {
		change(t, e, func() error { return os.WriteFile(filepath.Join(ws, p), []byte(content), 0o644) }, Change{Path: p})
	}
	for i := range 3 {
		ev, err := e.BeginStep(ctx, "step"+string(rune('1'+i)), nil)
		if err != nil {
			t.Fatal(err)
		}
		steps[i], at[i] = ev.Seq, diskTree(t, ws)
		switch i {
		case 0:
			w("a.txt", "one\ntwo\nthree\n")
			change(t, e, func() error { return os.Mkdir(filepath.Join(ws, "d"), 0o755) }, Change{Path: "d"})
			w("d/x", "x\n")
		case 1:
			w("a.txt", "one\n2\nthree\nfour\n")
			w("b.txt", "b\n")
		case 2:
			w("c.txt", "c\n")
			w("d/y", "y\n")
		}
	}
	at[3] = diskTree(t, ws)
	return steps, at
}

// without returns tr with p and everything under it removed.
func (tr tree) without(p string) tree {
	out := tree{}
	for q, n := range tr {
		if q != p && !strings.HasPrefix(q, p+"/") {
			out[q] = n
		}
	}
	return out
}

func TestRevertKeepsLaterChanges(t *testing.T) {
	ctx := context.Background()
	e, ws := openT(t, Options{})
	steps, at := history3(t, e, ws)
	res, err := e.Apply(ctx, record.Request{Revert: steps[1]})
	if err != nil {
		t.Fatal(err)
	}
	want := at[3].without("b.txt")
	want["a.txt"] = at[1]["a.txt"]
	if d := diffTrees(diskTree(t, ws), want); d != "" {
		t.Fatalf("after reverting step %d:\n%s", steps[1], d)
	}
	if res.Report.Restored != 1 || res.Report.Deleted != 1 {
		t.Fatalf("report: got %+v, want restored 1, deleted 1", res.Report)
	}
	last, _, _ := e.LastRewind()
	if last.RevertOf != steps[1] || last.TargetSequence != steps[1] || last.CheckpointSequence == 0 {
		t.Fatalf("session_rewind payload: got %+v, want revertOf %d, targetSequence %d", last, steps[1], steps[1])
	}
	// Undoable like any rewind.
	if _, err := e.Rewind(ctx, last.CheckpointSequence-1); err != nil {
		t.Fatal(err)
	}
	if d := diffTrees(diskTree(t, ws), at[3]); d != "" {
		t.Fatalf("undoing the revert:\n%s", d)
	}
}

func TestRevertConflict(t *testing.T) {
	ctx := context.Background()
	e, ws := openT(t, Options{})
	steps, at := history3(t, e, ws)
	// Step 1 made a.txt and d/ (d/x); step 2 changed a.txt, step 3 added d/y.
	head := e.Head()
	_, err := e.Apply(ctx, record.Request{Revert: steps[0]})
	var ce *record.ConflictError
	if !errors.As(err, &ce) || !errors.Is(err, record.ErrConflict) {
		t.Fatalf("revert of step 1: got %v, want a *ConflictError", err)
	}
	if want := []string{"a.txt", "d/y"}; !reflect.DeepEqual(ce.Paths, want) {
		t.Fatalf("conflicting paths: got %v, want %v", ce.Paths, want)
	}
	if d := diffTrees(diskTree(t, ws), at[3]); d != "" || e.Head() != head {
		t.Fatalf("a refused revert changed something (head %d, was %d):\n%s", e.Head(), head, d)
	}
	// A dry run says the same and changes nothing.
	res, err := e.Apply(ctx, record.Request{Revert: steps[0], DryRun: true})
	if !errors.As(err, &ce) || !res.DryRun || !reflect.DeepEqual(res.Conflicts, []string{"a.txt", "d/y"}) {
		t.Fatalf("dry run of a conflicting revert: got %+v, %v", res, err)
	}
	if e.Head() != head {
		t.Fatal("a dry run appended events")
	}
	// Forced: those go back too.
	res, err = e.Apply(ctx, record.Request{Revert: steps[0], Force: true})
	if err != nil {
		t.Fatal(err)
	}
	want := at[3].without("a.txt").without("d")
	if d := diffTrees(diskTree(t, ws), want); d != "" {
		t.Fatalf("after a forced revert:\n%s", d)
	}
	if last, _, _ := e.LastRewind(); !last.Force || last.RevertOf != steps[0] {
		t.Fatalf("payload of a forced revert: %+v", last)
	}
	_ = res
}

// An unstepped change (in the current step, after the reverted one) is a
// conflict too.
func TestRevertConflictCurrentStep(t *testing.T) {
	ctx := context.Background()
	e, ws := openT(t, Options{})
	steps, _ := history3(t, e, ws)
	change(t, e, func() error { return os.WriteFile(filepath.Join(ws, "b.txt"), []byte("edited"), 0o644) }, Change{Path: "b.txt"})
	_, err := e.Apply(ctx, record.Request{Revert: steps[1]})
	var ce *record.ConflictError
	if !errors.As(err, &ce) || !reflect.DeepEqual(ce.Paths, []string{"b.txt"}) {
		t.Fatalf("got %v, want a conflict on b.txt", err)
	}
}

func TestRewindPaths(t *testing.T) {
	ctx := context.Background()
	e, ws := openT(t, Options{})
	steps, at := history3(t, e, ws)
	res, err := e.Apply(ctx, record.Request{Target: steps[1], Paths: []string{"a.txt", "d"}})
	if err != nil {
		t.Fatal(err)
	}
	want := at[3].without("d")
	want["a.txt"] = at[1]["a.txt"]
	for p, n := range at[1] {
		if p == "d" || strings.HasPrefix(p, "d/") {
			want[p] = n
		}
	}
	if d := diffTrees(diskTree(t, ws), want); d != "" {
		t.Fatalf("after rewinding a.txt and d to %d:\n%s", steps[1], d)
	}
	if res.Report.Restored != 1 || res.Report.Deleted != 1 {
		t.Fatalf("report: %+v, want restored 1 (a.txt), deleted 1 (d/y)", res.Report)
	}
	last, _, _ := e.LastRewind()
	if !reflect.DeepEqual(last.Paths, []string{"a.txt", "d"}) || last.TargetSequence != steps[1] {
		t.Fatalf("payload: %+v", last)
	}
	// A path that did not exist then, under a directory that does not
	// exist now: its directory comes back too.
	if _, err := e.Apply(ctx, record.Request{Target: 0, Paths: []string{"d"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Apply(ctx, record.Request{Target: steps[2], Paths: []string{"d/x"}}); err != nil {
		t.Fatal(err)
	}
	got := diskTree(t, ws)
	if got["d"] != at[2]["d"] || got["d/x"] != at[2]["d/x"] {
		t.Fatalf("d/x rewound into a missing d: got d=%+v d/x=%+v", got["d"], got["d/x"])
	}
	for _, bad := range []string{"/a", "a/../b", ".zero/x", "@3"} {
		if _, err := e.Apply(ctx, record.Request{Target: 0, Paths: []string{bad}}); err == nil {
			t.Errorf("path %q: accepted", bad)
		}
	}
}

func TestDryRun(t *testing.T) {
	ctx := context.Background()
	e, ws := openT(t, Options{})
	steps, at := history3(t, e, ws)
	head := e.Head()
	res, err := e.Apply(ctx, record.Request{Target: steps[1], DryRun: true})
	if err != nil {
		t.Fatal(err)
	}
	if e.Head() != head {
		t.Fatal("a dry run appended events")
	}
	if d := diffTrees(diskTree(t, ws), at[3]); d != "" {
		t.Fatalf("a dry run changed the workspace:\n%s", d)
	}
	want := []record.PathChange{
		{Path: "a.txt", Action: record.ActionRestore, Kind: record.KindFile, Lines: &record.LineCount{Added: 1, Removed: 2}},
		{Path: "b.txt", Action: record.ActionDelete, Kind: record.KindFile, Lines: &record.LineCount{Removed: 1}},
		{Path: "c.txt", Action: record.ActionDelete, Kind: record.KindFile, Lines: &record.LineCount{Removed: 1}},
		{Path: "d/y", Action: record.ActionDelete, Kind: record.KindFile, Lines: &record.LineCount{Removed: 1}},
	}
	if !reflect.DeepEqual(res.Preview, want) {
		g, _ := json.Marshal(res.Preview)
		w, _ := json.Marshal(want)
		t.Fatalf("preview:\ngot  %s\nwant %s", g, w)
	}
	real, err := e.Apply(ctx, record.Request{Target: steps[1]})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(real.Report, res.Report) {
		t.Fatalf("the dry run reported %+v, the rewind %+v", res.Report, real.Report)
	}
	// A removed directory lists what is under it; a created one is shown.
	res, err = e.Apply(ctx, record.Request{Target: 0, DryRun: true})
	if err != nil {
		t.Fatal(err)
	}
	var paths []string
	for _, c := range res.Preview {
		paths = append(paths, c.Action+" "+c.Path)
	}
	if w := []string{"delete a.txt", "delete d", "delete d/x"}; !reflect.DeepEqual(paths, w) {
		t.Fatalf("preview of a rewind to 0: got %v, want %v", paths, w)
	}
}

func TestLineDelta(t *testing.T) {
	for _, tc := range []struct {
		a, b           string
		added, removed int
	}{
		{"", "", 0, 0},
		{"a\n", "a\n", 0, 0},
		{"", "a\nb\n", 2, 0},
		{"a\nb\n", "", 0, 2},
		{"a\nb\nc\n", "a\nB\nc\n", 1, 1},
		{"a\nb\nc\n", "a\nc\nd\ne\n", 2, 1},
		{"a", "a\n", 1, 1},
		{"x\ny\nz\n", "z\ny\nx\n", 2, 2},
	} {
		added, removed := lineDelta([]byte(tc.a), []byte(tc.b))
		if added != tc.added || removed != tc.removed {
			t.Errorf("lineDelta(%q, %q): got +%d -%d, want +%d -%d", tc.a, tc.b, added, removed, tc.added, tc.removed)
		}
	}
}

// Whose change was it: a rewind over a change made between steps, or in
// another agent session's step, names it.
func TestForeignChanges(t *testing.T) {
	ctx := context.Background()
	e, ws := openT(t, Options{})
	w := func(p, content string) {
		change(t, e, func() error { return os.WriteFile(filepath.Join(ws, p), []byte(content), 0o644) }, Change{Path: p})
	}
	s1, _ := e.BeginStep(ctx, "Edit", json.RawMessage(`{"agentSession":"A"}`))
	w("mine.txt", "agent A")
	s2, _ := e.BeginStep(ctx, "Edit", json.RawMessage(`{"agentSession":"B"}`))
	w("theirs.txt", "agent B")
	w("scratch", "B's scratch file")
	if _, err := e.Apply(ctx, record.Request{Target: s2.Seq, Paths: []string{"scratch"}}); err != nil {
		t.Fatal(err) // a rewind ends the step: what follows is between steps
	}
	w("person.txt", "typed by hand")
	res, err := e.Apply(ctx, record.Request{Target: s1.Seq, DryRun: true, Session: "A"})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, f := range res.Foreign {
		got = append(got, f.Path+": "+f.Why)
	}
	if want := []string{"person.txt: between steps", "theirs.txt: another session"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("foreign: got %v, want %v", got, want)
	}
	if res.Foreign[0].Comm != "test" {
		t.Fatalf("foreign change's process: got %q, want test", res.Foreign[0].Comm)
	}
	// Without a session given, the newest agent step's session counts as
	// the agent's (B): then A's change is foreign too.
	res, err = e.Apply(ctx, record.Request{Target: s1.Seq})
	if err != nil {
		t.Fatal(err)
	}
	got = nil
	for _, f := range res.Foreign {
		got = append(got, f.Path+": "+f.Why)
	}
	if want := []string{"mine.txt: another session", "person.txt: between steps"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("foreign, as B: got %v, want %v", got, want)
	}
	if last, _, _ := e.LastRewind(); len(last.Foreign) != 2 || last.Foreign[1].Path != "person.txt" {
		t.Fatalf("the session_rewind does not record what it overwrote: %+v", last)
	}
}

// TestNothingToChangeRecordsNothing: a rewind, path rewind or revert that
// finds the workspace already as it would make it changes nothing and
// appends no event (nothing to undo, the step goes on); a path rewind
// whose path is neither at the target nor now is refused, typed, and
// appends nothing either.
func TestNothingToChangeRecordsNothing(t *testing.T) {
	ctx := context.Background()
	e, ws := openT(t, Options{})
	steps, _ := history3(t, e, ws)
	head := e.Head()
	for _, req := range []record.Request{
		{Target: head},
		{Target: steps[2], Paths: []string{"a.txt"}},
	} {
		res, err := e.Apply(ctx, req)
		if err != nil {
			t.Fatalf("%+v: %v", req, err)
		}
		if !res.Unchanged || res.Seq != 0 || e.Head() != head {
			t.Errorf("%+v: unchanged %v, seq %d, head %d: want unchanged, no event (head %d)", req, res.Unchanged, res.Seq, e.Head(), head)
		}
	}
	// Revert a step that changed nothing (a read-only tool call).
	ev, err := e.BeginStep(ctx, "Read", nil)
	if err != nil {
		t.Fatal(err)
	}
	head = e.Head()
	res, err := e.Apply(ctx, record.Request{Revert: ev.Seq})
	if err != nil || !res.Unchanged || e.Head() != head {
		t.Errorf("revert of a step that changed nothing: unchanged %v, err %v, head %d: want unchanged, head %d", res.Unchanged, err, e.Head(), head)
	}
	for _, paths := range [][]string{{"nonexistent"}, {"a.txt", "no/such"}} {
		_, err := e.Apply(ctx, record.Request{Target: 0, Paths: paths})
		var re *record.RefusedError
		if !errors.As(err, &re) || re.Refusal != record.RefusedNoSuchPath || !errors.Is(err, record.ErrNoSuchPath) || record.RefusalOf(err) != record.RefusedNoSuchPath {
			t.Fatalf("paths %q: err %v, want a no-such-path refusal", paths, err)
		}
		if want := paths[len(paths)-1]; len(re.Missing) != 1 || re.Missing[0] != want {
			t.Errorf("paths %q: missing %q, want [%q]", paths, re.Missing, want)
		}
		if e.Head() != head {
			t.Errorf("paths %q: refused, yet head moved to %d (was %d)", paths, e.Head(), head)
		}
	}
	// A path that existed only at the target, or only now, matches.
	if _, err := e.Apply(ctx, record.Request{Target: 0, Paths: []string{"b.txt"}}); err != nil {
		t.Errorf("a path that exists now: %v", err)
	}
	if _, err := e.Apply(ctx, record.Request{Target: head, Paths: []string{"b.txt"}}); err != nil {
		t.Errorf("a path that existed at the target: %v", err)
	}
}

// recProgress records what a Progress hears.
type recProgress struct {
	what          []string
	items, bytes  int64
	doneN, doneBy int64
}

func (r *recProgress) Begin(what string, items, bytes int64) {
	r.what = append(r.what, what)
	r.items, r.bytes = items, bytes
}
func (r *recProgress) Add(items, bytes int64) { r.doneN += items; r.doneBy += bytes }

// TestProgressCounts: a rewind and a fork report their work to the
// Progress their context carries: a rewind its changes and bytes, all of
// them done by the end; a ProgressCounter (what the daemon shows in
// .zero/status) reads the same while it runs, and nothing once stopped.
func TestProgressCounts(t *testing.T) {
	ctx := context.Background()
	e, ws := openT(t, Options{})
	steps, _ := history3(t, e, ws)
	h0 := e.Head()
	var r recProgress
	if _, err := e.Apply(WithProgress(ctx, &r), record.Request{Target: steps[0]}); err != nil {
		t.Fatal(err)
	}
	// Back to before step 1: a.txt, b.txt, c.txt and d (with what is in
	// it) removed.
	if len(r.what) != 1 || r.what[0] != "rewind" || r.items != 4 || r.doneN != r.items || r.doneBy != r.bytes {
		t.Errorf("rewind progress: %+v, want one rewind of 4 changes, all done", r)
	}
	// Forward again: files come back with their bytes.
	r = recProgress{}
	if _, err := e.Apply(WithProgress(ctx, &r), record.Request{Target: h0}); err != nil {
		t.Fatal(err)
	}
	if r.bytes == 0 || r.doneBy != r.bytes || r.doneN != r.items {
		t.Errorf("rewind forward progress: %+v, want bytes counted, all done", r)
	}
	r = recProgress{}
	if _, err := e.Fork(WithProgress(ctx, &r), e.Head(), filepath.Join(t.TempDir(), "fork"), ws); err != nil {
		t.Fatal(err)
	}
	// The totals are known before the copy begins (one walk, listed
	// first), and the copy reaches them.
	if len(r.what) != 1 || r.what[0] != "fork" || r.items < 5 || r.bytes == 0 || r.doneN != r.items || r.doneBy != r.bytes {
		t.Errorf("fork progress: %+v, want every path counted with its bytes, totals first", r)
	}
	var c ProgressCounter
	if c.Report() != nil {
		t.Errorf("an idle counter reports %+v", c.Report())
	}
	c.Start("rewind")
	c.Begin("rewind", 10, 100)
	c.Add(3, 30)
	if got := c.Report(); got == nil || *got != (record.ProgressReport{What: "rewind", Items: 10, Bytes: 100, DoneItems: 3, DoneBytes: 30}) {
		t.Errorf("counter report %+v", got)
	}
	c.Stop()
	if c.Report() != nil {
		t.Errorf("a stopped counter reports %+v", c.Report())
	}
}

// TestNothingToChangeEndsTheStepsCaptures: the state just before a rewind
// that changes nothing stays what it was: a path the step had captured and
// changes again after it is captured again (as after any rewind, which
// ends the step), so @head-before-it does not show the later content.
// e2e/TestFSX found this (seed 1796395561946588390).
func TestNothingToChangeEndsTheStepsCaptures(t *testing.T) {
	ctx := context.Background()
	e, ws := openT(t, Options{})
	history3(t, e, ws)
	w := func(content string) {
		change(t, e, func() error { return os.WriteFile(filepath.Join(ws, "c.txt"), []byte(content), 0o644) }, Change{Path: "c.txt"})
	}
	w("before the no-op rewind\n") // c.txt was captured in this step already
	head := e.Head()
	if res, err := e.Apply(ctx, record.Request{Target: head}); err != nil || !res.Unchanged {
		t.Fatalf("rewind to head: unchanged %v, %v", res.Unchanged, err)
	}
	w("after it\n")
	if got, _ := readAt(t, e, "c.txt", head); got != "before the no-op rewind\n" {
		t.Errorf("@%d c.txt = %q, want what it held before the no-op rewind", head, got)
	}
}
