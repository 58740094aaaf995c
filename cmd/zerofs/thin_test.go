package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/zerofs/zerofs/control"
	"github.com/zerofs/zerofs/record"
	"github.com/zerofs/zerofs/rewind"
)

// oldStep is one step of buildOldDays: where it began, and a.txt in the
// state it began from.
type oldStep struct {
	seq   record.Seq
	first bool // the first step of its UTC day
	a     string
}

// buildOldDays makes a workspace whose history is three steps a day on six
// days that ended more than five days ago (the engine's clock set back),
// then one step an hour ago. Each step rewrites a.txt and 4 KiB of b.bin.
// It returns the workspace, the old steps, and the cut `gc --thin-after
// 72h` thins before (the state an hour ago).
func buildOldDays(t *testing.T) (ws string, steps []oldStep, cut record.Seq) {
	t.Helper()
	ctx := context.Background()
	ws = filepath.Join(t.TempDir(), "ws")
	writeFile(t, filepath.Join(ws, "a.txt"), "start\n")
	dir, err := os.Open(ws)
	if err != nil {
		t.Fatal(err)
	}
	defer dir.Close()
	now := time.Now().UTC()
	clock := now.Truncate(24 * time.Hour).Add(-11 * 24 * time.Hour)
	eng, err := rewind.Open(ctx, dir, rewind.Options{StoreDir: filepath.Join(ws, record.StoreName), Now: func() time.Time { return clock }})
	if err != nil {
		t.Fatal(err)
	}
	a := "start\n"
	write := func(p string, b []byte) {
		release, _, err := eng.Begin(ctx, rewind.Caller{PID: 4242, Comm: "test"}, rewind.Change{Path: p})
		if err != nil {
			t.Fatal(err)
		}
		defer release()
		if err := os.WriteFile(filepath.Join(ws, p), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for day := range 6 {
		for i := range 3 {
			clock = now.Truncate(24*time.Hour).AddDate(0, 0, day-11).Add(time.Duration(9+3*i) * time.Hour)
			ev, err := eng.BeginStep(ctx, fmt.Sprintf("day %d step %d", day, i), nil)
			if err != nil {
				t.Fatal(err)
			}
			steps = append(steps, oldStep{seq: ev.Seq, first: i == 0, a: a})
			a = fmt.Sprintf("day %d step %d\n", day, i)
			write("a.txt", []byte(a))
			b := make([]byte, 4096)
			rand.NewChaCha8([32]byte{byte(day), byte(i)}).Read(b)
			write("b.bin", b)
		}
	}
	clock = now.Add(-time.Hour)
	ev, err := eng.BeginStep(ctx, "recent", nil)
	if err != nil {
		t.Fatal(err)
	}
	write("a.txt", []byte("recent\n"))
	if err := eng.Close(); err != nil {
		t.Fatal(err)
	}
	return ws, steps, ev.Seq - 1
}

// wantThinGC checks the output of the first `gc --thin-after 72h` over
// buildOldDays' history: six intervals (one from each day's first step to
// the next day's, the last to the cut), the states of two steps in each.
func wantThinGC(t *testing.T, out string, steps []oldStep, cut record.Seq) {
	t.Helper()
	want := []string{fmt.Sprintf("thinned history before %d to one state a day: 6 intervals went (the states of 12 steps, ", cut)}
	for day := range 6 {
		after, before := steps[3*day].seq, cut
		if day < 5 {
			before = steps[3*day+3].seq
		}
		want = append(want, fmt.Sprintf("  gone: @%d..@%d (kept @%d and @%d): 2 steps, ", after+1, before-1, after, before))
	}
	for _, w := range want {
		if !strings.Contains(out, w) {
			t.Errorf("gc --thin-after 72h lacks %q:\n%s", w, out)
		}
	}
	if strings.Contains(out, "removed 0 blobs") || !strings.Contains(out, "removed ") {
		t.Errorf("gc --thin-after 72h freed nothing:\n%s", out)
	}
}

// TestGCThinAfter: `zerofs gc --thin-after 72h` keeps, of the history
// older than 72h, the state each day's first step began from, and gives up
// the rest: show and rewind refuse those states, naming the thin; log
// marks the steps and the gc; verify agrees; status says beforehand what
// it would give up and free, and afterwards what was thinned; a second
// run thins nothing.
func TestGCThinAfter(t *testing.T) {
	ws, steps, cut := buildOldDays(t)
	wantFail(t, ws, 2, "--thin-after must be positive", "gc", "--thin-after", "-1h")
	if out := mustRun(t, ws, "gc", "--help"); !strings.Contains(out, "--thin-after DURATION") || !strings.Contains(out, "one\n                     state a day") {
		t.Errorf("gc --help does not explain --thin-after:\n%s", out)
	}
	st := mustRun(t, ws, "status", "--thin-after", "72h")
	if !strings.Contains(st, "thin:      gc --thin-after 3d would give up the states of 12 steps") {
		t.Errorf("status before the thin:\n%s", st)
	}
	before := mustRun(t, ws, "show", strconv.FormatUint(uint64(steps[1].seq), 10), "a.txt")
	if before != steps[1].a {
		t.Fatalf("show before the thin: %q, want %q", before, steps[1].a)
	}
	out := mustRun(t, ws, "gc", "--thin-after", "72h")
	t.Logf("status before:\n%s\ngc --thin-after 72h:\n%s", st, out)
	wantThinGC(t, out, steps, cut)
	for _, s := range steps {
		seq := strconv.FormatUint(uint64(s.seq), 10)
		if s.first {
			if got := mustRun(t, ws, "show", seq, "a.txt"); got != s.a {
				t.Errorf("show %s a.txt (a day's first step): %q, want %q", seq, got, s.a)
			}
			continue
		}
		wantFail(t, ws, 1, "was thinned to one state a day", "show", seq, "a.txt")
	}
	wantFail(t, ws, 1, "was thinned to one state a day", "rewind", strconv.FormatUint(uint64(steps[1].seq), 10))
	// A revert needs the states before and after its step: a day's first
	// step keeps the one before it, not the one after.
	wantFail(t, ws, 1, "was thinned to one state a day", "revert", strconv.FormatUint(uint64(steps[1].seq), 10))
	wantFail(t, ws, 1, "the states after "+strconv.FormatUint(uint64(steps[3].seq), 10)+" were thinned to one state a day", "revert", strconv.FormatUint(uint64(steps[3].seq), 10))
	// The retention window is whole: the state at the cut, and after.
	if got := mustRun(t, ws, "show", strconv.FormatUint(uint64(cut), 10), "a.txt"); got != "day 5 step 2\n" {
		t.Errorf("show %d a.txt (the cut): %q", cut, got)
	}
	log := mustRun(t, ws, "log")
	t.Logf("log --stat -n 4 after the thin:\n%s", mustRun(t, ws, "log", "--stat", "-n", "4"))
	for _, w := range []string{fmt.Sprintf("thinned history before %d to one state a day: 6 intervals, the states of 12 steps went", cut),
		"day 0 step 1 (thinned)"} {
		if !strings.Contains(log, w) {
			t.Errorf("log lacks %q:\n%s", w, log)
		}
	}
	if out := mustRun(t, ws, "log", "--json", "-n", "1"); !strings.Contains(out, `"thinned": {`) || !strings.Contains(out, `"records": 24`) {
		t.Errorf("log --json of the thin:\n%s", out)
	}
	if out := mustRun(t, ws, "verify"); !strings.HasPrefix(out, "ok: ") {
		t.Errorf("verify after the thin: %q", out)
	}
	st = mustRun(t, ws, "status", "--thin-after", "72h")
	for _, w := range []string{"thinned:   6 intervals of old history keep one state a day", "thin:      gc --thin-after 3d would thin nothing",
		"gc:        would free up to 0 B"} {
		if !strings.Contains(st, w) {
			t.Errorf("status after the thin lacks %q:\n%s", w, st)
		}
	}
	if out := mustRun(t, ws, "gc", "--thin-after", "72h"); !strings.Contains(out, "nothing thinned") || !strings.Contains(out, "removed 0 blobs") {
		t.Errorf("a second gc --thin-after 72h: %q", out)
	}
}

// TestGCThinAfterMounted: the same thin through a mount (.zero/gc): the
// views of the states it gave up no longer exist, those of the days' first
// steps read back, and a rewind to a state gone is refused.
func TestGCThinAfterMounted(t *testing.T) {
	built.NeedFUSE(t)
	ws, steps, cut := buildOldDays(t)
	mountT(t, ws)
	gone := filepath.Join(ws, "@"+strconv.FormatUint(uint64(steps[1].seq), 10))
	if got := readTrim(t, filepath.Join(gone, "a.txt")); got+"\n" != steps[1].a {
		t.Fatalf("%s/a.txt before the thin: %q, want %q", gone, got, steps[1].a)
	}
	wantThinGC(t, binOK(t, ws, "gc", "--thin-after", "72h"), steps, cut)
	for _, s := range steps {
		view := filepath.Join(ws, "@"+strconv.FormatUint(uint64(s.seq), 10))
		if s.first {
			if got := readTrim(t, filepath.Join(view, "a.txt")); got+"\n" != s.a {
				t.Errorf("%s/a.txt (a day's first step): %q, want %q", view, got, s.a)
			}
			continue
		}
		if _, err := os.Stat(view); !errors.Is(err, syscall.ENOENT) {
			t.Errorf("stat %s after the thin: %v, want ENOENT", view, err)
		}
	}
	seq := func(s record.Seq) string { return strconv.FormatUint(uint64(s), 10) }
	// The CLI's words: the interval that holds the state, and the two kept.
	if r := bin(t, ws, "", "rewind", seq(steps[1].seq)); r.code != 1 || r.stderr != fmt.Sprintf("zerofs: no sequence %d: history between %d and %d was thinned to one state a day (%d and %d remain): zerofs rewind %d or %d goes to the nearest state kept\n",
		steps[1].seq, steps[0].seq, steps[3].seq, steps[0].seq, steps[3].seq, steps[0].seq, steps[3].seq) {
		t.Errorf("rewind to a state gone, mounted: exit %d, stderr %q", r.code, r.stderr)
	}
	if r := bin(t, ws, "", "revert", seq(steps[3].seq)); r.code != 1 || !strings.Contains(r.stderr, "were thinned to one state a day") {
		t.Errorf("revert of a step whose later states went, mounted: exit %d, stderr %q", r.code, r.stderr)
	}
	// .zero/rewind: EINVAL, and on the handle that wrote it the typed
	// refusal with the thinned interval; nothing changed.
	head := readTrim(t, filepath.Join(ws, ".zero", "head"))
	f, err := os.OpenFile(filepath.Join(ws, ".zero", "rewind"), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Write([]byte(seq(steps[1].seq) + "\n")); !errors.Is(err, syscall.EINVAL) {
		t.Errorf("writing a state gone to .zero/rewind: %v, want EINVAL", err)
	}
	b := make([]byte, 1<<16)
	n, _ := f.ReadAt(b, 0)
	rep, err := control.ParseRewindReport(b[:n])
	if err != nil || rep.Error != string(record.RefusedThinned) || rep.Requested != steps[1].seq || rep.Interval == nil ||
		rep.Interval.After != steps[0].seq || rep.Interval.Before != steps[3].seq || !strings.Contains(rep.Message, "thinned to one state a day") {
		t.Errorf("the refusal read back from .zero/rewind: %q (%v)", b[:n], err)
	}
	if !errors.Is(rep.Err(), record.ErrNoSuchSeq) {
		t.Errorf("the refusal's error %v is not record.ErrNoSuchSeq", rep.Err())
	}
	if after := readTrim(t, filepath.Join(ws, ".zero", "head")); after != head {
		t.Errorf("a refused rewind moved head from %s to %s", head, after)
	}
	if log := binOK(t, ws, "log"); !strings.Contains(log, "thinned history before") {
		t.Errorf("log through the mount:\n%s", log)
	}
	if out := binOK(t, ws, "verify"); !strings.HasPrefix(out, "ok: ") {
		t.Errorf("verify through the mount: %q", out)
	}
}
