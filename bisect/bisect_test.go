package bisect_test

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/zerofs/zerofs/bisect"
	"github.com/zerofs/zerofs/history"
	"github.com/zerofs/zerofs/record"
	"github.com/zerofs/zerofs/rewind"
)

// build makes a workspace whose history has n steps ("step 1" .. "step n"),
// the k-th of which breaks flag.txt (0: none does) and also changes other
// files (common.txt, which earlier steps changed too, and a new directory);
// every other step writes a file of its own, and each after k removes one
// an earlier step wrote, a directory's included, touching nothing step k
// did. It returns the workspace, unmounted.
func build(t *testing.T, n, k int, after ...func(e *rewind.Engine, i int)) string {
	t.Helper()
	ctx := context.Background()
	ws := filepath.Join(t.TempDir(), "ws")
	must(t, os.MkdirAll(filepath.Join(ws, "src"), 0o755))
	write(t, ws, "flag.txt", "ok\n")
	write(t, ws, "common.txt", "0\n")
	write(t, ws, "src/keep.go", "package src\n")
	root, err := os.Open(ws)
	must(t, err)
	defer root.Close()
	e, err := rewind.Open(ctx, root, rewind.Options{StoreDir: filepath.Join(ws, record.StoreName)})
	must(t, err)
	change := func(paths ...string) func() {
		var cs []rewind.Change
		for _, p := range paths {
			cs = append(cs, rewind.Change{Path: p})
		}
		release, _, err := e.Begin(ctx, rewind.Caller{PID: os.Getpid(), Comm: "test"}, cs...)
		must(t, err)
		return release
	}
	for i := 1; i <= n; i++ {
		if _, err := e.BeginStep(ctx, fmt.Sprintf("step %d", i), nil); err != nil {
			t.Fatal(err)
		}
		own := fmt.Sprintf("s%d.txt", i)
		switch {
		case i == k:
			release := change("flag.txt", "common.txt", "k", "k/deep", "k/deep/f.txt")
			write(t, ws, "flag.txt", "broken\n")
			write(t, ws, "common.txt", fmt.Sprintf("%d\n", i))
			must(t, os.MkdirAll(filepath.Join(ws, "k/deep"), 0o755))
			write(t, ws, "k/deep/f.txt", "made by the bad step\n")
			release()
		case i < k:
			release := change(own, "common.txt", fmt.Sprintf("d%d", i), fmt.Sprintf("d%d/x", i))
			write(t, ws, own, fmt.Sprintf("%d\n", i))
			write(t, ws, "common.txt", fmt.Sprintf("%d\n", i))
			must(t, os.Mkdir(filepath.Join(ws, fmt.Sprintf("d%d", i)), 0o755))
			write(t, ws, fmt.Sprintf("d%d/x", i), "x\n")
			release()
		default:
			paths := []string{own}
			gone := ""
			if j := i - k; k > 0 && j >= 1 && j < k {
				gone = fmt.Sprintf("d%d", j)
				paths = append(paths, gone+"/x", gone)
			}
			release := change(paths...)
			write(t, ws, own, fmt.Sprintf("%d\n", i))
			if gone != "" {
				must(t, os.RemoveAll(filepath.Join(ws, gone)))
			}
			release()
		}
		for _, f := range after {
			f(e, i)
		}
	}
	must(t, e.Close())
	return ws
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func write(t *testing.T, ws, p, s string) {
	t.Helper()
	must(t, os.WriteFile(filepath.Join(ws, p), []byte(s), 0o644))
}

// snapshot is everything bisect must leave as it was: every file's path,
// mode and content in the workspace, and the store's log.
func snapshot(t *testing.T, ws string) string {
	t.Helper()
	h := sha256.New()
	err := filepath.WalkDir(ws, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(ws, p)
		if strings.HasPrefix(rel, record.StoreName+"/") && rel != filepath.Join(record.StoreName, "events.jsonl") {
			return nil // the store's other files (locks, index snapshots) may change as it opens
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		fmt.Fprintf(h, "%s %v\n", rel, fi.Mode())
		if d.Type().IsRegular() {
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			h.Write(b)
		}
		return nil
	})
	must(t, err)
	return fmt.Sprintf("%x", h.Sum(nil))
}

func open(t *testing.T, ws string) history.Source {
	t.Helper()
	w, err := history.Find(ws)
	must(t, err)
	src, err := history.Open(context.Background(), w, history.Options{})
	must(t, err)
	t.Cleanup(func() { src.Close() })
	return src
}

// bitsFor is ceil(log2(x)).
func bitsFor(x int) int {
	n := 0
	for 1<<n < x {
		n++
	}
	return n
}

// TestBisectFindsPlantedStep plants the breaking change in step k of n
// (k also changing other files, the steps after it touching nothing it
// did) for several k and n up to 200: bisect names step k, in at most
// ceil(log2(n+1))+1 probes, each run in a scratch directory that holds
// exactly the state probed, and leaves the workspace, its head and its log
// as they were.
func TestBisectFindsPlantedStep(t *testing.T) {
	cases := []struct{ n, k int }{
		{1, 1}, {2, 1}, {2, 2}, {3, 2}, {7, 4}, {40, 1}, {40, 17}, {40, 40}, {200, 1}, {200, 137}, {200, 200},
	}
	for _, tc := range cases {
		t.Run(fmt.Sprintf("k%d_of_%d", tc.k, tc.n), func(t *testing.T) {
			ws := build(t, tc.n, tc.k)
			before := snapshot(t, ws)
			src := open(t, ws)
			head, _ := src.Head()
			// The command checks the flag, and keeps a listing of the
			// scratch copy it ran in, to compare with the state probed.
			dumps := t.TempDir()
			script := dumpScript + `grep -qx ok flag.txt`
			rep, err := bisect.Run(context.Background(), src, bisect.Options{
				Argv:    []string{"sh", "-c", script, "sh", dumps},
				Scratch: t.TempDir(),
			})
			if err != nil {
				t.Fatalf("Run: %v", err)
			}
			if rep.FirstBad.Label != fmt.Sprintf("step %d", tc.k) {
				t.Errorf("first bad step %d %q, want \"step %d\"", rep.FirstBad.Seq, rep.FirstBad.Label, tc.k)
			}
			if max := bitsFor(tc.n+1) + 1; len(rep.Probes) > max {
				t.Errorf("%d probes, want at most %d", len(rep.Probes), max)
			}
			if rep.Steps != tc.n {
				t.Errorf("searched %d steps, want %d", rep.Steps, tc.n)
			}
			for _, p := range rep.Probes {
				got, err := os.ReadFile(filepath.Join(dumps, fmt.Sprint(p.State)))
				must(t, err)
				if want := listAt(t, src, p.State); string(got) != want {
					t.Errorf("the scratch copy probed as state %d holds\n%s\nwant\n%s", p.State, got, want)
				}
			}
			if h, _ := src.Head(); h != head {
				t.Errorf("head %d, was %d", h, head)
			}
			must(t, src.Close())
			if after := snapshot(t, ws); after != before {
				t.Error("bisect changed the workspace or its log")
			}
		})
	}
}

// dumpScript writes a listing of the directory it runs in (but the fork's
// store) to $1/$ZEROFS_BISECT_STATE: each path, its kind, and a file's
// sha256, sorted.
const dumpScript = `{
  find . -path ./.zero -prune -o -type d -print | sed 1d | sed 's|$| d|'
  find . -path ./.zero -prune -o -type l -print | sed 's|$| l|'
  find . -path ./.zero -prune -o -type f -exec sha256sum {} + | awk '{print $2 " f " $1}'
} | sed 's|^\./||' | LC_ALL=C sort > "$1/$ZEROFS_BISECT_STATE"
`

// listAt is the listing dumpScript writes, of the state at t.
func listAt(t *testing.T, src history.Source, at record.Seq) string {
	t.Helper()
	var lines []string
	var walk func(dir string)
	walk = func(dir string) {
		names, err := src.List(dir, at)
		must(t, err)
		for _, name := range names {
			p := name
			if dir != "" {
				p = dir + "/" + name
			}
			n, err := src.Stat(p, at)
			must(t, err)
			switch n.Kind {
			case record.KindDir:
				lines = append(lines, p+" d")
				walk(p)
			case record.KindSymlink:
				lines = append(lines, p+" l")
			default:
				b, err := src.Content(p, at)
				must(t, err)
				lines = append(lines, fmt.Sprintf("%s f %x", p, sha256.Sum256(b)))
			}
		}
	}
	walk("")
	sort.Strings(lines)
	return strings.Join(lines, "\n") + "\n"
}

// TestBisectEnds: a command that does not fail at the newest state, or
// fails at the oldest too, names no step (ErrNotBad, ErrBadAtOldest); one
// that skips every state names the steps it could not tell apart; a probe
// past its timeout counts as bad.
func TestBisectEnds(t *testing.T) {
	ws := build(t, 9, 5)
	src := open(t, ws)
	run := func(script string, opts bisect.Options) (bisect.Report, error) {
		opts.Argv, opts.Scratch = []string{"sh", "-c", script}, t.TempDir()
		return bisect.Run(context.Background(), src, opts)
	}
	if _, err := run("true", bisect.Options{}); !errors.Is(err, bisect.ErrNotBad) {
		t.Errorf("a command that passes at the newest state: %v, want ErrNotBad", err)
	}
	rep, err := run("false", bisect.Options{})
	if !errors.Is(err, bisect.ErrBadAtOldest) {
		t.Errorf("a command that fails everywhere: %v, want ErrBadAtOldest", err)
	}
	var se *bisect.SearchError
	if !errors.As(err, &se) || len(se.Report.Probes) > bitsFor(10)+1 || se.Report.Probes[len(se.Report.Probes)-1].State != se.Report.Good {
		t.Errorf("ErrBadAtOldest's probes: %+v (report %+v)", se, rep)
	}
	// Skips: every state but the newest and the oldest says 125.
	_, err = run(`test -f s9.txt && exit 1; test -f s1.txt && exit 125; exit 0`, bisect.Options{})
	if !errors.As(err, &se) || !errors.Is(err, bisect.ErrOnlySkipped) || len(se.Candidates) != 9 {
		t.Errorf("only skips: %v, candidates %+v", err, se)
	}
	// A skip beside the first bad step is stepped around.
	rep, err = run(`grep -qx ok flag.txt && exit 0; test -f s6.txt && ! test -f s7.txt && exit 125; exit 1`, bisect.Options{})
	skipped := false
	for _, p := range rep.Probes {
		skipped = skipped || p.Verdict == bisect.Skip
	}
	if err != nil || rep.FirstBad.Label != "step 5" || !skipped {
		t.Errorf("with a skip: %v, first bad %+v, probes %+v", err, rep.FirstBad, rep.Probes)
	}
	// A timeout is bad: the command hangs once the flag is broken.
	rep, err = run(`grep -qx ok flag.txt || sleep 30`, bisect.Options{Timeout: 300e6})
	if err != nil || rep.FirstBad.Label != "step 5" || rep.Probes[0].Verdict != bisect.Timeout {
		t.Errorf("with a timeout: %v, first bad %+v, probes %+v", err, rep.FirstBad, rep.Probes)
	}
	// --good and --bad bound it; 128 and above stops the search.
	rep, err = run(`grep -qx ok flag.txt`, bisect.Options{Good: 3})
	if err != nil || rep.FirstBad.Label != "step 5" || rep.Good != 3 {
		t.Errorf("--good 3: %v, %+v", err, rep)
	}
	if _, err := run(`kill -9 $$`, bisect.Options{}); !errors.Is(err, bisect.ErrAbort) {
		t.Errorf("a command killed by a signal: %v, want ErrAbort", err)
	}
}

// TestBisectChecksRecordedResults: an ok result the history holds for the
// same command (an agent ran it and it passed) narrows the search, and is
// probed before it is trusted: one recorded before the bad step saves
// probes below it; one recorded after it (the agent's run passed, but the
// state is bad now) changes nothing of the answer.
func TestBisectChecksRecordedResults(t *testing.T) {
	const script = "grep -qx ok flag.txt"
	argv := []string{"sh", "-c", script}
	ranAt := func(at int) func(e *rewind.Engine, i int) {
		return func(e *rewind.Engine, i int) {
			if i != at {
				return
			}
			ev, err := e.BeginStep(context.Background(), strings.Join(argv, " "), nil)
			must(t, err)
			if _, _, err := e.RecordResult(context.Background(), record.ToolResultPayload{Step: ev.Seq, Status: "ok"}); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, tc := range []struct {
		name string
		at   int
	}{{"before the bad step", 30}, {"after the bad step", 45}} {
		t.Run(tc.name, func(t *testing.T) {
			ws := build(t, 60, 40, ranAt(tc.at))
			src := open(t, ws)
			rep, err := bisect.Run(context.Background(), src, bisect.Options{Argv: argv, Scratch: t.TempDir()})
			if err != nil || rep.FirstBad.Label != "step 40" {
				t.Fatalf("first bad %+v, err %v; want step 40", rep.FirstBad, err)
			}
			if tc.at < 40 {
				// Nothing below the vouched-for state was probed, and the
				// search took fewer probes than over all 60 steps (7).
				for _, p := range rep.Probes {
					if p.Candidate == nil {
						t.Errorf("probed the oldest state %d", p.State)
					} else if n, _ := strconv.Atoi(strings.TrimPrefix(p.Candidate.Label, "step ")); n < 30 {
						t.Errorf("probed %d (%s) below the recorded ok result", p.State, p.Candidate.Label)
					}
				}
				if len(rep.Probes) > 1+bitsFor(60-30) {
					t.Errorf("%d probes with the result's help, want at most %d", len(rep.Probes), 1+bitsFor(60-30))
				}
			}
		})
	}
}
