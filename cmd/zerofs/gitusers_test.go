package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/zerofs/zerofs/record"
)

// What git and jj users reach for: show STEP, diff of the current step,
// diff --stat, renames with their content diff, relative references.
func TestShowStepAndRelativeRefs(t *testing.T) {
	bothSourcesTidy(t, func(t *testing.T, ws string) {
		var entries []struct {
			Sequence record.Seq `json:"sequence"`
			Label    string     `json:"label"`
			Start    record.Seq `json:"start"`
		}
		json.Unmarshal([]byte(mustRun(t, ws, "log", "--json")), &entries)
		seqOf := map[string]record.Seq{}
		for _, e := range entries {
			seqOf[e.Label] = e.Sequence
		}
		bash := seqOf["Bash"]
		golden(t, "show-step-bash.txt", mustRun(t, ws, "show", itoa(bash)))
		// Any sequence inside the step names it, and so do relative refs:
		// Tidy is the current step (@), Read the one before (-1, @-1),
		// Bash the one before that (-2).
		if a, b := mustRun(t, ws, "show", itoa(bash+1)), mustRun(t, ws, "show", "-2"); a != b {
			t.Errorf("show %d and show -2 differ:\n%s\n%s", bash+1, a, b)
		}
		if got := mustRun(t, ws, "show", "@-2"); !strings.Contains(got, "  Bash\n") {
			t.Errorf("show @-2 is not the Bash step:\n%s", got)
		}
		if got := mustRun(t, ws, "show", "@"); !strings.Contains(got, "  Tidy\n") || !strings.Contains(got, "+package tidy") {
			t.Errorf("show @ is not the Tidy step:\n%s", got)
		}
		// -1 as a state is the state before the current step.
		if got := mustRun(t, ws, "show", "-1", "src/main.go"); got != "package main\n" {
			t.Errorf("show -1 src/main.go = %q", got)
		}
		// diff with no argument: what the current step changed.
		cur := mustRun(t, ws, "diff")
		if cur != mustRun(t, ws, "diff", "@-1") || !strings.Contains(cur, "-package main\n+package tidy\n") || strings.Contains(cur, "a.txt") {
			t.Errorf("diff (the current step):\n%s", cur)
		}
		golden(t, "diff-stat-0.txt", mustRun(t, ws, "diff", "--stat", "0"))
		if got := mustRun(t, ws, "rewind", "--dry-run", "-1"); !regexp.MustCompile(`^would rewind to \d+: restore 1, delete 0, skip 0\n  restore  src/main.go  \+1 -1\n$`).MatchString(got) {
			t.Errorf("rewind --dry-run -1: %q", got)
		}
		if got := mustRun(t, ws, "revert", "--dry-run", "@"); !strings.Contains(got, `would revert step `+itoa(seqOf["Tidy"])+` "Tidy"`) {
			t.Errorf("revert --dry-run @: %q", got)
		}
		wantFail(t, ws, 1, "-9: the history holds only 4 steps (the oldest is @-3)", "show", "-9")
		wantFail(t, ws, 2, `bad reference "@-z"`, "diff", "@-z")
	})
}

// A file moved and edited in one step is a rename with its content diff,
// not a deletion and an addition.
func TestDiffRenameWithEdit(t *testing.T) {
	s := newStore(t, map[string]string{"docs/guide.md": "# Guide\n\none\ntwo\nthree\nfour\nfive\n"})
	s.step("move and edit")
	s.change(func(ws string) error {
		if err := os.Rename(filepath.Join(ws, "docs/guide.md"), filepath.Join(ws, "docs/manual.md")); err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(ws, "docs/manual.md"), []byte("# Manual\n\none\ntwo\nthree\nfour\nfive\n"), 0o644)
	}, "docs/guide.md", "docs/manual.md")
	s.close()
	golden(t, "diff-rename-edit.txt", mustRun(t, s.ws, "diff"))
	golden(t, "diff-rename-edit-stat.txt", mustRun(t, s.ws, "diff", "--stat"))
}

func TestStatusAndVerifyJSON(t *testing.T) {
	s := buildHistory(t)
	var st map[string]any
	if err := json.Unmarshal([]byte(mustRun(t, s.ws, "status", "--json")), &st); err != nil {
		t.Fatal(err)
	}
	step, _ := st["step"].(map[string]any)
	if st["workspace"] != s.ws || st["mounted"] != false || st["steps"] != 3.0 || step["label"] != "Read" || st["inBacking"] != false {
		t.Errorf("status --json: %v", st)
	}
	var v struct {
		OK       bool       `json:"ok"`
		Events   record.Seq `json:"events"`
		Findings []any      `json:"findings"`
	}
	if err := json.Unmarshal([]byte(mustRun(t, s.ws, "verify", "--json")), &v); err != nil {
		t.Fatal(err)
	}
	if !v.OK || v.Events == 0 || v.Findings == nil || len(v.Findings) != 0 {
		t.Errorf("verify --json: %+v", v)
	}
	// Damage: exit 1, the findings as JSON on stdout.
	for id := range blobsOf(t, s.ws) {
		flipStored(t, s.ws, id, 0, false)
		break
	}
	r := zerofs(t, s.ws, "", "verify", "--json")
	var bad struct {
		OK       bool `json:"ok"`
		Findings []struct {
			Kind    string `json:"kind"`
			Message string `json:"message"`
		} `json:"findings"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &bad); err != nil || r.code != 1 || bad.OK || len(bad.Findings) == 0 || bad.Findings[0].Message == "" {
		t.Errorf("verify --json on damage: exit %d, %+v (%v), stderr %q", r.code, bad, err, r.stderr)
	}
}

func TestDurations(t *testing.T) {
	for _, tc := range []struct {
		in   string
		d    time.Duration
		back string
	}{
		{"7d", 7 * 24 * time.Hour, "7d"},
		{"2w", 14 * 24 * time.Hour, "14d"},
		{"1d12h", 36 * time.Hour, "1d12h"},
		{"36h", 36 * time.Hour, "1d12h"},
		{"90m", 90 * time.Minute, "1h30m"},
		{"168h", 168 * time.Hour, "7d"},
		{"5m", 5 * time.Minute, "5m"},
		{"45s", 45 * time.Second, "45s"},
		{"0", 0, "0"},
	} {
		d, err := parseDuration(tc.in)
		if err != nil || d != tc.d {
			t.Errorf("parseDuration(%q) = %v, %v; want %v", tc.in, d, err, tc.d)
		}
		if got := formatDuration(tc.d); got != tc.back {
			t.Errorf("formatDuration(%v) = %q, want %q", tc.d, got, tc.back)
		}
	}
	for _, bad := range []string{"", "7", "d", "7x", "-"} {
		if _, err := parseDuration(bad); err == nil {
			t.Errorf("parseDuration(%q) did not fail", bad)
		}
	}
	s := buildHistory(t)
	if out := mustRun(t, s.ws, "status"); !strings.Contains(out, "thin:      gc --thin-after 7d would thin nothing") {
		t.Errorf("status does not say durations as people write them:\n%s", out)
	}
}

// gc --dry-run says what a gc would do and changes nothing; after a cut,
// the forgotten steps are shown once, as the gc's entry.
func TestGCDryRunAndPrunedLog(t *testing.T) {
	s := newStore(t, map[string]string{"a.txt": "0\n"})
	for i := 1; i <= 5; i++ {
		s.step("edit " + itoa(record.Seq(i)))
		s.write("a.txt", strings.Repeat(itoa(record.Seq(i)), 100*i)+"\n")
		s.change(func(ws string) error {
			return os.WriteFile(filepath.Join(ws, "sedTMP"+itoa(record.Seq(i))), []byte("x"), 0o644)
		}, "sedTMP"+itoa(record.Seq(i)))
		s.change(func(ws string) error { return os.Remove(filepath.Join(ws, "sedTMP"+itoa(record.Seq(i)))) }, "sedTMP"+itoa(record.Seq(i)))
	}
	s.close()
	logBefore := mustRun(t, s.ws, "log")
	dry := mustRun(t, s.ws, "gc", "--dry-run", "--keep-steps", "2")
	if !regexp.MustCompile(`^would prune history before \d+: the states of 3 steps would go; would remove 3 blobs, free up to \d+ B\n$`).MatchString(dry) {
		t.Errorf("gc --dry-run --keep-steps 2: %q", dry)
	}
	if mustRun(t, s.ws, "log") != logBefore {
		t.Errorf("gc --dry-run changed the log")
	}
	out := mustRun(t, s.ws, "gc", "--keep-steps", "2")
	if !strings.Contains(out, "the states of 3 steps went") || strings.Contains(out, "-") {
		t.Errorf("gc --keep-steps 2: %q", out)
	}
	log := mustRun(t, s.ws, "log", "--stat")
	if strings.Contains(log, "sedTMP1") || strings.Contains(log, "edit 1") || strings.Contains(log, "edit 2") || strings.Count(log, "pruned history before") != 1 {
		t.Errorf("log after gc --keep-steps 2 still lists forgotten steps:\n%s", log)
	}
	if !strings.Contains(log, "edit 4") || !strings.Contains(log, "edit 5") {
		t.Errorf("log after gc lost kept steps:\n%s", log)
	}
	if got := freedWords(-449); got != "freed nothing (repacking what is kept took 449 B more)" {
		t.Errorf("freedWords(-449) = %q", got)
	}
}

// Colour only on a terminal, and never with NO_COLOR.
func TestNoColor(t *testing.T) {
	_, tty := ptyPair(t)
	t.Setenv("NO_COLOR", "")
	if !useColor(tty) {
		t.Fatalf("no colour on a terminal")
	}
	t.Setenv("NO_COLOR", "1")
	if useColor(tty) {
		t.Errorf("colour with NO_COLOR=1")
	}
}

// Rewinds are named for what they did, in log and log --json; a path that
// is nowhere is an error; a rewind that changes nothing records nothing.
func TestRewindNamesAndNoops(t *testing.T) {
	s := newStore(t, map[string]string{"README.md": "v0\n", "docs/a.md": "a\n"})
	s.step("Bash: rm -rf docs")
	s.change(func(ws string) error { return os.RemoveAll(filepath.Join(ws, "docs")) }, "docs/a.md", "docs")
	s.step("Edit README.md")
	s.write("README.md", "v1\n")
	s.close()
	var entries []struct {
		Sequence record.Seq `json:"sequence"`
		Label    string     `json:"label"`
		Title    string     `json:"title"`
	}
	json.Unmarshal([]byte(mustRun(t, s.ws, "log", "--json")), &entries)
	bash := entries[1].Sequence
	mustRun(t, s.ws, "revert", itoa(bash))
	mustRun(t, s.ws, "rewind", "0", "--", "README.md")
	log := mustRun(t, s.ws, "log")
	for _, want := range []string{`revert of step ` + itoa(bash) + ` "Bash: rm -rf docs": restored `, "restore README.md to 0: restored 1"} {
		if !strings.Contains(log, want) {
			t.Errorf("log lacks %q:\n%s", want, log)
		}
	}
	json.Unmarshal([]byte(mustRun(t, s.ws, "log", "--json")), &entries)
	if entries[0].Title != "restore README.md to 0" || entries[1].Title != `revert of step `+itoa(bash)+` "Bash: rm -rf docs"` {
		t.Errorf("log --json titles: %q, %q", entries[0].Title, entries[1].Title)
	}
	wantFail(t, s.ws, 1, "zerofs: no such path at 0 or now: nonexistent", "rewind", "0", "--", "nonexistent")
	if out := mustRun(t, s.ws, "rewind", "0", "--", "README.md"); out != "nothing to change: README.md is already as it would be\n" {
		t.Errorf("a rewind that changes nothing: %q", out)
	}
	if after := mustRun(t, s.ws, "log"); after != log {
		t.Errorf("a rewind that changed nothing was recorded:\n%s\nwas:\n%s", after, log)
	}
}

// TestRelativeRefsCountSteps: relative refs count steps as SPEC defines
// them (tool calls), never rewinds: after a rewind, @ is still the last
// step and -1 the step before it; the rewind itself is reached by its
// sequence.
func TestRelativeRefsCountSteps(t *testing.T) {
	bothSourcesTidy(t, func(t *testing.T, ws string) {
		before := map[string]string{}
		for _, r := range []string{"@", "-1", "-2", "@-3"} {
			before[r] = mustRun(t, ws, "show", r)
		}
		out := mustRun(t, ws, "rewind", "0", "--", "a.txt")
		if !strings.HasPrefix(out, "rewound a.txt to 0: restored 1") {
			t.Fatalf("rewind: %q", out)
		}
		for _, r := range []string{"@", "-1", "-2", "@-3"} {
			// The step's line (its sequence and label) is the same.
			if got := mustRun(t, ws, "show", r); firstLine(got) != firstLine(before[r]) {
				t.Errorf("show %s after a rewind:\n%s\nwant the same step as before it:\n%s", r, got, before[r])
			}
		}
		if !strings.Contains(before["@"], "  Tidy\n") || !strings.Contains(before["-1"], "  Read\n") || !strings.Contains(before["-2"], "  Bash\n") {
			t.Errorf("@, -1, -2 are not Tidy, Read, Bash:\n%s\n%s\n%s", before["@"], before["-1"], before["-2"])
		}
		wantFail(t, ws, 1, "-4: the history holds only 4 steps (the oldest is @-3)", "show", "-4")
		// The state -1 is the state before the current step: a.txt as
		// Edit left it, whatever the rewind did since.
		if got, want := mustRun(t, ws, "show", "-1", "a.txt"), mustRun(t, ws, "show", "@-1", "a.txt"); got != want || !strings.Contains(got, "BETA") {
			t.Errorf("show -1 a.txt = %q (@-1: %q), want Edit's a.txt", got, want)
		}
	})
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}
