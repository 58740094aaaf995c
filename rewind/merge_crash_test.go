package rewind

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/zerofs/zerofs/record"
)

// TestMergeCrash kills a merge (SIGKILL, in a child process) at each crash
// point of its apply: after reopening, the workspace is either not merged
// at all (killed before the intent) or merged whole, recorded as one
// merge, and one undo takes it back.
func TestMergeCrash(t *testing.T) {
	for _, tc := range []struct {
		point  string
		merged bool
	}{
		{"rewind:captured", false},
		{"rewind:intent", true},
		{"rewind:half", true},
		{"rewind:write", true},
		{"rewind:applied", true},
	} {
		t.Run(tc.point, func(t *testing.T) { testMergeCrash(t, tc.point, tc.merged) })
	}
}

func testMergeCrash(t *testing.T, point string, merged bool) {
	m := newMergeT(t, nil)
	for i := range 10 {
		m.write(m.e, m.ws, "o"+strconv.Itoa(i), "base o\n")
		m.write(m.e, m.ws, "t"+strconv.Itoa(i), "1\n2\n3\n")
		m.write(m.e, m.ws, "r"+strconv.Itoa(i), "to remove\n")
	}
	os.RemoveAll(m.fork)
	if _, err := m.e.Fork(context.Background(), m.e.Head(), m.fork, m.ws); err != nil {
		t.Fatal(err)
	}
	m.f = m.openFork()
	baseTree := forkTree(t, m.fork)
	m.step(m.e, "ours")
	for i := range 10 {
		m.write(m.e, m.ws, "o"+strconv.Itoa(i), "ours "+strconv.Itoa(i)+"\n")
		m.write(m.e, m.ws, "t"+strconv.Itoa(i), "ONE\n2\n3\n") // merged line by line with theirs
	}
	m.step(m.f, "theirs")
	for i := range 10 {
		m.write(m.f, m.fork, "t"+strconv.Itoa(i), "1\n2\nTHREE "+strconv.Itoa(i)+"\n")
		m.write(m.f, m.fork, "n/new"+strconv.Itoa(i), strings.Repeat("new\n", 1000))
		q := "r" + strconv.Itoa(i)
		m.do(m.f, func() error { return os.Remove(filepath.Join(m.fork, q)) }, Change{Path: q, Removed: true})
	}
	before := diskTree(t, m.ws)
	want := tree{}
	for p, n := range before {
		want[p] = n
	}
	theirs := forkTree(t, m.fork)
	for p, n := range theirs {
		if baseTree[p] != n {
			want[p] = n
		}
	}
	for p := range baseTree {
		if _, ok := theirs[p]; !ok {
			delete(want, p)
		}
	}
	for i := range 10 {
		p := "t" + strconv.Itoa(i)
		want[p] = node{Kind: record.KindFile, Mode: 0o644, Content: "ONE\n2\nTHREE " + strconv.Itoa(i) + "\n"}
	}
	if err := m.e.Close(); err != nil {
		t.Fatal(err)
	}
	if err := m.f.Close(); err != nil {
		t.Fatal(err)
	}
	store := m.e.opts.StoreDir
	killedAt(t, "crash", point, "ZEROFS_TEST_WS="+m.ws, "ZEROFS_TEST_FORM=merge",
		"ZEROFS_TEST_STORE="+store, "ZEROFS_TEST_FORK="+m.fork)
	root, err := os.Open(m.ws)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	e, err := Open(context.Background(), root, Options{StoreDir: store, Sync: true})
	if err != nil {
		t.Fatalf("reopen after a crash at %s: %v", point, err)
	}
	defer e.Close()
	expect := before
	if merged {
		expect = want
	}
	if d := diffTrees(diskTree(t, m.ws), expect); d != "" {
		t.Fatalf("after a crash at %s and reopen, the merge is half done:\n%s", point, d)
	}
	if _, err := os.Stat(filepath.Join(store, intentName)); !os.IsNotExist(err) {
		t.Fatalf("intent still there after recovery: %v", err)
	}
	last, _, ok := e.LastRewind()
	if ok != merged {
		t.Fatalf("merge recorded: got %v, want %v", ok, merged)
	}
	if !merged {
		return
	}
	if last.Form != record.FormMerge || last.Merge == nil || len(last.Merge.Steps) != 1 || last.Merge.Steps[0].Label != "theirs" {
		t.Fatalf("recovered merge records %+v", last)
	}
	if last.Report.Restored != 21 || last.Report.Deleted != 10 {
		t.Errorf("recovered merge reports %+v, want 21 restored (10 t files, n and its 10 files) and 10 deleted, as the merge itself reports", last.Report)
	}
	if _, err := e.Apply(context.Background(), record.Request{Undo: true}); err != nil {
		t.Fatal(err)
	}
	if d := diffTrees(diskTree(t, m.ws), before); d != "" {
		t.Fatalf("undoing the recovered merge:\n%s", d)
	}
}

// forkTree is a fork's tree without its store.
func forkTree(t fataler, dir string) tree {
	tr := diskTree(t, dir)
	for p := range tr {
		if p == record.StoreName || strings.HasPrefix(p, record.StoreName+"/") {
			delete(tr, p)
		}
	}
	return tr
}

// TestMergeIntentTampered: a merge's intent record is untrusted input: one
// whose states name a path outside the workspace, a mode beyond 07777 or
// no states at all makes the next open refuse the store, naming the
// intent, and changes nothing in the workspace.
func TestMergeIntentTampered(t *testing.T) {
	for name, tamper := range map[string]func(map[string]any){
		"path outside": func(in map[string]any) { in["targets"].([]any)[0].(map[string]any)["path"] = "../outside" },
		"mode":         func(in map[string]any) { in["targets"].([]any)[0].(map[string]any)["mode"] = 0o17777 },
		"no states":    func(in map[string]any) { delete(in, "targets") },
	} {
		t.Run(name, func(t *testing.T) {
			m := newMergeT(t, map[string]string{"a": "a\n"})
			m.step(m.f, "theirs")
			m.write(m.f, m.fork, "a", "theirs\n")
			m.write(m.f, m.fork, "b", "new\n")
			m.e.Close()
			m.f.Close()
			store := m.e.opts.StoreDir
			killedAt(t, "crash", "rewind:intent", "ZEROFS_TEST_WS="+m.ws, "ZEROFS_TEST_FORM=merge",
				"ZEROFS_TEST_STORE="+store, "ZEROFS_TEST_FORK="+m.fork)
			before := diskTree(t, m.ws)
			p := filepath.Join(store, intentName)
			b, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			var in map[string]any
			if err := json.Unmarshal(b, &in); err != nil {
				t.Fatal(err)
			}
			tamper(in)
			b, _ = json.Marshal(in)
			if err := os.WriteFile(p, b, 0o600); err != nil {
				t.Fatal(err)
			}
			err = openRefused(t, "a tampered merge intent", m.ws, Options{StoreDir: store})
			var de *record.DamageError
			if !errors.As(err, &de) || !strings.Contains(err.Error(), intentName) {
				t.Fatalf("got %v, want a *record.DamageError naming the intent", err)
			}
			if d := diffTrees(diskTree(t, m.ws), before); d != "" {
				t.Fatalf("a refused intent changed the workspace:\n%s", d)
			}
		})
	}
}
