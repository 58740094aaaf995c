package fs

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"

	"github.com/zerofs/zerofs/control"
	"github.com/zerofs/zerofs/record"
)

// ctlRequest writes a request to .zero/rewind on a handle open for reading
// and writing, and reads back that handle's result.
func ctlRequest(t fatalT, mp, req string) (control.RewindReport, error) {
	t.Helper()
	f, err := os.OpenFile(filepath.Join(mp, ".zero", "rewind"), os.O_RDWR, 0)
	if err != nil {
		t.Fatalf("%v", err)
	}
	defer f.Close()
	_, werr := f.Write([]byte(req + "\n"))
	b := make([]byte, 1<<20)
	n, err := f.ReadAt(b, 0)
	if n == 0 && err != nil {
		if werr != nil {
			return control.RewindReport{}, werr
		}
		t.Fatalf("read back the result of %s: %v", req, err)
	}
	var r control.RewindReport
	readJSON(t, string(b[:n]), &r)
	return r, werr
}

func TestCtlRewindForms(t *testing.T) {
	m := mountT(t, Options{})
	mp := m.Mountpoint()
	at := func(p string) string { return filepath.Join(mp, p) }
	s1 := stepT(t, mp, "one")
	writeFile(t, at("a.txt"), "a1\n")
	writeFile(t, at("b.txt"), "b1\n")
	s2 := stepT(t, mp, "two")
	writeFile(t, at("a.txt"), "a2\nmore\n")
	writeFile(t, at("c.txt"), "c2\n")
	s3 := stepT(t, mp, "three")
	writeFile(t, at("b.txt"), "b3\n")

	// A dry run of a path rewind: the preview, and nothing changes.
	h := headOf(t, mp)
	r, err := ctlRequest(t, mp, `{"target": `+strconv.FormatUint(uint64(s2), 10)+`, "paths": ["a.txt", "c.txt"], "dryRun": true}`)
	if err != nil {
		t.Fatal(err)
	}
	want := []record.PathChange{
		{Path: "a.txt", Action: record.ActionRestore, Kind: record.KindFile, Lines: &record.LineCount{Added: 1, Removed: 2}},
		{Path: "c.txt", Action: record.ActionDelete, Kind: record.KindFile, Lines: &record.LineCount{Removed: 1}},
	}
	if g, w := jsonOf(r.Preview), jsonOf(want); !r.DryRun || r.Sequence != 0 || g != w {
		t.Fatalf("dry run: got %+v preview %s, want preview %s", r, g, w)
	}
	if headOf(t, mp) != h || readFile(t, at("a.txt")) != "a2\nmore\n" {
		t.Fatal("a dry run changed something")
	}

	// The path rewind itself.
	r, err = ctlRequest(t, mp, `{"target": `+strconv.FormatUint(uint64(s2), 10)+`, "paths": ["a.txt", "c.txt"]}`)
	if err != nil {
		t.Fatal(err)
	}
	if r.Sequence == 0 || r.Report.Restored != 1 || r.Report.Deleted != 1 || jsonOf(r.Paths) != `["a.txt","c.txt"]` {
		t.Fatalf("path rewind: %+v", r)
	}
	if got := readFile(t, at("a.txt")); got != "a1\n" {
		t.Fatalf("a.txt after the path rewind: %q, want a1", got)
	}
	if got := readFile(t, at("b.txt")); got != "b3\n" {
		t.Fatalf("b.txt after a path rewind of others: %q, want b3", got)
	}
	if _, err := os.Lstat(at("c.txt")); !os.IsNotExist(err) {
		t.Fatalf("c.txt after the path rewind: %v", err)
	}
	// A fresh read of .zero/rewind shows the last rewind with its paths.
	var last control.RewindReport
	readJSON(t, ctlRead(t, mp, "rewind"), &last)
	if last.Sequence != r.Sequence || jsonOf(last.Paths) != `["a.txt","c.txt"]` {
		t.Fatalf(".zero/rewind after a path rewind: %+v", last)
	}

	// Reverting step one conflicts: a.txt and b.txt were changed since.
	h = headOf(t, mp)
	r, err = ctlRequest(t, mp, `{"revert": `+strconv.FormatUint(uint64(s1), 10)+`}`)
	wantErrno(t, "conflicting revert", err, syscall.EBUSY)
	if r.Error != "conflict" || jsonOf(r.Conflicts) != `["b.txt"]` || r.RevertOf != s1 {
		t.Fatalf("conflicting revert's result: %+v", r)
	}
	if headOf(t, mp) != h || readFile(t, at("b.txt")) != "b3\n" {
		t.Fatal("a refused revert changed something")
	}
	// Forced: b.txt goes back to before step one (absent), a.txt too.
	r, err = ctlRequest(t, mp, `{"revert": `+strconv.FormatUint(uint64(s1), 10)+`, "force": true}`)
	if err != nil {
		t.Fatal(err)
	}
	if !r.Force || r.RevertOf != s1 {
		t.Fatalf("forced revert: %+v", r)
	}
	for _, p := range []string{"a.txt", "b.txt"} {
		if _, err := os.Lstat(at(p)); !os.IsNotExist(err) {
			t.Fatalf("%s after the forced revert of step one: %v", p, err)
		}
	}
	// Undone like any rewind.
	rewindT(t, mp, r.CheckpointSequence-1)
	if got := readFile(t, at("b.txt")); got != "b3\n" {
		t.Fatalf("b.txt after undoing the revert: %q, want b3", got)
	}
	// Reverting step three (b.txt's edit) is clean and keeps the rest.
	r, err = ctlRequest(t, mp, `{"revert": `+strconv.FormatUint(uint64(s3), 10)+`}`)
	if err != nil {
		t.Fatal(err)
	}
	if r.RevertOf != s3 || r.TargetSequence != s3 || r.Report.Restored != 1 {
		t.Fatalf("revert of step three: %+v", r)
	}
	if got := readFile(t, at("b.txt")); got != "b1\n" {
		t.Fatalf("b.txt after reverting step three: %q, want b1", got)
	}
	if got := readFile(t, at("a.txt")); got != "a1\n" {
		t.Fatalf("a.txt after reverting step three: %q, want a1", got)
	}
}

func TestCtlRewindBadRequests(t *testing.T) {
	m := mountT(t, Options{})
	mp := m.Mountpoint()
	writeFile(t, filepath.Join(mp, "f"), "1")
	stepT(t, mp, "s")
	writeFile(t, filepath.Join(mp, "f"), "2")
	h := headOf(t, mp)
	above := strconv.FormatUint(uint64(h+1), 10)
	for _, in := range []string{
		`{}`, `{"target": 1, "revert": 2}`, `{"revert": 0}`, `{"target": 1, "force": true}`,
		`{"target": 1, "paths": []}`, `{"target": 1, "paths": ["../x"]}`, `{"target": 1, "paths": ["/f"]}`,
		`{"target": 1, "paths": [".zero/log"]}`, `{"revert": 1, "paths": ["f"]}`, `{"target": 1, "bogus": 1}`,
		`{"target": -1}`, `{"target": ` + above + `}`, `{"revert": ` + above + `}`, `{"target": 1} {"target": 1}`,
		`{"target": "1"}`,
	} {
		wantErrno(t, "rewind "+in, ctlWrite(mp, "rewind", in), syscall.EINVAL)
	}
	if got := readFile(t, filepath.Join(mp, "f")); got != "2" {
		t.Errorf("f = %q after refused requests, want 2", got)
	}
	if got := headOf(t, mp); got != h {
		t.Errorf("head = %d after refused requests, want %d", got, h)
	}
}

func jsonOf(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
