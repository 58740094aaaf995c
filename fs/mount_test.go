package fs

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/zerofs/zerofs/internal/testsupport"
	"github.com/zerofs/zerofs/record"
)

// requireFUSE skips the test when it cannot mount (not root, no
// /dev/fuse), unless ZEROFS_REQUIRE_FUSE=1 makes that a failure.
func requireFUSE(t testing.TB) {
	t.Helper()
	testsupport.RequireFUSE(t)
}

// testLogger writes warnings and errors to stderr (t.Log would panic when a
// late log line arrives after the test ended).
func testLogger() *slog.Logger {
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

// mountT mounts opts (a fresh workspace and a separate mountpoint unless
// given) and always unmounts when the test ends, failed or not.
// ZEROFS_TEST_NOOPEN=1 mounts it with NoOpen, ZEROFS_TEST_RENAME_RECORDS=0
// with NoRenameRecords.
func mountT(t *testing.T, opts Options) *Mounted {
	t.Helper()
	return mountEnvT(t, opts, os.Getenv("ZEROFS_TEST_RENAME_RECORDS") == "0")
}

// mountRecordsT is mountT with rename records whatever
// ZEROFS_TEST_RENAME_RECORDS says: for the tests of rename records.
func mountRecordsT(t *testing.T, opts Options) *Mounted {
	t.Helper()
	if opts.NoRenameRecords {
		t.Fatal("mountRecordsT with NoRenameRecords")
	}
	return mountEnvT(t, opts, false)
}

// mountEnvT is mountT, with NoRenameRecords set when noRecords.
func mountEnvT(t *testing.T, opts Options, noRecords bool) *Mounted {
	t.Helper()
	requireFUSE(t)
	if opts.Workspace == "" {
		opts.Workspace = t.TempDir()
	}
	if opts.Mountpoint == "" {
		opts.Mountpoint = t.TempDir()
	}
	if opts.Logger == nil {
		opts.Logger = testLogger()
	}
	if os.Getenv("ZEROFS_TEST_NOOPEN") == "1" {
		opts.NoOpen = true // every mount of the package's tests without OPEN
	}
	if noRecords {
		opts.NoRenameRecords = true // every mount of the package's tests without rename records
	}
	opts.SelfOpens = true // the tests open the mount's files in-process
	m, err := Mount(context.Background(), opts)
	if err != nil {
		t.Fatalf("Mount: %v", err)
	}
	track(m)
	t.Cleanup(func() { unmountT(t, m) })
	return m
}

// track notes m's mountpoint for TestMain.
func track(m *Mounted) {
	mounted.Lock()
	mounted.paths = append(mounted.paths, m.Mountpoint())
	mounted.Unlock()
}

// unmountT unmounts m and makes sure nothing is left mounted, detaching
// a mount whose unmount hangs.
func unmountT(t *testing.T, m *Mounted) {
	t.Helper()
	testsupport.Unmount(t, m.Mountpoint(), 20*time.Second, m.Unmount)
}

// isMounted reports whether a FUSE mount is at p.
func isMounted(p string) bool { return testsupport.FUSEMounted(p) }

// fatalT is what the helpers below need from a test: *testing.T offers it,
// and so does *rapid.T, so a property test's failure shrinks.
type fatalT interface {
	Helper()
	Fatalf(format string, args ...any)
}

// ctlRead reads a control file.
func ctlRead(t fatalT, mp, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(mp, ".zero", name))
	if err != nil {
		t.Fatalf("read .zero/%s: %v", name, err)
	}
	return string(b)
}

// ctlWrite writes one command the way a shell's "echo x > file" does:
// open with O_TRUNC, one write.
func ctlWrite(mp, name, data string) error {
	f, err := os.OpenFile(filepath.Join(mp, ".zero", name), os.O_WRONLY|os.O_TRUNC, 0)
	if err != nil {
		return err
	}
	_, werr := f.Write([]byte(data))
	cerr := f.Close()
	if werr != nil {
		return werr
	}
	return cerr
}

func headOf(t fatalT, mp string) record.Seq {
	t.Helper()
	s := strings.TrimSpace(ctlRead(t, mp, "head"))
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		t.Fatalf(".zero/head = %q: %v", s, err)
	}
	return record.Seq(n)
}

func rewindT(t fatalT, mp string, seq record.Seq) {
	t.Helper()
	if err := ctlWrite(mp, "rewind", strconv.FormatUint(uint64(seq), 10)+"\n"); err != nil {
		t.Fatalf("rewind to %d: %v", seq, err)
	}
}

// stepT begins a step and returns its own sequence, the exact boundary to
// take as a view or rewind target: with passthrough the head read after a
// step may already be past the captures the boundary made of files held
// open for writing (their RELEASE still in flight).
func stepT(t fatalT, mp, label string) record.Seq {
	t.Helper()
	if err := ctlWrite(mp, "step", label+"\n"); err != nil {
		t.Fatalf("step %q: %v", label, err)
	}
	return stepSeqOf(t, mp)
}

func view(mp string, seq record.Seq) string {
	return filepath.Join(mp, "@"+strconv.FormatUint(uint64(seq), 10))
}

// waitReleased waits until the daemon holds no file open for writing: the
// kernel sends a close's RELEASE after close(2) has returned.
func waitReleased(t *testing.T, m *Mounted) {
	t.Helper()
	n := 0
	if testsupport.Poll(5*time.Second, func() bool {
		m.fs.writers.mu.Lock()
		n = len(m.fs.writers.m)
		m.fs.writers.mu.Unlock()
		return n == 0
	}) != nil {
		t.Fatalf("%d files still open for writing in the daemon 5 s after their close", n)
	}
}

func writeFile(t *testing.T, p, content string) {
	t.Helper()
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func readFile(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// shortQuote quotes s, shortened (with its length and a hash) when long.
func shortQuote(s string) string {
	if len(s) <= 64 {
		return strconv.Quote(s)
	}
	return fmt.Sprintf("%q...(%d bytes, sha256 %.8x)", s[:32], len(s), sha256.Sum256([]byte(s)))
}

// diffTrees describes how got differs from want ("" when equal).
func diffTrees(got, want testsupport.Tree) string {
	return strings.Join(testsupport.DiffTrees(want, got), "\n")
}

// wantErrno checks that err is the errno want.
func wantErrno(t *testing.T, what string, err error, want syscall.Errno) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Errorf("%s: got %v, want %v", what, err, want)
	}
}

// mounted lists every mountpoint the tests mounted, for TestMain's check.
var mounted struct {
	sync.Mutex // guards paths
	paths      []string
}

func TestMain(m *testing.M) {
	code := m.Run()
	// Never leave a mount behind. (Only ours: other packages' tests may
	// be mounting at the same time.)
	mounted.Lock()
	defer mounted.Unlock()
	for _, p := range mounted.paths {
		if isMounted(p) {
			os.Stderr.WriteString("fs tests: still mounted: " + p + "\n")
			unix.Unmount(p, unix.MNT_DETACH)
			if code == 0 {
				code = 1
			}
		}
	}
	os.Exit(code)
}

func readJSON(t fatalT, s string, v any) {
	t.Helper()
	if err := json.Unmarshal([]byte(s), v); err != nil {
		t.Fatalf("%q: %v", s, err)
	}
}
