package main

import (
	"context"
	"crypto/sha256"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/zerofs/zerofs/record"
)

// TestBisectGoModuleMounted is bisect's real case: a Go module on a
// mounted workspace, 40 steps of edits through the mount, one of which
// (step 23, which also adds a file of its own) breaks `go test`; the steps
// after it add files of their own. `zerofs bisect -- go test ./...` names
// that step with its label, its changes and the failing test's output, in
// at most ceil(log2(41))+1 = 7 runs of go test, and leaves the workspace,
// its head and its log as they were. With ZEROFS_BISECT_LINEAR=1 it also
// times the other way: writing each of the 41 states out with `zerofs fork`
// and running go test in each in turn.
func TestBisectGoModuleMounted(t *testing.T) {
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("go is not installed")
	}
	ws := filepath.Join(t.TempDir(), "mod")
	if err := os.Mkdir(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	mountT(t, ws)
	writeFile(t, filepath.Join(ws, "go.mod"), "module example.com/calc\n\ngo 1.22\n")
	writeFile(t, filepath.Join(ws, "calc.go"), "package calc\n\n// Add adds.\nfunc Add(a, b int) int { return a + b }\n")
	writeFile(t, filepath.Join(ws, "calc_test.go"), "package calc\n\nimport \"testing\"\n\nfunc TestAdd(t *testing.T) {\n\tif got := Add(2, 3); got != 5 {\n\t\tt.Fatalf(\"Add(2, 3) = %d, want 5\", got)\n\t}\n}\n")
	const n, k = 40, 23
	for i := 1; i <= n; i++ {
		binOK(t, ws, "step", fmt.Sprintf("Edit f%d.go", i))
		writeFile(t, filepath.Join(ws, fmt.Sprintf("f%d.go", i)), fmt.Sprintf("package calc\n\n// F%d is %d.\nfunc F%d() int { return %d }\n", i, i, i, i))
		if i == k {
			writeFile(t, filepath.Join(ws, "calc.go"), "package calc\n\n// Add adds.\nfunc Add(a, b int) int { return a - b }\n")
		}
	}
	before, head, log := treeSum(t, ws), binOK(t, ws, "status"), readCtl(t, ws, "log")

	env := append(os.Environ(), "GOTOOLCHAIN=local", "GOFLAGS=-count=1")
	cmd := exec.Command(binary, "bisect", "--", gobin, "test", "./...")
	cmd.Dir, cmd.Env = ws, env
	start := time.Now()
	out, err := cmd.CombinedOutput()
	took := time.Since(start)
	if err != nil {
		t.Fatalf("bisect: %v\n%s", err, out)
	}
	t.Logf("zerofs bisect -- go test ./... (%d steps): %v\n%s", n, took.Round(time.Millisecond), out)
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	last := lines[len(lines)-1]
	m := regexp.MustCompile(`^first bad step (\d+) "Edit f23.go"$`).FindStringSubmatch(last)
	if m == nil {
		t.Fatalf("last line %q, want first bad step SEQ \"Edit f23.go\"", last)
	}
	probes := 0
	for _, l := range lines {
		if strings.HasPrefix(l, "state ") {
			probes++
		}
	}
	if probes == 0 || probes > 7 {
		t.Errorf("%d runs of go test, want at most 7", probes)
	}
	for _, want := range []string{"modified  calc.go", "added     f23.go", "Add(2, 3) = -1, want 5", "zerofs revert " + m[1]} {
		if !strings.Contains(string(out), want) {
			t.Errorf("the report lacks %q", want)
		}
	}
	if treeSum(t, ws) != before || binOK(t, ws, "status") != head || readCtl(t, ws, "log") != log {
		t.Error("bisect changed the workspace, its head or its log")
	}

	if os.Getenv("ZEROFS_BISECT_LINEAR") == "" {
		return
	}
	// The other way: each state written out and tested in turn, oldest
	// first, until go test fails.
	steps := regexp.MustCompile(`(?m)^step\s+(\d+)\s.*Edit f`).FindAllStringSubmatch(binOK(t, ws, "log"), -1)
	// The states before each step and now, newest first (as the log).
	h, _ := strconv.Atoi(strings.TrimSpace(readCtl(t, ws, "head")))
	seqs := []int{h}
	for _, s := range steps {
		v, _ := strconv.Atoi(s[1])
		seqs = append(seqs, v-1)
	}
	start = time.Now()
	tested := 0
	for i := len(seqs) - 1; i >= 0; i-- {
		dir := filepath.Join(t.TempDir(), "state")
		binOK(t, ws, "fork", strconv.Itoa(seqs[i]), dir)
		c := exec.Command(gobin, "test", "./...")
		c.Dir, c.Env = dir, env
		tested++
		if c.Run() != nil {
			break
		}
	}
	t.Logf("fork and go test each state in turn: %d states until the first failure, %v (bisect: %v)", tested, time.Since(start).Round(time.Millisecond), took.Round(time.Millisecond))
}

// treeSum sums every path, mode and content under dir (the control
// directory and views left out).
func treeSum(t *testing.T, dir string) string {
	t.Helper()
	h := sha256.New()
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if rel == ".zero" {
			return filepath.SkipDir
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		fmt.Fprintf(h, "%s %v %d\n", rel, fi.Mode(), fi.ModTime().UnixNano())
		if d.Type().IsRegular() {
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			h.Write(b)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("%x", h.Sum(nil))
}

func readCtl(t *testing.T, ws, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(ws, ".zero", name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestBisectCLIEnds: bisect of an unmounted workspace; a command that does
// not fail now, or fails at the oldest state too, exits 1 with one line
// saying so; no command, or an argument before --, is bad usage; --good
// and --bad take sequences (and relative refs) as rewind does; CMD runs in
// the scratch copy of the directory bisect was run from; --turns names the
// first bad turn.
func TestBisectCLIEnds(t *testing.T) {
	s := newStore(t, map[string]string{"flag": "ok\n", "sub/keep": "x\n"})
	var seqs []record.Seq
	for i, label := range []string{"one", "two", "three", "four"} {
		if i == 2 {
			if _, err := s.eng.BeginTurn(context.Background(), []byte(`{"prompt":"break it","agentSession":"s1"}`)); err != nil {
				t.Fatal(err)
			}
		}
		seqs = append(seqs, s.step(label))
		s.write(label+".txt", "x\n")
		if label == "three" {
			s.write("flag", "broken\n")
		}
	}
	s.close()
	wantFail(t, s.ws, 1, "does not fail at the bad state", "bisect", "--", "true")
	wantFail(t, s.ws, 1, "fails at the good state 0 too", "bisect", "--", "false")
	wantFail(t, s.ws, 2, "want a command after --", "bisect")
	wantFail(t, s.ws, 2, "the command goes after --", "bisect", "grep", "--", "x")
	check := []string{"--", "grep", "-qx", "ok", "flag"}
	out := mustRun(t, s.ws, append([]string{"bisect"}, check...)...)
	if !strings.HasSuffix(out, "first bad step "+itoa(seqs[2])+" \"three\"\n") || !strings.Contains(out, "zerofs revert "+itoa(seqs[2])) {
		t.Errorf("bisect:\n%s", out)
	}
	// --bad at the state before "three": nothing fails there.
	wantFail(t, s.ws, 1, "does not fail at the bad state", append([]string{"bisect", "--bad", itoa(seqs[2] - 1)}, check...)...)
	out = mustRun(t, s.ws, append([]string{"bisect", "--good", "-3"}, check...)...)
	if !strings.HasSuffix(out, "first bad step "+itoa(seqs[2])+" \"three\"\n") {
		t.Errorf("bisect --good -3:\n%s", out)
	}
	// From a subdirectory, CMD runs in the scratch copy of it.
	out = mustRun(t, filepath.Join(s.ws, "sub"), "bisect", "--", "sh", "-c", "test -f keep && grep -qx ok ../flag")
	if !strings.HasSuffix(out, "first bad step "+itoa(seqs[2])+" \"three\"\n") {
		t.Errorf("bisect from sub:\n%s", out)
	}
	out = mustRun(t, s.ws, append([]string{"bisect", "--turns"}, check...)...)
	if !strings.HasSuffix(out, "first bad turn "+itoa(seqs[2]-1)+" \"break it\"\n") {
		t.Errorf("bisect --turns:\n%s", out)
	}
}

// TestBisectProgressOnTerminal: on a terminal, bisect shows which state it
// is running the command at on stderr, cleared before each probe's line;
// stdout holds only the report; in a pipe stderr stays empty.
func TestBisectProgressOnTerminal(t *testing.T) {
	s := newStore(t, map[string]string{"flag": "ok\n"})
	for i := 1; i <= 6; i++ {
		s.step("step " + itoa(record.Seq(i)))
		s.write(itoa(record.Seq(i))+".txt", "x\n")
		if i == 4 {
			s.write("flag", "broken\n")
		}
	}
	s.close()
	args := []string{"bisect", "--", "grep", "-qx", "ok", "flag"}
	stdout, stderr, code := runOnTTY(t, s.ws, args...)
	if code != 0 || !strings.HasSuffix(stdout, "\"step 4\"\n") || strings.ContainsAny(stdout, "\r\x1b") {
		t.Fatalf("bisect on a terminal: exit %d\nstdout %q", code, stdout)
	}
	if !strings.Contains(stderr, "bisect: running grep -qx ok flag at state ") || !strings.Contains(stderr, "\r\x1b[K") {
		t.Errorf("stderr on a terminal: %q, want a progress line", stderr)
	}
	if i := strings.LastIndex(stderr, "\x1b[K"); i < 0 || strings.TrimSpace(strings.ReplaceAll(stderr[i+3:], "\r", "")) != "" {
		t.Errorf("stderr does not end cleared: %q", stderr)
	}
	if r := zerofs(t, s.ws, "", args...); r.code != 0 || r.stderr != "" {
		t.Errorf("in a pipe: exit %d, stderr %q, want none", r.code, r.stderr)
	}
}

// TestBisectThinned: states gc thinned away cannot be tested: bisect skips
// them without running anything and probes the states a thin keeps (each
// day's first tool call); when the first bad step lies among thinned
// states it names the steps it is among and exits 1.
func TestBisectThinned(t *testing.T) {
	ws, _, _ := buildOldDays(t)
	mustRun(t, ws, "gc", "--thin-after", "72h")
	// a.txt says which step wrote it last: the command fails from the
	// first step of day 4 on.
	check := []string{"bisect", "--", "sh", "-c", `! grep -q "day [45]\|recent" a.txt`}
	r := wantFail(t, ws, 1, "no state that could tell them apart could be tested", check...)
	for _, want := range []string{"skip (thinned by gc)", `"day 4 step 0"`, `"day 4 step 1"`, `"day 4 step 2"`} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("bisect over thinned states lacks %q:\n%s", want, r.stdout)
		}
	}
	if strings.Contains(r.stdout, `"day 3 step 2"`+"\n") {
		t.Errorf("bisect names a step before the kept good state:\n%s", r.stdout)
	}
}
