package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/zerofs/zerofs/history"
)

// forged is a file name built to forge a `log --stat` block: newlines, a
// made-up step header and change line, and ESC sequences that erase the
// line after it (the real "deleted README.md") and move the cursor up.
const forged = "x\n\nstep   9  2026-01-01 00:00:00  Edit\n    modified  notes.txt\x1b[2K\x1b[1A"

// hostileNames are names no output may print raw: the forgery, a name
// with a C1 CSI and a bidirectional override, and three names that differ
// only in bytes that are not UTF-8 (stored apart, shown apart).
var hostileNames = []string{forged, "csi\u009b2Jrtl\u202etxt.sh", "bad\xff", "bad\xfe", "bad\ufffd"}

// buildHostile: step "Edit" adds each hostile name and deletes README.md.
func buildHostile(t *testing.T) *store {
	t.Helper()
	s := newStore(t, map[string]string{"README.md": "readme\n"})
	s.step("Edit")
	for i, n := range hostileNames {
		s.write(n, strings.Repeat("line\n", i+1))
	}
	s.change(func(ws string) error { return os.Remove(filepath.Join(ws, "README.md")) }, "README.md")
	s.step("Read")
	s.close()
	return s
}

// plainText fails unless out is one line per "\n", with no control
// character (ESC, CR, C1) and nothing that is not UTF-8: a name can
// neither forge nor erase a line.
func plainText(t *testing.T, what, out string) {
	t.Helper()
	for i, r := range out {
		if (r < 0x20 && r != '\n' && r != '\t') || r == 0x7f || (r >= 0x80 && r < 0xa0) || r == '\u202e' || r == '\ufffd' {
			t.Errorf("%s holds %U at byte %d:\n%q", what, r, i, out)
			return
		}
	}
}

// TestHostileNamesAreQuoted: issue 14, defect 3. Names reached the
// terminal raw: a forged `log --stat` block, a split `diff --git` header.
func TestHostileNamesAreQuoted(t *testing.T) {
	ws := buildHostile(t).ws
	stat := mustRun(t, ws, "log", "--stat")
	plainText(t, "log --stat", stat)
	golden(t, "hostile-log-stat.txt", stat)
	if strings.Contains(stat, "\nstep   9") || !strings.Contains(stat, "deleted   README.md") {
		t.Errorf("log --stat forged or lost a line:\n%s", stat)
	}
	diff := mustRun(t, ws, "diff", "0")
	plainText(t, "diff", diff)
	golden(t, "hostile-diff.txt", diff)
	for _, line := range strings.Split(diff, "\n") {
		if strings.HasPrefix(line, "diff --git ") && strings.Count(line, "\"") != 0 && strings.Count(line, "\"")%2 != 0 {
			t.Errorf("diff header not quoted whole: %q", line)
		}
	}
	dry := mustRun(t, ws, "rewind", "--dry-run", "1")
	plainText(t, "rewind --dry-run", dry)
	golden(t, "hostile-rewind-dry-run.txt", dry)
	revert := mustRun(t, ws, "revert", "--dry-run", "2")
	plainText(t, "revert --dry-run", revert)
	out := mustRun(t, ws, "rewind", "1", "--", "bad\xff")
	plainText(t, "rewind -- bad\\xff", out)
	if want := "rewound \"bad\\377\" to 1: restored 0, deleted 1, skipped 0\n"; out != want {
		t.Errorf("rewind -- bad\\xff said %q, want %q", out, want)
	}
	for _, n := range []string{"bad\xfe", "bad\ufffd"} {
		if _, err := os.Lstat(filepath.Join(ws, n)); err != nil {
			t.Errorf("rewinding bad\\xff alone touched %q: %v", n, err)
		}
	}
	st := mustRun(t, ws, "status")
	plainText(t, "status", st)
}

// TestNonUTF8NamesStayApartInTheLog: issue 14, defect 4. bad\xff, bad\xfe
// and bad\uFFFD were all stored as "bad\uFFFD": log --json showed one
// entry for three files. Each is recorded with its exact bytes.
func TestNonUTF8NamesStayApartInTheLog(t *testing.T) {
	ws := buildHostile(t).ws
	out := mustRun(t, ws, "log", "--json")
	var entries []history.Entry
	if err := json.Unmarshal([]byte(out), &entries); err != nil {
		t.Fatalf("log --json: %v\n%s", err, out)
	}
	got := map[string]int64{}
	for _, e := range entries {
		for _, c := range e.Changes {
			got[c.Path] = c.Bytes
		}
	}
	for i, n := range hostileNames {
		if b, ok := got[n]; !ok || b != int64(5*(i+1)) {
			t.Errorf("log --json: %q has %d bytes (listed %v), want %d", n, b, ok, 5*(i+1))
		}
	}
	// The raw JSON carries the readable form and the exact bytes.
	for _, want := range []string{"\"path\": \"bad\ufffd\",", `"pathBytes": "YmFk/w=="`, `"pathBytes": "YmFk/g=="`} {
		if !strings.Contains(out, want) {
			t.Errorf("log --json lacks %s:\n%s", want, out)
		}
	}
	// The event log itself keeps them apart.
	log, err := os.ReadFile(filepath.Join(ws, ".zero", "events.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"pathBytes":"YmFk/w=="`, `"pathBytes":"YmFk/g=="`} {
		if !strings.Contains(string(log), want) {
			t.Errorf("events.jsonl lacks %s", want)
		}
	}
	// show and a full rewind find each by its own bytes.
	read := strings.Fields(mustRun(t, ws, "log", "--all"))[1] // the Read step (it changed nothing)
	for i, n := range []string{"bad\xff", "bad\xfe", "bad\ufffd"} {
		if got, want := mustRun(t, ws, "show", read, n), strings.Repeat("line\n", i+3); got != want {
			t.Errorf("show %s %q = %q, want %q", read, n, got, want)
		}
	}
	mustRun(t, ws, "rewind", "0")
	for _, n := range hostileNames {
		if _, err := os.Lstat(filepath.Join(ws, n)); err == nil {
			t.Errorf("rewind 0 left %q", n)
		}
	}
	mustRun(t, ws, "rewind", read)
	for i, n := range hostileNames {
		b, err := os.ReadFile(filepath.Join(ws, n))
		if want := strings.Repeat("line\n", i+1); err != nil || string(b) != want {
			t.Errorf("after rewind %s: %q = %q, %v; want %q", read, n, b, err, want)
		}
	}
}
