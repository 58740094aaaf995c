package index

import (
	"reflect"
	"sort"
	"testing"

	"github.com/zerofs/zerofs/record"
)

func blobOf(c byte) string {
	b := make([]byte, 64)
	for i := range b {
		b[i] = c
	}
	return string(b)
}

// renameIndex is a history with a directory rename: b/x existed and was
// removed with b (1), a was renamed to b (2), and b/x was written twice
// (3, 4).
func renameIndex(t *testing.T) *Index {
	t.Helper()
	ix := NewIndex()
	add := func(seq record.Seq, files ...record.FileState) {
		t.Helper()
		if err := ix.Add(seq, files); err != nil {
			t.Fatal(err)
		}
	}
	add(1, record.FileState{Path: "b/x", Kind: record.KindFile, Blob: blobOf('0')}, record.FileState{Path: "b", Kind: record.KindDir, Mode: 0o755})
	add(2, record.FileState{Path: "a", Kind: record.KindDir, Mode: 0o700, RenamedTo: "b"}, record.FileState{Path: "b", Absent: true, RenamedFrom: "a"})
	add(3, record.FileState{Path: "b/x", Kind: record.KindFile, Blob: blobOf('2')})
	add(4, record.FileState{Path: "b/x", Kind: record.KindFile, Blob: blobOf('3')})
	return ix
}

// TestResolveThroughRenames: a path beneath a renamed directory resolves
// to the same place beneath the destination just after the rename; beneath
// the destination, before it, nothing was.
func TestResolveThroughRenames(t *testing.T) {
	ix := renameIndex(t)
	check := func(ix *Index) {
		t.Helper()
		for _, c := range []struct {
			p     string
			after record.Seq
			blob  string // the record's blob; "absent"; or "live:" and the live path
		}{
			{"a/x", 0, blobOf('2')}, // through the rename at 2, to b/x's record at 3
			{"a/x", 1, blobOf('2')},
			{"a/x", 2, "live:a/x"},
			{"a/y/z", 0, "live:b/y/z"},
			{"b/x", 0, blobOf('0')},
			{"b/x", 1, "absent"}, // b was replaced by a at 2
			{"b/x", 2, blobOf('2')},
			{"b/x", 3, blobOf('3')},
			{"b/x", 4, "live:b/x"},
			{"a", 0, ""}, // a's own record: a directory
		} {
			rec, ok, live := ix.Resolve(c.p, c.after, ^record.Seq(0))
			got := "live:" + live
			switch {
			case ok && rec.State.Absent:
				got = "absent"
			case ok:
				got = rec.State.Blob
			}
			if got != c.blob {
				t.Errorf("Resolve(%q, %d) = %q, want %q", c.p, c.after, got, c.blob)
			}
		}
		names, live := ix.NamesAt("a", 0, ^record.Seq(0))
		if !names["x"] || !reflect.DeepEqual(live, []string{"a", "b"}) {
			t.Errorf("NamesAt(a, 0) = %v, %v; want x among the names, live [a b]", names, live)
		}
		if got := ix.RenamesBetween(0, ^record.Seq(0)); !reflect.DeepEqual(got, []Rename{{Seq: 2, From: "a", To: "b"}}) {
			t.Errorf("RenamesBetween = %v", got)
		}
	}
	check(ix)
	// The rename sides are rebuilt from the packed records, as after a
	// snapshot is read.
	ix.loadMoves()
	check(ix)
}

// TestThinKeepsWhatARenameNeeds: thinning (0, 4] keeps the state at 0
// exact: a/x at 0 resolves through the rename at 2 to b/x's first record
// after it (3), which is not b/x's first record in the interval (1).
func TestThinKeepsWhatARenameNeeds(t *testing.T) {
	ix := renameIndex(t)
	want := map[string]string{}
	for _, p := range []string{"a/x", "b/x", "a", "b"} {
		rec, _, _ := ix.Resolve(p, 0, ^record.Seq(0))
		want[p] = rec.State.Blob + string(rec.State.Kind)
	}
	if n := ix.Thin(0, 4); n != 1 {
		t.Errorf("Thin dropped %d records, want 1 (b/x at 4)", n)
	}
	for p, w := range want {
		rec, _, _ := ix.Resolve(p, 0, ^record.Seq(0))
		if got := rec.State.Blob + string(rec.State.Kind); got != w {
			t.Errorf("after the thin, %q at 0 = %q, want %q", p, got, w)
		}
	}
	ix.Prune(2)
	if ix.HasMoves() {
		t.Errorf("a cut past the rename kept its sides")
	}
	var seqs []record.Seq
	ix.Each(func(p string, s []record.Seq, _ func(int) record.FileState) {
		if p == "b/x" {
			seqs = append(seqs, s...)
		}
	})
	sort.Slice(seqs, func(i, j int) bool { return seqs[i] < seqs[j] })
	if !reflect.DeepEqual(seqs, []record.Seq{3}) {
		t.Errorf("b/x's records after the cut = %v, want [3]", seqs)
	}
}

// TestRenameRecordChecks: a rename side the capture never writes is
// damage.
func TestRenameRecordChecks(t *testing.T) {
	for _, f := range []record.FileState{
		{Path: "a", Kind: record.KindDir, RenamedTo: "a"},
		{Path: "a", Kind: record.KindDir, RenamedTo: "a/b"},
		{Path: "a/b", Kind: record.KindDir, RenamedTo: "a"},
		{Path: "a", Kind: record.KindDir, RenamedTo: "../x"},
		{Path: "a", Kind: record.KindDir, RenamedTo: ".zero/x"},
		{Path: "a", Kind: record.KindDir, RenamedTo: "b", RenamedFrom: "c"},
		{Path: "", Kind: record.KindDir, RenamedTo: "b"},
	} {
		if r := record.CheckRecord(f); r == "" {
			t.Errorf("%+v passes the check", f)
		}
		if got, want := checkPacked(f.Path, encodeState(nil, f)), record.CheckRecord(f); (got == "") != (want == "") {
			t.Errorf("%+v: checkPacked %q, checkRecord %q", f, got, want)
		}
	}
	if r := record.CheckRecord(record.FileState{Path: "a/b", Kind: record.KindDir, RenamedTo: "c/b"}); r != "" {
		t.Errorf("a real rename record fails the check: %s", r)
	}
}
