package e2e

import (
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/zerofs/zerofs/internal/testsupport"
)

// binary is the zerofs built once by TestMain (built: with why it is
// missing).
var (
	binary string
	built  *testsupport.Binary
	// goCacheDir is the GOCACHE for go build under the mount: outside any
	// workspace, and removed with the binary.
	goCacheDir string
)

// cmdTimeout bounds every command a test runs, so a deadlock fails the test
// with the command's name (and the daemon's goroutines: dumpDaemon) instead
// of hanging the suite. It is no speed bound: a go build under the mount
// took over 90 s at load 24.
const cmdTimeout = 4 * time.Minute

func TestMain(m *testing.M) {
	built = testsupport.BuildZerofs()
	binary = built.Path
	if built.Dir() != "" {
		goCacheDir = filepath.Join(built.Dir(), "gocache")
	}
	code := m.Run()
	built.Remove()
	os.Exit(code)
}

func exists(p string) bool {
	_, err := os.Lstat(p)
	return err == nil
}

// mountT makes an empty workspace, mounts it in place with the daemon and
// returns its path. Cleanup unmounts it whatever happens to the test.
func mountT(t *testing.T) string {
	t.Helper()
	ws := filepath.Join(t.TempDir(), "ws")
	if err := os.Mkdir(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	mountWS(t, ws)
	return ws
}

// mountWS mounts an existing workspace in place with the daemon
// (testsupport's Binary.Mount: unmounted, or detached, when the test ends).
func mountWS(t *testing.T, ws string, flags ...string) {
	t.Helper()
	if os.Getenv("ZEROFS_TEST_NOOPEN") == "1" {
		flags = append(flags, "--no-open") // every mount of the e2e tests without OPEN
	}
	built.Mount(t, ws, recordsFlags(flags)...)
}

// recordsFlags is flags with --rename-records=false added when
// ZEROFS_TEST_RENAME_RECORDS=0 asks every mount of the e2e tests to be
// without rename records, unless flags already say --rename-records either
// way (a test of that mode).
func recordsFlags(flags []string) []string {
	if os.Getenv("ZEROFS_TEST_RENAME_RECORDS") == "0" && !pinsRenameRecords(flags) {
		return append(append([]string(nil), flags...), "--rename-records=false")
	}
	return flags
}

// pinsRenameRecords reports whether flags say --rename-records either way:
// such a test asserts that mode, whatever ZEROFS_TEST_RENAME_RECORDS says.
func pinsRenameRecords(flags []string) bool {
	for _, f := range flags {
		if f == "--rename-records" || strings.HasPrefix(f, "--rename-records=") {
			return true
		}
	}
	return false
}

// unmountT unmounts ws with `zerofs umount`; if that fails or the mount
// stays, it detaches the mount and kills the daemon, so no test ever leaves
// a mount behind (testsupport's Binary.Unmount).
func unmountT(t *testing.T, ws string, pid int) {
	t.Helper()
	built.Unmount(t, ws, pid)
}

// runCmd runs name with args in dir under timeout and returns its
// combined output. env entries are added to the test's environment.
func runCmd(t *testing.T, timeout time.Duration, dir string, env []string, name string, args ...string) (string, error) {
	t.Helper()
	r := testsupport.Run(t, testsupport.RunOptions{Dir: dir, Env: env, Timeout: timeout, Combined: true}, name, args...)
	return r.Stdout, r.Err
}

// must runs a command that has to succeed and returns its output.
func must(t *testing.T, dir string, env []string, name string, args ...string) string {
	t.Helper()
	out, err := runCmd(t, cmdTimeout, dir, env, name, args...)
	if err != nil {
		t.Fatalf("%s %s (in %s): %v\n%s", name, strings.Join(args, " "), dir, err, out)
	}
	return out
}

// sh runs a shell script in dir, as a tool under the mount would.
func sh(t *testing.T, dir, script string) string {
	t.Helper()
	return must(t, dir, nil, "/bin/sh", "-ec", script)
}

func zerofs(t *testing.T, dir string, args ...string) (string, error) {
	t.Helper()
	return zerofsCtx(t, cmdTimeout, dir, args...)
}

func zerofsCtx(t *testing.T, timeout time.Duration, dir string, args ...string) (string, error) {
	t.Helper()
	return runCmd(t, timeout, dir, nil, binary, args...)
}

func zerofsOK(t *testing.T, dir string, args ...string) string {
	t.Helper()
	out, err := zerofs(t, dir, args...)
	if err != nil {
		t.Fatalf("zerofs %s (in %s): %v\n%s", strings.Join(args, " "), dir, err, out)
	}
	return out
}

// head reads .zero/head.
func head(t *testing.T, ws string) int64 {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(ws, ".zero/head"))
	if err != nil {
		t.Fatalf("read .zero/head: %v", err)
	}
	n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		t.Fatalf(".zero/head = %q: %v", b, err)
	}
	return n
}

// step begins a step with `zerofs step` and returns its sequence, read
// from .zero/step: the state at that sequence is the state the step starts
// from. (Not .zero/head: with writers running, head moves on at once, and a
// sequence inside a step is no exact moment: a path already captured in the
// step is shown as it is at its next capture.)
func step(t *testing.T, ws, label string) int64 {
	t.Helper()
	zerofsOK(t, ws, "step", label)
	b, err := os.ReadFile(filepath.Join(ws, ".zero/step"))
	if err != nil {
		t.Fatalf("read .zero/step: %v", err)
	}
	seq, got, _ := strings.Cut(strings.TrimSpace(string(b)), " ")
	n, err := strconv.ParseInt(seq, 10, 64)
	if err != nil || got != label {
		t.Fatalf(".zero/step after zerofs step %q: got %q, want \"<seq> %s\"", label, b, label)
	}
	return n
}

// rewindTo rolls ws back to seq with `zerofs rewind`.
func rewindTo(t *testing.T, ws string, seq int64) {
	t.Helper()
	zerofsOK(t, ws, "rewind", strconv.FormatInt(seq, 10))
}

// view is the path of the read-only view of ws at seq.
func view(ws string, seq int64) string {
	return filepath.Join(ws, "@"+strconv.FormatInt(seq, 10))
}

// event is the envelope of one line of .zero/log.
type event struct {
	Sequence int64           `json:"sequence"`
	Type     string          `json:"type"`
	Payload  json.RawMessage `json:"payload"`
}

// readLog reads ws/.zero/log (or a store's events.jsonl) and checks that
// every line parses and the sequences run 1..n without a gap.
func readLog(t *testing.T, path string) []event {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read %s: %v", path, err)
	}
	var evs []event
	for i, line := range strings.Split(strings.TrimSuffix(string(b), "\n"), "\n") {
		if line == "" && i == 0 {
			break
		}
		var e event
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			t.Fatalf("%s line %d does not parse: %v: %q", path, i+1, err, line)
		}
		if want := int64(i + 1); e.Sequence != want {
			t.Fatalf("%s line %d: got sequence %d, want %d", path, i+1, e.Sequence, want)
		}
		evs = append(evs, e)
	}
	return evs
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// exitCode is a command's exit status from its error: 0 for nil, -1 when
// it did not exit normally.
func exitCode(err error) int {
	var xe *exec.ExitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &xe):
		return xe.ExitCode()
	}
	return -1
}
