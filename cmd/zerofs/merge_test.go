package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestMergeCommand merges a mounted fork into the mounted workspace with
// real tools on both sides: a conflict changes nothing and names the
// path with both sides' steps; the dry run previews with line counts; a
// settled merge brings the fork's changes in as one entry of the log that
// names the fork's steps, and one undo takes it all back.
func TestMergeCommand(t *testing.T) {
	built.NeedFUSE(t)
	dir := t.TempDir()
	ws, fork := filepath.Join(dir, "ws"), filepath.Join(dir, "fork")
	os.Mkdir(ws, 0o755)
	writeFile(t, filepath.Join(ws, "a.txt"), "1\n2\n3\n4\n5\n")
	writeFile(t, filepath.Join(ws, "b.txt"), "b\n")
	writeFile(t, filepath.Join(ws, "c.txt"), "c1\nc2\nc3\n")
	mountT(t, ws)
	head := readTrim(t, filepath.Join(ws, ".zero/head"))
	binOK(t, ws, "fork", head, fork)
	mountT(t, fork)

	binOK(t, ws, "step", "ours edit")
	sh(t, ws, `sed -i 's/^1$/ONE/' a.txt && sed -i 's/^c2$/c2 ours/' c.txt`)
	binOK(t, fork, "step", "theirs edit")
	sh(t, fork, `sed -i 's/^5$/FIVE/' a.txt && sed -i 's/^c2$/c2 theirs/' c.txt && rm b.txt && mkdir -p n/m && echo new > n/m/new.txt`)

	before := binOK(t, ws, "log")
	r := bin(t, ws, "", "merge", fork)
	if r.code != 1 || !strings.Contains(r.stderr, "conflict c.txt") || !strings.Contains(r.stderr, `ours: step `) ||
		!strings.Contains(r.stderr, `"ours edit"`) || !strings.Contains(r.stderr, `"theirs edit"`) || !strings.Contains(r.stderr, "nothing changed") {
		t.Fatalf("merge with a conflict: exit %d, stderr %q", r.code, r.stderr)
	}
	if strings.Contains(r.stderr, "a.txt") {
		t.Errorf("a.txt merges line by line, yet was named: %q", r.stderr)
	}
	if got := binOK(t, ws, "log"); got != before || readTrim(t, filepath.Join(ws, "b.txt")) != "b" {
		t.Fatalf("a refused merge changed something:\n%s", got)
	}

	dry := binOK(t, ws, "merge", "--dry-run", fork, "--theirs", "c.txt")
	for _, want := range []string{"would merge " + fork + ": restore 5, delete 1", "restore  a.txt  +1 -1", "delete   b.txt", "restore  c.txt  +1 -1",
		"create   n/", "create   n/m/new.txt  +1 -0", `would bring in the fork's step `, `"theirs edit"`} {
		if !strings.Contains(dry, want) {
			t.Errorf("dry run lacks %q:\n%s", want, dry)
		}
	}
	if readTrim(t, filepath.Join(ws, "a.txt")) != "ONE\n2\n3\n4\n5" {
		t.Fatal("a dry run changed a.txt")
	}

	out := binOK(t, ws, "merge", fork, "--theirs", "c.txt")
	if !strings.Contains(out, "merged "+fork) || !strings.Contains(out, `brought in the fork's step`) || !strings.Contains(out, "merged line by line a.txt") {
		t.Errorf("merge output:\n%s", out)
	}
	check := func(when string, files map[string]string) {
		t.Helper()
		for p, want := range files {
			if got := readTrim(t, filepath.Join(ws, p)); got != want {
				t.Errorf("%s: %s: got %q, want %q", when, p, got, want)
			}
		}
	}
	check("merged", map[string]string{"a.txt": "ONE\n2\n3\n4\nFIVE", "c.txt": "c1\nc2 theirs\nc3",
		"n/m/new.txt": "new", "b.txt": "<open " + filepath.Join(ws, "b.txt") + ": no such file or directory>"})
	log := binOK(t, ws, "log")
	if !strings.Contains(log, "merge of "+fork+" (forked at "+head+"; its step ") || !strings.Contains(log, `"theirs edit")`) {
		t.Errorf("log does not name the merge and what it brought in:\n%s", log)
	}
	undo := binOK(t, ws, "undo")
	if !strings.Contains(undo, "undid merge ") {
		t.Errorf("undo: %q", undo)
	}
	check("undone", map[string]string{"a.txt": "ONE\n2\n3\n4\n5", "c.txt": "c1\nc2 ours\nc3", "b.txt": "b",
		"n/m/new.txt": "<open " + filepath.Join(ws, "n/m/new.txt") + ": no such file or directory>"})

	// A directory that is not a fork of this workspace.
	wantFail(t, ws, 1, "not a fork of this workspace", "merge", dir)
	wantFail(t, ws, 2, "paths after DIR go with --ours or --theirs", "merge", fork, "a.txt")
}
