package rewind

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/zerofs/zerofs/record"
)

// capturedPaths lists every path any checkpoint in e's log names.
func capturedPaths(t *testing.T, e *Engine) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	for ev, err := range e.Log().Events(1) {
		if err != nil {
			t.Fatal(err)
		}
		if ev.Type != record.TypeCheckpoint {
			continue
		}
		var cp record.Checkpoint
		if err := json.Unmarshal(ev.Payload, &cp); err != nil {
			t.Fatal(err)
		}
		for _, f := range cp.Files {
			out[f.Path] = true
		}
	}
	return out
}

func writeT(t *testing.T, p, s string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
}

func readT(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestIgnoredNeverCapturedNorRewound: with --ignore node_modules/, an
// npm-ci-like unpack is never captured, and a rewind to before it takes
// back the lock file but leaves node_modules as it is; a directory the
// rewind removes keeps the ignored tree inside it.
func TestIgnoredNeverCapturedNorRewound(t *testing.T) {
	ctx := context.Background()
	e, ws := openT(t, Options{Ignore: []string{"node_modules/"}})
	s, err := e.BeginStep(ctx, "npm ci", nil)
	if err != nil {
		t.Fatal(err)
	}
	change(t, e, func() error { return os.WriteFile(filepath.Join(ws, "package-lock.json"), []byte("{}"), 0o644) }, Change{Path: "package-lock.json"})
	for _, d := range []string{"node_modules", "web", "web/node_modules", "web/node_modules/x"} {
		change(t, e, func() error { return os.Mkdir(filepath.Join(ws, d), 0o755) }, Change{Path: d, Dir: true})
	}
	for _, f := range []string{"node_modules/a.js", "web/index.js", "web/node_modules/x/b.js"} {
		change(t, e, func() error { return os.WriteFile(filepath.Join(ws, f), []byte(f), 0o644) }, Change{Path: f})
	}
	got := capturedPaths(t, e)
	for _, p := range []string{"package-lock.json", "web", "web/index.js"} {
		if !got[p] {
			t.Errorf("%s was not captured", p)
		}
	}
	for p := range got {
		if strings.Contains(p, "node_modules") {
			t.Errorf("%s was captured; node_modules/ is ignored", p)
		}
	}
	dry, err := e.Apply(ctx, record.Request{Target: s.Seq, DryRun: true})
	if err != nil {
		t.Fatal(err)
	}
	var previewed []string
	for _, c := range dry.Preview {
		previewed = append(previewed, c.Path)
	}
	if got := strings.Join(previewed, " "); got != "package-lock.json web/index.js" {
		t.Errorf("dry run previews %q, want the lock file and web/index.js (web/ stays)", got)
	}
	res, err := e.Rewind(ctx, s.Seq)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"package-lock.json", "web/index.js"} {
		if _, err := os.Lstat(filepath.Join(ws, p)); !os.IsNotExist(err) {
			t.Errorf("%s after the rewind: %v, want it gone", p, err)
		}
	}
	for _, f := range []string{"node_modules/a.js", "web/node_modules/x/b.js"} {
		if got := readT(t, filepath.Join(ws, f)); got != f {
			t.Errorf("%s after the rewind: got %q, want it left as it was", f, got)
		}
	}
	if res.Report.Deleted != 2 || res.Report.Restored != 0 {
		t.Errorf("report: got %+v, want 2 deleted (the lock file and web/index.js)", res.Report)
	}
	for p := range capturedPaths(t, e) {
		if strings.Contains(p, "node_modules") {
			t.Errorf("the rewind captured %s", p)
		}
	}
	// Undone, the rewind brings back what it removed.
	last, _, _ := e.LastRewind()
	if _, err := e.Rewind(ctx, last.CheckpointSequence-1); err != nil {
		t.Fatal(err)
	}
	if got := readT(t, filepath.Join(ws, "web/index.js")); got != "web/index.js" {
		t.Errorf("web/index.js after undoing the rewind: %q", got)
	}
}

// TestZeroignoreIsRecordedAndReread: .zeroignore is captured like any
// file, its patterns apply from the next capture on, and a rewind that
// takes it away brings back recording of everything.
func TestZeroignoreIsRecordedAndReread(t *testing.T) {
	ctx := context.Background()
	e, ws := openT(t, Options{})
	if st := e.IgnoreStatus(); st.Patterns != 0 || st.Err != "" {
		t.Fatalf("no .zeroignore: got %+v", st)
	}
	s, err := e.BeginStep(ctx, "ignore build", nil)
	if err != nil {
		t.Fatal(err)
	}
	// .zeroignore ignoring everything still does not ignore itself.
	change(t, e, func() error {
		return os.WriteFile(filepath.Join(ws, record.IgnoreFile), []byte("build/\n*\n!src/\n!src/**\n"), 0o644)
	}, Change{Path: record.IgnoreFile})
	change(t, e, func() error { return os.Mkdir(filepath.Join(ws, "build"), 0o755) }, Change{Path: "build", Dir: true})
	change(t, e, func() error { return os.WriteFile(filepath.Join(ws, "build/out"), []byte("o"), 0o644) }, Change{Path: "build/out"})
	change(t, e, func() error { return os.WriteFile(filepath.Join(ws, "junk"), []byte("j"), 0o644) }, Change{Path: "junk"})
	if st := e.IgnoreStatus(); st.Patterns != 4 || len(st.File) != 4 {
		t.Fatalf("status after writing .zeroignore: got %+v, want 4 patterns from the file", st)
	}
	if _, err := e.BeginStep(ctx, "edit", nil); err != nil {
		t.Fatal(err)
	}
	change(t, e, func() error { return os.WriteFile(filepath.Join(ws, record.IgnoreFile), []byte("*.log\n"), 0o644) }, Change{Path: record.IgnoreFile})
	change(t, e, func() error { return os.WriteFile(filepath.Join(ws, "build/out"), []byte("o2"), 0o644) }, Change{Path: "build/out"})
	change(t, e, func() error { return os.WriteFile(filepath.Join(ws, "x.log"), []byte("l"), 0o644) }, Change{Path: "x.log"})
	got := capturedPaths(t, e)
	for _, p := range []string{record.IgnoreFile, "build/out"} {
		if !got[p] {
			t.Errorf("%s was not captured", p)
		}
	}
	for _, p := range []string{"build", "junk", "x.log"} {
		if got[p] {
			t.Errorf("%s was captured while ignored", p)
		}
	}
	// Back to before the first .zeroignore: it goes; build/out was made
	// while ignored, so the first record of it is its capture under the
	// second file's rules ("o"): that is its state at s as far as history
	// knows; x.log is ignored now and stays.
	if _, err := e.Rewind(ctx, s.Seq); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(filepath.Join(ws, record.IgnoreFile)); !os.IsNotExist(err) {
		t.Errorf(".zeroignore after the rewind: %v, want gone", err)
	}
	if got := readT(t, filepath.Join(ws, "build/out")); got != "o" {
		t.Errorf("build/out after the rewind: got %q, want o (its first record)", got)
	}
	if readT(t, filepath.Join(ws, "x.log")) != "l" {
		t.Error("x.log, ignored when the rewind ran, was changed")
	}
	if st := e.IgnoreStatus(); st.Patterns != 0 {
		t.Errorf("status after the rewind took .zeroignore away: got %+v, want nothing ignored", st)
	}
	change(t, e, func() error { return os.WriteFile(filepath.Join(ws, "y.log"), []byte("y"), 0o644) }, Change{Path: "y.log"})
	if !capturedPaths(t, e)["y.log"] {
		t.Error("y.log was not captured once nothing is ignored")
	}
}

// TestIgnoredAfterCaptured: a path captured before it was ignored keeps
// its history (a view shows it), but no rewind touches it any more.
func TestIgnoredAfterCaptured(t *testing.T) {
	ctx := context.Background()
	e, ws := openT(t, Options{})
	cache := filepath.Join(ws, "cache.db")
	change(t, e, func() error { return os.WriteFile(cache, []byte("v1"), 0o644) }, Change{Path: "cache.db"})
	s1, err := e.BeginStep(ctx, "one", nil)
	if err != nil {
		t.Fatal(err)
	}
	change(t, e, func() error { return os.WriteFile(cache, []byte("v2"), 0o644) }, Change{Path: "cache.db"})
	change(t, e, func() error { return os.WriteFile(filepath.Join(ws, "main.go"), []byte("m"), 0o644) }, Change{Path: "main.go"})
	if _, err := e.BeginStep(ctx, "ignore it", nil); err != nil {
		t.Fatal(err)
	}
	change(t, e, func() error { return os.WriteFile(filepath.Join(ws, record.IgnoreFile), []byte("*.db\n"), 0o644) }, Change{Path: record.IgnoreFile})
	if _, err := e.BeginStep(ctx, "three", nil); err != nil {
		t.Fatal(err)
	}
	change(t, e, func() error { return os.WriteFile(cache, []byte("v3"), 0o644) }, Change{Path: "cache.db"})
	if got, _ := readAt(t, e, "cache.db", s1.Seq); got != "v1" {
		t.Errorf("@%d cache.db: got %q, want the recorded v1", s1.Seq, got)
	}
	res, err := e.Apply(ctx, record.Request{Target: s1.Seq, DryRun: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range res.Preview {
		if c.Path == "cache.db" {
			t.Errorf("the dry run lists cache.db: %+v", c)
		}
	}
	if _, err := e.Rewind(ctx, 0); err != nil {
		t.Fatal(err)
	}
	if got := readT(t, cache); got != "v3" {
		t.Errorf("cache.db after a rewind to 0: got %q, want v3 left alone", got)
	}
	if _, err := os.Lstat(filepath.Join(ws, "main.go")); !os.IsNotExist(err) {
		t.Errorf("main.go after a rewind to 0: %v, want gone", err)
	}
}

// TestRenameAcrossIgnoreEdge: a directory renamed out of or into an
// ignored name is never one rename record; the side that is not ignored
// is captured path by path, the ignored side not at all.
func TestRenameAcrossIgnoreEdge(t *testing.T) {
	ctx := context.Background()
	e, ws := openT(t, Options{Ignore: []string{"node_modules/"}, RenameRecords: true})
	writeT(t, filepath.Join(ws, "node_modules/p/a.js"), "a")
	s, err := e.BeginStep(ctx, "mv out", nil)
	if err != nil {
		t.Fatal(err)
	}
	rename := func(from, to string) {
		release, _, err := e.Begin(ctx, Caller{PID: os.Getpid(), Comm: "test"})
		if err != nil {
			t.Fatal(err)
		}
		defer release()
		handled, err := e.RenameDir(ctx, Caller{}, from, to, func() error { return os.Rename(filepath.Join(ws, from), filepath.Join(ws, to)) })
		if err != nil || handled {
			t.Fatalf("RenameDir %s -> %s: handled %v, %v; want it left to path captures", from, to, handled, err)
		}
		if err := e.CaptureLocked(ctx, Caller{}, Change{Path: from, Tree: true}, Change{Path: to, From: from, Removed: true}); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(filepath.Join(ws, from), filepath.Join(ws, to)); err != nil {
			t.Fatal(err)
		}
	}
	rename("node_modules", "vendored")
	got := capturedPaths(t, e)
	for _, p := range []string{"vendored", "vendored/p", "vendored/p/a.js"} {
		if !got[p] {
			t.Errorf("%s (absent before the rename) was not captured", p)
		}
	}
	for p := range got {
		if strings.HasPrefix(p, "node_modules") {
			t.Errorf("%s was captured", p)
		}
	}
	s2, err := e.BeginStep(ctx, "mv in", nil)
	if err != nil {
		t.Fatal(err)
	}
	rename("vendored", "node_modules")
	if got, _ := readAt(t, e, "vendored/p/a.js", s2.Seq); got != "a" {
		t.Errorf("@%d vendored/p/a.js: got %q, want a", s2.Seq, got)
	}
	// Back to before the first rename: vendored goes (it did not exist),
	// node_modules is ignored and stays as it is now.
	if _, err := e.Rewind(ctx, s.Seq); err != nil {
		t.Fatal(err)
	}
	if readT(t, filepath.Join(ws, "node_modules/p/a.js")) != "a" {
		t.Error("node_modules/p/a.js was touched")
	}
	if _, err := os.Lstat(filepath.Join(ws, "vendored")); !os.IsNotExist(err) {
		t.Errorf("vendored after the rewind: %v", err)
	}
}

// TestIgnoreFileUnusable: a .zeroignore that is a symlink, a directory or
// too large is not used: the status says why, --ignore still applies, and
// everything else is recorded.
func TestIgnoreFileUnusable(t *testing.T) {
	for _, tc := range []struct {
		name, want string
		make       func(ws string) error
	}{
		{"symlink", "is a symlink", func(ws string) error {
			os.WriteFile(filepath.Join(ws, "real"), []byte("*.txt\n"), 0o644)
			return os.Symlink("real", filepath.Join(ws, record.IgnoreFile))
		}},
		{"directory", "not a regular file", func(ws string) error { return os.Mkdir(filepath.Join(ws, record.IgnoreFile), 0o755) }},
		{"huge", "larger than", func(ws string) error {
			return os.WriteFile(filepath.Join(ws, record.IgnoreFile), []byte(strings.Repeat("*.txt\n", MaxIgnoreFile/6+1)), 0o644)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ws := filepath.Join(t.TempDir(), "ws")
			if err := os.Mkdir(ws, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := tc.make(ws); err != nil {
				t.Fatal(err)
			}
			e := openAt(t, ws, Options{StoreDir: filepath.Join(filepath.Dir(ws), "store"), Ignore: []string{"*.o"}})
			st := e.IgnoreStatus()
			if !strings.Contains(st.Err, tc.want) || st.Patterns != 1 || len(st.Flags) != 1 {
				t.Fatalf("status: got %+v, want the error %q and the one --ignore pattern", st, tc.want)
			}
			root, err := os.Open(ws)
			if err != nil {
				t.Fatal(err)
			}
			defer root.Close()
			if got := ReadIgnore(root); !strings.Contains(got.Err, tc.want) {
				t.Errorf("ReadIgnore: got %+v", got)
			}
			change(t, e, func() error { return os.WriteFile(filepath.Join(ws, "a.txt"), nil, 0o644) }, Change{Path: "a.txt"})
			change(t, e, func() error { return os.WriteFile(filepath.Join(ws, "a.o"), nil, 0o644) }, Change{Path: "a.o"})
			got := capturedPaths(t, e)
			if !got["a.txt"] || got["a.o"] {
				t.Errorf("captured %v: want a.txt (the file is not used) and not a.o (--ignore)", got)
			}
		})
	}
}

// TestIgnoreRewindCrash kills a rewind half-way whose plan leaves an
// ignored tree alone inside a directory it removes, and reopens the store
// with no ignore rules at all: the recovery plans with the rules the
// rewind was planned with (its intent's), so the ignored files, which no
// checkpoint holds, are still there.
func TestIgnoreRewindCrash(t *testing.T) {
	for _, point := range []string{"rewind:intent", "rewind:half"} {
		t.Run(point, func(t *testing.T) {
			ctx := context.Background()
			e, ws := openT(t, Options{Sync: true, Ignore: []string{"node_modules/"}})
			store := e.opts.StoreDir
			s, err := e.BeginStep(ctx, "install", nil)
			if err != nil {
				t.Fatal(err)
			}
			for _, d := range []string{"web", "web/node_modules", "web/src"} {
				change(t, e, func() error { return os.Mkdir(filepath.Join(ws, d), 0o755) }, Change{Path: d, Dir: true})
			}
			for i := range 8 {
				p := "web/src/f" + strconv.Itoa(i)
				change(t, e, func() error { return os.WriteFile(filepath.Join(ws, p), []byte(p), 0o644) }, Change{Path: p})
			}
			change(t, e, func() error { return os.WriteFile(filepath.Join(ws, "web/node_modules/m.js"), []byte("m"), 0o644) }, Change{Path: "web/node_modules/m.js"})
			// Something for the rewind to create, so that "rewind:half" is reached.
			for i := range 4 {
				p := "keep" + strconv.Itoa(i)
				writeT(t, filepath.Join(ws, p), "old")
			}
			if _, err := e.BeginStep(ctx, "edit", nil); err != nil {
				t.Fatal(err)
			}
			for i := range 4 {
				p := "keep" + strconv.Itoa(i)
				change(t, e, func() error { return os.Remove(filepath.Join(ws, p)) }, Change{Path: p})
			}
			if err := e.Close(); err != nil {
				t.Fatal(err)
			}
			killedAt(t, "crash", point, "ZEROFS_TEST_WS="+ws, "ZEROFS_TEST_STORE="+store,
				"ZEROFS_TEST_SEQ="+strconv.FormatUint(uint64(s.Seq), 10), "ZEROFS_TEST_IGNORE=node_modules/")
			root, err := os.Open(ws)
			if err != nil {
				t.Fatal(err)
			}
			defer root.Close()
			e2, err := Open(ctx, root, Options{StoreDir: store, Sync: true})
			if err != nil {
				t.Fatalf("reopen: %v", err)
			}
			defer e2.Close()
			if got := readT(t, filepath.Join(ws, "web/node_modules/m.js")); got != "m" {
				t.Errorf("web/node_modules/m.js: got %q", got)
			}
			if _, err := os.Lstat(filepath.Join(ws, "web/src")); !os.IsNotExist(err) {
				t.Errorf("web/src after the finished rewind: %v, want gone", err)
			}
			for i := range 4 {
				if got := readT(t, filepath.Join(ws, "keep"+strconv.Itoa(i))); got != "old" {
					t.Errorf("keep%d: got %q, want old", i, got)
				}
			}
		})
	}
}

// BenchmarkBeginIgnored is what a change to an ignored path costs the
// request path in the engine: Begin with no change at all (the floor),
// with an ignored change under eight patterns, and with the same path
// captured for real (a new step each time, as its first touch).
func BenchmarkBeginIgnored(b *testing.B) {
	rules := []string{"node_modules/", "dist/", "*.log", "!important.log", "/coverage", "**/.cache/**", "build/", "*.o"}
	p := "node_modules/pkg042/lib/m17.js"
	for _, tc := range []struct {
		name    string
		ignore  []string
		changes []Change
		step    bool
	}{
		{"floor", rules, nil, false},
		{"ignored", rules, []Change{{Path: p}}, false},
		{"captured", nil, []Change{{Path: p}}, true},
	} {
		b.Run(tc.name, func(b *testing.B) {
			ws, store := b.TempDir(), b.TempDir()
			root, _ := os.Open(ws)
			defer root.Close()
			e, err := Open(context.Background(), root, Options{StoreDir: store, Ignore: tc.ignore})
			if err != nil {
				b.Fatal(err)
			}
			defer e.Close()
			os.MkdirAll(filepath.Join(ws, filepath.Dir(p)), 0o755)
			os.WriteFile(filepath.Join(ws, p), []byte("module.exports = 1\n"), 0o644)
			for b.Loop() {
				if tc.step {
					b.StopTimer()
					if _, err := e.BeginStep(context.Background(), "s", nil); err != nil {
						b.Fatal(err)
					}
					b.StartTimer()
				}
				release, _, err := e.Begin(context.Background(), Caller{}, tc.changes...)
				if err != nil {
					b.Fatal(err)
				}
				release()
			}
		})
	}
}

// TestRevertLeavesIgnored: a step that changed a path now ignored is
// reverted without it, and a later change to that path is no conflict.
func TestRevertLeavesIgnored(t *testing.T) {
	ctx := context.Background()
	e, ws := openT(t, Options{})
	s, err := e.BeginStep(ctx, "build", nil)
	if err != nil {
		t.Fatal(err)
	}
	change(t, e, func() error { return os.WriteFile(filepath.Join(ws, "main.go"), []byte("m"), 0o644) }, Change{Path: "main.go"})
	change(t, e, func() error { return os.WriteFile(filepath.Join(ws, "out.bin"), []byte("1"), 0o644) }, Change{Path: "out.bin"})
	if _, err := e.BeginStep(ctx, "rebuild", nil); err != nil {
		t.Fatal(err)
	}
	change(t, e, func() error { return os.WriteFile(filepath.Join(ws, "out.bin"), []byte("2"), 0o644) }, Change{Path: "out.bin"})
	if _, err := e.Apply(ctx, record.Request{Revert: s.Seq, DryRun: true}); err == nil {
		t.Fatal("the revert found no conflict on out.bin before it was ignored")
	}
	change(t, e, func() error { return os.WriteFile(filepath.Join(ws, record.IgnoreFile), []byte("*.bin\n"), 0o644) }, Change{Path: record.IgnoreFile})
	if _, err := e.Apply(ctx, record.Request{Revert: s.Seq}); err != nil {
		t.Fatalf("revert with out.bin ignored: %v", err)
	}
	if _, err := os.Lstat(filepath.Join(ws, "main.go")); !os.IsNotExist(err) {
		t.Errorf("main.go after the revert: %v, want gone", err)
	}
	if got := readT(t, filepath.Join(ws, "out.bin")); got != "2" {
		t.Errorf("out.bin after the revert: %q, want 2 left alone", got)
	}
}

// TestMergeLeavesIgnored: a merge neither brings in what the workspace's
// rules ignore (the fork's log and build output) nor finds it in conflict,
// and a directory the fork removed stays while it holds something ignored.
func TestMergeLeavesIgnored(t *testing.T) {
	m := newMergeT(t, map[string]string{"a.txt": "a\n", "d/x": "x\n", "app.log": "base\n"})
	m.step(m.e, "ours")
	m.write(m.e, m.ws, "app.log", "ours\n") // recorded: ignored from the next step on
	m.step(m.e, "ignore logs and build")
	m.write(m.e, m.ws, record.IgnoreFile, "*.log\nbuild/\n")
	m.write(m.e, m.ws, "d/debug.log", "ours\n")
	m.step(m.f, "theirs")
	m.write(m.f, m.fork, "app.log", "theirs\n")
	m.write(m.f, m.fork, "build/out", "out\n")
	m.write(m.f, m.fork, "b.txt", "b\n")
	m.do(m.f, func() error { return os.RemoveAll(filepath.Join(m.fork, "d")) }, Change{Path: "d", Tree: true})
	res, err := m.merge(record.MergeRequest{}, false)
	if err != nil {
		t.Fatalf("merge: %v (%+v)", err, res.Merge)
	}
	if got := m.read("b.txt"); got != "b\n" {
		t.Errorf("b.txt: %q, want the fork's", got)
	}
	if got := m.read("app.log"); got != "ours\n" {
		t.Errorf("app.log: %q, want ours left alone", got)
	}
	if _, err := os.Lstat(filepath.Join(m.ws, "build")); !os.IsNotExist(err) {
		t.Errorf("build/ came in from the fork: %v", err)
	}
	if _, err := os.Lstat(filepath.Join(m.ws, "d/x")); !os.IsNotExist(err) {
		t.Errorf("d/x after the merge: %v, want removed as in the fork", err)
	}
	if got := m.read("d/debug.log"); got != "ours\n" {
		t.Errorf("d/debug.log: %q, want it and d/ left", got)
	}
	for p := range capturedPaths(t, m.e) {
		if strings.HasSuffix(p, ".log") && p != "app.log" || strings.HasPrefix(p, "build") {
			t.Errorf("%s was captured", p)
		}
	}
}
