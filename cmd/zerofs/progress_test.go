package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/zerofs/zerofs/internal/testsupport"
	"github.com/zerofs/zerofs/record"
)

// progressHistory is an unmounted workspace whose last step wrote n files
// of size bytes each: a rewind to -1 removes them, a revert puts them back.
func progressHistory(t *testing.T, n, size int) *store {
	t.Helper()
	s := newStore(t, map[string]string{"keep": "k\n"})
	s.step("write many")
	s.change(func(ws string) error { return os.Mkdir(filepath.Join(ws, "d"), 0o755) }, "d")
	for i := range n {
		s.write(fmt.Sprintf("d/f%04d", i), strings.Repeat("x", size))
	}
	s.close()
	return s
}

// runOnTTY runs the binary with stderr on a terminal (a pty) and stdout
// on a pipe, and returns both as written.
func runOnTTY(t *testing.T, dir string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	built.Need(t)
	ptm, tty := ptyPair(t)
	cmd := exec.Command(binary, args...)
	cmd.Dir = dir
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, tty
	cmd.Env = append(os.Environ(), "NO_COLOR=1")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	tty.Close() // the child holds its own copy
	var errb bytes.Buffer
	done := make(chan struct{})
	go func() { io.Copy(&errb, ptm); close(done) }() // ends with EIO once the child exits
	err := cmd.Wait()
	<-done
	if xe, ok := err.(*exec.ExitError); ok {
		code = xe.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return out.String(), errb.String(), code
}

// TestProgressOnTerminal: a long rewind, revert, fork and verify show a
// bar on stderr when it is a terminal (files done of the total, the rate),
// clear it before their report, and print it never on stdout; in a pipe,
// or with -q, stderr stays empty. (The machinery: a pty, as a person's
// terminal.)
func TestProgressOnTerminal(t *testing.T) {
	s := progressHistory(t, 400, 2000)
	for _, tc := range []struct {
		args []string
		bar  string // what the bar says
		noun string // what it counts
		out  string // the report's start, on stdout
	}{
		{[]string{"rewind", "-1"}, "rewind", "files", "rewound to "},
		{[]string{"revert", "@"}, "revert", "files", "reverted step "},
		{[]string{"verify"}, "verify blobs", "blobs", "ok: "},
		{[]string{"fork", "@", filepath.Join(t.TempDir(), "fork")}, "fork", "files", "forked "},
	} {
		t.Run(tc.args[0], func(t *testing.T) {
			stdout, stderr, code := runOnTTY(t, s.ws, tc.args...)
			if code != 0 {
				t.Fatalf("zerofs %s: exit %d\nstdout %q\nstderr %q", strings.Join(tc.args, " "), code, stdout, stderr)
			}
			if !strings.HasPrefix(stdout, tc.out) || strings.ContainsAny(stdout, "\r\x1b") || strings.Contains(stdout, "%") {
				t.Errorf("stdout %q: want only the report (starting %q)", stdout, tc.out)
			}
			if !strings.Contains(stderr, tc.bar) || !regexp.MustCompile(`\d `+tc.noun).MatchString(stderr) || !strings.Contains(stderr, "\r") {
				t.Errorf("stderr on a terminal %q: want a progress line for %q", stderr, tc.bar)
			}
			if tc.args[0] == "fork" {
				// Of the total: the tree now (keep, d and its files),
				// listed before the copy (it was a spinner).
				if !regexp.MustCompile(`fork: \d+/402 files `).MatchString(stderr) {
					t.Errorf("fork: want a bar of the 402 paths in %q", stderr)
				}
			}
			// The bar is cleared: after its last frame, the line is erased.
			if i := strings.LastIndex(stderr, "\x1b[K"); i < 0 || strings.TrimSpace(strings.ReplaceAll(stderr[i+3:], "\r", "")) != "" {
				t.Errorf("stderr does not end with the bar cleared: %q", stderr[max(0, len(stderr)-200):])
			}
			// Undo what it did, for the next case.
			if tc.args[0] == "rewind" || tc.args[0] == "revert" {
				mustRun(t, s.ws, "undo")
			}
		})
	}
	// In a pipe, and with -q on a terminal, nothing but the report.
	r := bin(t, s.ws, "", "rewind", "-1")
	if r.code != 0 || r.stderr != "" || !strings.HasPrefix(r.stdout, "rewound to ") {
		t.Errorf("rewind in a pipe: exit %d, stdout %q, stderr %q: want the report alone", r.code, r.stdout, r.stderr)
	}
	mustRun(t, s.ws, "undo")
	stdout, stderr, code := runOnTTY(t, s.ws, "-q", "rewind", "-1")
	if code != 0 || stderr != "" || !strings.HasPrefix(stdout, "rewound to ") {
		t.Errorf("zerofs -q rewind on a terminal: exit %d, stdout %q, stderr %q: want no progress", code, stdout, stderr)
	}
}

// TestProgressMounted: mounted, the daemon does the work; the command
// polls its counts (.zero/status "progress", there only while a rewind or
// gc runs) into the same bar, cleared before the report. A fork copies
// the mount's @T/ itself, with a bar of the paths it listed.
func TestProgressMounted(t *testing.T) {
	built.NeedFUSE(t)
	ws := filepath.Join(t.TempDir(), "ws")
	writeFile(t, filepath.Join(ws, "keep"), "k\n")
	mountT(t, ws)
	mustRun(t, ws, "step", "write many")
	if err := os.Mkdir(filepath.Join(ws, "d"), 0o755); err != nil {
		t.Fatal(err)
	}
	for i := range 300 {
		writeFile(t, filepath.Join(ws, "d", fmt.Sprintf("f%03d", i)), strings.Repeat("y", 1000))
	}
	// A fork of the mount copies @T/: the tree's paths (keep, d and its
	// files) of their total, listed before the copy (it was a spinner).
	stdout, stderr, code := runOnTTY(t, ws, "fork", "@", filepath.Join(t.TempDir(), "fork"))
	if code != 0 || !strings.HasPrefix(stdout, "forked ") || strings.ContainsAny(stdout, "\r\x1b") {
		t.Fatalf("mounted fork on a terminal: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	if !regexp.MustCompile(`fork: \d+/302 files `).MatchString(stderr) || !strings.HasSuffix(strings.ReplaceAll(stderr, "\r", ""), "\x1b[K") {
		t.Errorf("mounted fork: stderr %q: want a bar of the 302 paths, cleared", stderr)
	}
	stdout, stderr, code = runOnTTY(t, ws, "rewind", "-1")
	if code != 0 || !strings.HasPrefix(stdout, "rewound to ") || strings.ContainsAny(stdout, "\r\x1b") {
		t.Fatalf("mounted rewind on a terminal: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	if !strings.Contains(stderr, "rewind") || !strings.HasSuffix(strings.ReplaceAll(stderr, "\r", ""), "\x1b[K") {
		t.Errorf("stderr %q: want the bar, cleared", stderr)
	}
	b, err := os.ReadFile(filepath.Join(ws, ".zero", "status"))
	if err != nil || strings.Contains(string(b), `"progress"`) {
		t.Errorf(".zero/status after the rewind: %s %v: want no progress", b, err)
	}
}

// TestProgressGCAndReplicate: issue 18, "Long work shows progress": `gc`
// showed only a spinner with the time spent (the store's prune had no
// hook) and `replicate --once` nothing at all. On a terminal each now
// shows a bar with what it has done of its total (gc: a phase of the
// store's work; replicate: the blobs the new events need, then the
// base), cleared before the report; in a pipe and with -q, nothing.
func TestProgressGCAndReplicate(t *testing.T) {
	testsupport.StartS3(t)
	const n = 300
	s := rewrittenStore(t, n)

	bar := func(what, stderr string) {
		t.Helper()
		if !strings.Contains(stderr, "\r") {
			t.Errorf("%s: no progress line on the terminal: %q", what, stderr)
		}
		if i := strings.LastIndex(stderr, "\x1b[K"); i < 0 || strings.TrimSpace(strings.ReplaceAll(stderr[i+3:], "\r", "")) != "" {
			t.Errorf("%s: stderr does not end with the bar cleared: %q", what, stderr[max(0, len(stderr)-200):])
		}
	}
	const url = "s3://replicas/progress"
	stdout, stderr, code := runOnTTY(t, s.ws, "replicate", "--once", url)
	if code != 0 || !strings.HasPrefix(stdout, "replicated to ") || strings.ContainsAny(stdout, "\r\x1b") {
		t.Fatalf("replicate --once on a terminal: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	bar("replicate --once", stderr)
	// The blobs the events name (each file's two earlier contents), of
	// their total, with their bytes; then the base.
	m := regexp.MustCompile(`replicate: (\d+)/(\d+) blobs`).FindAllStringSubmatch(stderr, -1)
	if len(m) == 0 {
		t.Fatalf("replicate --once: no count of the blobs to upload in %q", stderr)
	}
	if total, _ := strconv.Atoi(m[0][2]); total < n {
		t.Errorf("replicate --once counts %d blobs to upload, want at least %d: %q", total, n, m[0][0])
	}
	if !strings.Contains(stderr, "KiB") {
		t.Errorf("replicate --once: want the bytes in %q", stderr)
	}
	// Then the base: the paths of the tree it writes down (the n files),
	// of their total, with their bytes (it was a spinner counting up).
	b := regexp.MustCompile(`replicate base: \d+/(\d+) files .*\( ?[\d.]+( B| KiB)?/[\d.]+ KiB`).FindStringSubmatch(stderr)
	if b == nil {
		t.Fatalf("replicate --once: no bar of the base's paths of their total in %q", stderr)
	}
	if total, _ := strconv.Atoi(b[1]); total != n {
		t.Errorf("replicate --once: the base counts %d paths, want %d: %q", total, n, b[0])
	}
	if r := bin(t, s.ws, "", "replicate", "--once", url); r.code != 0 || r.stderr != "" {
		t.Errorf("replicate --once in a pipe: exit %d, stderr %q: want the report alone", r.code, r.stderr)
	}

	stdout, stderr, code = runOnTTY(t, s.ws, "gc", "--keep-steps", "1")
	if code != 0 || !strings.HasPrefix(stdout, "pruned history before ") || strings.ContainsAny(stdout, "\r\x1b") {
		t.Fatalf("gc on a terminal: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	bar("gc", stderr)
	// A phase of the store's work over its total (a percentage, or the
	// count of its total), not only the spinner it was.
	if !regexp.MustCompile(`gc: (remove blobs: \d+/\d+ blobs|repack: \d+/\d+ records|delete packs: \d+/\d+ packs|absorb kept blobs: \d+/\d+ blobs)`).MatchString(stderr) {
		t.Errorf("gc: want a phase of the store's work over its total, in %q", stderr)
	}
}

// TestProgressRestore: issue 18, "Long work shows progress": `restore`
// showed a spinner through its download. On a terminal it now shows what
// it downloads of the total the replica's listing gives: the history's
// objects (the base and the segments up to it, counted: their sizes are
// not listed), then the blobs they name with their bytes, then the files
// it writes; then the rewind to --at. The bar is cleared before the
// report; stdout is the report alone; in a pipe and with -q, nothing.
func TestProgressRestore(t *testing.T) {
	testsupport.StartS3(t)
	const n = 200
	s := rewrittenStore(t, n)
	const url = "s3://replicas/restore"
	mustRun(t, s.ws, "replicate", "--once", url)

	// The objects it lists: the base, and the segments up to it (one
	// --once: all of them).
	var sum struct {
		Segments int          `json:"segments"`
		Bases    []record.Seq `json:"bases"`
	}
	if err := json.Unmarshal([]byte(mustRun(t, s.ws, "log", "--replica", url, "--json")), &sum); err != nil {
		t.Fatal(err)
	}
	if len(sum.Bases) != 1 {
		t.Fatalf("replica: %+v, want one base", sum)
	}
	dir := filepath.Join(t.TempDir(), "restored")
	stdout, stderr, code := runOnTTY(t, s.ws, "restore", url, dir, "--at", "1")
	if code != 0 || !strings.HasPrefix(stdout, "restored @1 of ") || strings.ContainsAny(stdout, "\r\x1b") {
		t.Fatalf("restore on a terminal: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	if i := strings.LastIndex(stderr, "\x1b[K"); i < 0 || strings.TrimSpace(strings.ReplaceAll(stderr[i+3:], "\r", "")) != "" {
		t.Errorf("restore: stderr does not end with the bar cleared: %q", stderr[max(0, len(stderr)-200):])
	}
	total := func(re string) int {
		t.Helper()
		m := regexp.MustCompile(re).FindStringSubmatch(stderr)
		if m == nil {
			t.Fatalf("restore: no %s in %q", re, stderr)
		}
		n, _ := strconv.Atoi(m[1])
		return n
	}
	if got := total(`restore: download history .*\(\d+/(\d+), [\d.]+ objects/`); got != 1+sum.Segments {
		t.Errorf("restore counts %d objects of history to download, want %d (a base, %d segments)", got, 1+sum.Segments, sum.Segments)
	}
	// The blobs: as many as the restored store holds, with their bytes.
	blobs := total(`restore: download blobs: \d+/(\d+) blobs`)
	v := mustRun(t, dir, "verify")
	if want := fmt.Sprintf(" %d blobs verified", blobs); !strings.Contains(v, want) {
		t.Errorf("restore counts %d blobs to download; verify of what it restored: %q", blobs, v)
	}
	if blobs < n {
		t.Errorf("restore counts %d blobs to download, want at least %d", blobs, n)
	}
	// Their bytes done of the total (about 1 MiB: each file's two
	// contents).
	if !regexp.MustCompile(`restore: download blobs: \d+/\d+ blobs .*\( ?[\d.]+( B| KiB)?/9\d\d KiB`).MatchString(stderr) {
		t.Errorf("restore: the blobs' bar does not count their bytes of the total: %q", stderr)
	}
	// The files it writes: the state of the base (the files and the
	// workspace's own), then the rewind to 1.
	if got := total(`restore: write: \d+/(\d+) files`); got < n {
		t.Errorf("restore counts %d files to write, want at least %d", got, n)
	}
	if !strings.Contains(stderr, "rewind") {
		t.Errorf("restore --at 1: no bar for the rewind in %q", stderr)
	}

	// In a pipe, and with -q on a terminal, the report alone.
	r := bin(t, s.ws, "", "restore", url, filepath.Join(t.TempDir(), "piped"))
	if r.code != 0 || r.stderr != "" || !strings.HasPrefix(r.stdout, "restored @") {
		t.Errorf("restore in a pipe: exit %d, stdout %q, stderr %q: want the report alone", r.code, r.stdout, r.stderr)
	}
	stdout, stderr, code = runOnTTY(t, s.ws, "-q", "restore", url, filepath.Join(t.TempDir(), "quiet"))
	if code != 0 || stderr != "" || !strings.HasPrefix(stdout, "restored @") {
		t.Errorf("zerofs -q restore on a terminal: exit %d, stdout %q, stderr %q: want no progress", code, stdout, stderr)
	}
}

// rewrittenStore is a closed, unmounted store of n files of 3 KB, each
// rewritten in a step ("rewrite all") and one of them again after it ("one
// more"): a history whose gc, replication and restore have n blobs to count.
func rewrittenStore(t *testing.T, n int) *store {
	t.Helper()
	files := map[string]string{}
	for i := range n {
		files[fmt.Sprintf("f%03d", i)] = fmt.Sprintf("%d %s\n", i, strings.Repeat("a", 3000))
	}
	s := newStore(t, files)
	s.step("rewrite all")
	for i := range n {
		s.write(fmt.Sprintf("f%03d", i), fmt.Sprintf("%d %s\n", i, strings.Repeat("b", 2000)))
	}
	s.step("one more")
	s.write("f000", "c\n")
	s.close()
	return s
}
