package rewind

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/zerofs/zerofs/record"
)

// TestBranchBasePinned: a branch made now ends the step's captures, so a
// later change to a path the step captured already is captured again and
// the state at the branch's base stays what it was; gc (by hand, and so
// the bound's pruning, which cuts through the same call) stops at the
// oldest branch's base, and moves on once that branch is deleted.
func TestBranchBasePinned(t *testing.T) {
	e, ws := openT(t, Options{})
	ctx := context.Background()
	p := filepath.Join(ws, "a")
	e.BeginStep(ctx, "one", nil)
	change(t, e, func() error { return os.WriteFile(p, []byte("1"), 0o644) }, Change{Path: "a"})
	change(t, e, func() error { return os.WriteFile(p, []byte("2"), 0o644) }, Change{Path: "a"})
	res, err := e.Apply(ctx, record.Request{Branch: &record.BranchRequest{Dir: filepath.Join(filepath.Dir(ws), "b")}})
	if err != nil {
		t.Fatal(err)
	}
	base := res.Branch.Base
	if base != e.Head() {
		t.Errorf("base %d, head %d", base, e.Head())
	}
	// Same step, a path it captured already: captured again.
	change(t, e, func() error { return os.WriteFile(p, []byte("3"), 0o644) }, Change{Path: "a"})
	if got, _ := readAt(t, e, "a", base); got != "2" {
		t.Errorf("a at the branch's base %d: %q, want 2", base, got)
	}
	e.BeginStep(ctx, "two", nil)
	change(t, e, func() error { return os.WriteFile(p, []byte("4"), 0o644) }, Change{Path: "a"})
	gr, err := e.GC(ctx, e.Head())
	if err != nil {
		t.Fatal(err)
	}
	if gr.Before > base || !e.HasState(base) {
		t.Fatalf("gc cut at %d past the branch's base %d", gr.Before, base)
	}
	if got, _ := readAt(t, e, "a", base); got != "2" {
		t.Errorf("after gc, a at the base: %q", got)
	}
	// --at a state gc cut is refused; the branch deleted, gc moves on.
	if _, err := e.Apply(ctx, record.Request{Branch: &record.BranchRequest{Dir: "/elsewhere", At: new(record.Seq)}}); !errors.Is(err, record.ErrNoSuchSeq) {
		t.Errorf("a branch at a pruned state: %v", err)
	}
	if _, err := e.Apply(ctx, record.Request{Branch: &record.BranchRequest{Delete: res.Branch.ID}}); err != nil {
		t.Fatal(err)
	}
	if ents, _ := os.ReadDir(filepath.Join(e.opts.StoreDir, record.BranchesName)); len(ents) != 0 {
		t.Errorf("the deleted branch left %v", ents)
	}
	if h := e.Head(); true {
		if gr, err := e.GC(ctx, h); err != nil || gr.Before != h {
			t.Errorf("gc after the delete: %+v %v, want the cut at %d", gr, err, h)
		}
	}
}

// TestBranchRecordTampered: a branch record is untrusted input: a
// relative directory, an ID that is not its directory's, a merged state
// naming a path outside the workspace or a bad blob, or JSON that does not
// parse make gc and merge refuse, naming the branch, and change nothing.
func TestBranchRecordTampered(t *testing.T) {
	for name, tc := range map[string]struct{ from, to string }{
		"relative dir": {`"dir": "/`, `"dir": "`},
		"other id":     {`"id": "`, `"id": "0`},
		"merged path":  {`"created"`, `"merged": {"seq": 1, "head": 1, "states": [{"path": "../x", "kind": "file", "blob": "` + strings.Repeat("a", 64) + `"}]}, "created"`},
		"merged blob":  {`"created"`, `"merged": {"seq": 1, "head": 1, "states": [{"path": "x", "kind": "file", "blob": "../../etc"}]}, "created"`},
		"not json":     {`{`, `[`},
	} {
		t.Run(name, func(t *testing.T) {
			e, ws := openT(t, Options{})
			ctx := context.Background()
			e.BeginStep(ctx, "one", nil)
			change(t, e, func() error { return os.WriteFile(filepath.Join(ws, "a"), []byte("1"), 0o644) }, Change{Path: "a"})
			res, err := e.Apply(ctx, record.Request{Branch: &record.BranchRequest{Dir: filepath.Join(filepath.Dir(ws), "b")}})
			if err != nil {
				t.Fatal(err)
			}
			p := filepath.Join(BranchDir(e.opts.StoreDir, res.Branch.ID), record.BranchRecordName)
			b, _ := os.ReadFile(p)
			bad := strings.Replace(string(b), tc.from, tc.to, 1)
			if bad == string(b) {
				t.Fatalf("the tamper %q did not apply to %s", tc.from, b)
			}
			os.WriteFile(p, []byte(bad), 0o600)
			head := e.Head()
			if _, err := e.GC(ctx, head); err == nil || !strings.Contains(err.Error(), "branch") {
				t.Errorf("gc of a store with a damaged branch record: %v", err)
			}
			_, err = e.Apply(ctx, record.Request{Merge: &record.MergeRequest{Dir: filepath.Join(filepath.Dir(ws), "b"), Workspace: ws}})
			if err == nil || !strings.Contains(err.Error(), "branch") {
				t.Errorf("merge with a damaged branch record: %v", err)
			}
			if e.Head() != head || e.PrunedBefore() != 0 {
				t.Errorf("a refusal changed the history: head %d -> %d, pruned %d", head, e.Head(), e.PrunedBefore())
			}
		})
	}
}

// TestBranchMergeCrash kills a merge of a branch (SIGKILL, in a child
// process) before its intent and after it: after reopening, the workspace
// is merged whole or not at all (the fork's merge's intent, reused), and
// the branch's record agrees: its state as merged is the base of the next
// merge only if the merge happened (the record's pending state is settled
// from the log). The branch's copy-up layer is made by hand in its upper
// directory: the engine reads nothing else of it.
func TestBranchMergeCrash(t *testing.T) {
	for _, tc := range []struct {
		point  string
		merged bool
	}{
		{"rewind:captured", false},
		{"rewind:intent", true},
		{"rewind:applied", true},
	} {
		t.Run(tc.point, func(t *testing.T) {
			e, ws := openT(t, Options{Sync: true})
			ctx := context.Background()
			e.BeginStep(ctx, "setup", nil)
			for i := range 5 {
				p := "f" + strconv.Itoa(i)
				change(t, e, func() error { return os.WriteFile(filepath.Join(ws, p), []byte("base\n"), 0o644) }, Change{Path: p})
			}
			dir := filepath.Join(filepath.Dir(ws), "b")
			res, err := e.Apply(ctx, record.Request{Branch: &record.BranchRequest{Dir: dir}})
			if err != nil {
				t.Fatal(err)
			}
			upper := filepath.Join(BranchDir(e.opts.StoreDir, res.Branch.ID), record.BranchUpperName)
			for i := range 5 {
				os.WriteFile(filepath.Join(upper, "f"+strconv.Itoa(i)), []byte("branch\n"), 0o644)
			}
			store := e.opts.StoreDir
			if err := e.Close(); err != nil {
				t.Fatal(err)
			}
			killedAt(t, "crash", tc.point, "ZEROFS_TEST_WS="+ws, "ZEROFS_TEST_FORM=merge",
				"ZEROFS_TEST_STORE="+store, "ZEROFS_TEST_FORK="+dir)
			root, err := os.Open(ws)
			if err != nil {
				t.Fatal(err)
			}
			defer root.Close()
			e, err = Open(ctx, root, Options{StoreDir: store, Sync: true})
			if err != nil {
				t.Fatalf("reopen after a crash at %s: %v", tc.point, err)
			}
			defer e.Close()
			want := "base\n"
			if tc.merged {
				want = "branch\n"
			}
			for i := range 5 {
				if b, _ := os.ReadFile(filepath.Join(ws, "f"+strconv.Itoa(i))); string(b) != want {
					t.Fatalf("f%d after a crash at %s: %q, want %q", i, tc.point, b, want)
				}
			}
			// The next merge (a dry run is one) settles the record from
			// the log: merged as the recovered merge's event, or not.
			if _, err := e.Apply(ctx, record.Request{DryRun: true, Merge: &record.MergeRequest{Dir: dir, Workspace: ws}}); err != nil {
				t.Fatal(err)
			}
			recs, err := ReadBranches(store)
			if err != nil || len(recs) != 1 || recs[0].Pending != nil {
				t.Fatalf("the branch's record after a dry run: %+v %v", recs, err)
			}
			if last, seq, _ := e.LastRewind(); tc.merged && (recs[0].Merged == nil || recs[0].Merged.Seq != seq || last.Merge.Branch != recs[0].ID) {
				t.Errorf("merged state not tied to the recovered merge %d: %+v", seq, recs[0].Merged)
			} else if !tc.merged && recs[0].Merged != nil {
				t.Errorf("a merge that never happened left a merged state: %+v", recs[0].Merged)
			}
			// With the merge done the next finds nothing to bring in;
			// without, it brings it all in.
			out, err := e.Apply(ctx, record.Request{Merge: &record.MergeRequest{Dir: dir, Workspace: ws}})
			if err != nil {
				t.Fatal(err)
			}
			if out.Unchanged != tc.merged {
				t.Errorf("the merge after the crash: unchanged %v, want %v", out.Unchanged, tc.merged)
			}
			recs, err = ReadBranches(store)
			if err != nil || len(recs) != 1 || recs[0].Pending != nil || recs[0].Merged == nil || recs[0].Merged.Seq == 0 {
				t.Fatalf("the branch's record after the next merge: %+v %v", recs, err)
			}
		})
	}
}
