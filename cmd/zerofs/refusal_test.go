package main

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/zerofs/zerofs/control"
	"github.com/zerofs/zerofs/history"
	"github.com/zerofs/zerofs/record"
)

// TestAdviseEveryRefusal: every kind of refusal the engine and the daemon
// hand back typed (control's refusal kinds) reads as one line that says
// what was refused and names what to do next (a zerofs command), as the
// mounted client rebuilds it from the daemon's report (control.Refusal)
// and as the engine gives it unmounted. testdata/refusals.txt is the
// golden: one block per refusal.
func TestAdviseEveryRefusal(t *testing.T) {
	var b strings.Builder
	kinds := map[record.Refusal]bool{}
	for _, tc := range refusalExamples() {
		line := advise(tc.err)
		kinds[record.RefusalOf(tc.err)] = true
		fmt.Fprintf(&b, "%s\nzerofs: %s\n\n", tc.name, oneLine(line))
		if !strings.Contains(line, "zerofs ") {
			t.Errorf("%s: %q names nothing to do next", tc.name, line)
		}
		if strings.Contains(line, "\n") {
			t.Errorf("%s: %q is more than one line", tc.name, line)
		}
		// As the mounted client sees it: rebuilt from the daemon's report.
		rep := control.ReportOf(record.RewindResult{}, tc.err)
		if rep.Error == "" {
			t.Errorf("%s: no refusal in the report", tc.name)
		}
		var se *history.SeqError
		if !errors.As(tc.err, &se) {
			if got := advise(rep.Err()); got != line {
				t.Errorf("%s: mounted and unmounted differ:\n%s\n%s", tc.name, got, line)
			}
		}
	}
	for _, k := range []record.Refusal{record.RefusedNothingToUndo, record.RefusedNothingToRedo, record.RefusedNoTurn,
		record.RefusedNoSuchSeq, record.RefusedPruned, record.RefusedThinned, record.RefusedConflict,
		record.RefusedNoSuchPath, record.RefusedBadRequest, record.RefusedFailed} {
		if !kinds[k] {
			t.Errorf("refusal %s has no example", k)
		}
	}
	golden(t, "refusals.txt", b.String())
}

type refusalExample struct {
	name string
	err  error
}

func refusalExamples() []refusalExample {
	step := &record.StepRef{Kind: "step", Sequence: 4, Label: "Bash"}
	return []refusalExample{
		{"nothing-to-undo", &record.RefusedError{Refusal: record.RefusedNothingToUndo}},
		{"nothing-to-redo", &record.RefusedError{Refusal: record.RefusedNothingToRedo}},
		{"no-turn", &record.RefusedError{Refusal: record.RefusedNoTurn, Op: "turn", Step: step,
			Msg: `no turn to undo: the last step in effect (4 "Bash") came before any prompt hook recorded a turn`}},
		{"no-such-seq", &record.RefusedError{Refusal: record.RefusedNoSuchSeq, Seq: 99, Head: 31}},
		{"no-such-seq (explained)", &history.SeqError{Seq: 99, Head: 31}},
		{"pruned", &record.RefusedError{Refusal: record.RefusedPruned, Seq: 3, Head: 31, PrunedBefore: 10}},
		{"pruned (explained)", &history.SeqError{Seq: 3, Head: 31, PrunedBefore: 10}},
		{"pruned (undo)", &record.RefusedError{Refusal: record.RefusedPruned, Seq: 3, Head: 31, PrunedBefore: 10, Op: "undo", Step: step}},
		{"thinned", &record.RefusedError{Refusal: record.RefusedThinned, Seq: 12, Head: 31, Thinned: &record.ThinInterval{After: 8, Before: 20}}},
		{"thinned (explained)", &history.SeqError{Seq: 12, Head: 31, Thinned: &record.ThinInterval{After: 8, Before: 20}}},
		{"thinned (redo)", &record.RefusedError{Refusal: record.RefusedThinned, Seq: 12, Head: 31, Op: "redo", Step: step,
			Thinned: &record.ThinInterval{After: 8, Before: 20}}},
		{"conflict", &record.ConflictError{Step: 4, Paths: []string{"a.txt", "b c.txt"}}},
		{"no-such-path", &record.RefusedError{Refusal: record.RefusedNoSuchPath, Seq: 0, Missing: []string{"nonexistent", "tab\there"}}},
		{"bad-request", &record.RefusedError{Refusal: record.RefusedBadRequest, Msg: "rewind: bad request: paths go with a target only"}},
		{"failed", &record.RefusedError{Refusal: record.RefusedFailed, Msg: "blobstore: blob not found: 1f2e"}},
	}
}

// TestRefusalsCLIGolden: each refusal a person can meet from the command
// line, as the command prints it, unmounted (the engine refuses: the
// golden, testdata/refusals-cli.txt) and mounted (the daemon refuses,
// typed, and the client words it): the same words. (Mounted, a stash's
// naming event may land anywhere among the steps, so there the sequence
// numbers are masked.) None of them records anything.
func TestRefusalsCLIGolden(t *testing.T) {
	var unmounted string
	bothSourcesTidy(t, func(t *testing.T, ws string) {
		mounted := false
		if st, ok := history.ReadStatus(ws); ok && st.PID > 0 {
			mounted = true
		}
		var b strings.Builder
		say := func(code int, args ...string) {
			t.Helper()
			r := zerofs(t, ws, "", args...)
			if r.code != code {
				t.Fatalf("zerofs %s: exit %d, want %d (stdout %q, stderr %q)", strings.Join(args, " "), r.code, code, r.stdout, r.stderr)
			}
			fmt.Fprintf(&b, "$ zerofs %s\n%s%s", strings.Join(args, " "), r.stdout, r.stderr)
		}
		log := mustRun(t, ws, "log", "--all")
		say(1, "redo")
		say(1, "rewind", "999")
		say(1, "revert", "999")
		say(1, "show", "999")
		say(1, "rewind", "0", "--", "nonexistent")
		say(1, "rewind", "0", "--", "a.txt", "no/such/dir")
		say(1, "undo", "--turn")
		say(1, "rewind", "--before-turn", "3")
		if after := mustRun(t, ws, "log", "--all"); after != log {
			t.Fatalf("a refused request was recorded:\n%s\nwas:\n%s", after, log)
		}
		say(0, "rewind", "0", "--", "a.txt")
		say(1, "revert", "1")
		say(0, "undo")
		mustRun(t, ws, "gc", "--before", "10")
		say(1, "rewind", "3")
		say(0, "undo")
		say(1, "undo", "--dry-run")
		if !mounted {
			unmounted = b.String()
			golden(t, "refusals-cli.txt", unmounted)
			return
		}
		digits := regexp.MustCompile(`[0-9]+`)
		if got, want := digits.ReplaceAllString(b.String(), "N"), digits.ReplaceAllString(unmounted, "N"); got != want {
			t.Errorf("mounted, the refusals read differently:\n%s\nunmounted:\n%s", b.String(), unmounted)
		}
	})
	// Nothing to undo: a workspace with no history yet.
	t.Run("empty", func(t *testing.T) {
		s := newStore(t, map[string]string{"a": "a\n"})
		s.close()
		r := wantFail(t, s.ws, 1, "zerofs: nothing to undo: ", "undo")
		golden(t, "refusals-cli-empty.txt", r.stderr)
	})
}
