package e2e

import (
	"bytes"
	"github.com/zerofs/zerofs/internal/testsupport"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
	"time"
)

// TestCrashDuringMerge SIGKILLs the daemon while `zerofs merge` brings in
// a fork that changed 1,500 files, once the merge has applied some of its
// changes (its progress in .zero/status), then remounts: the workspace is
// merged whole or not at all, never half, and when merged one undo takes
// it all back.
func TestCrashDuringMerge(t *testing.T) {
	built.NeedFUSE(t)
	dir := t.TempDir()
	ws, fork := filepath.Join(dir, "ws"), filepath.Join(dir, "fork")
	os.Mkdir(ws, 0o755)
	const n = 1500
	for i := range n {
		d := filepath.Join(ws, "d"+strconv.Itoa(i%30))
		os.MkdirAll(d, 0o755)
		if err := os.WriteFile(filepath.Join(d, "f"+strconv.Itoa(i)), []byte("line 1\nline 2\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	m := mountForeground(t, ws)
	if out, err := exec.Command(binary, "-C", ws, "fork", "0", fork).CombinedOutput(); err != nil {
		t.Fatalf("fork: %v\n%s", err, out)
	}
	for i := range n {
		p := filepath.Join(fork, "d"+strconv.Itoa(i%30), "f"+strconv.Itoa(i))
		if err := os.WriteFile(p, []byte("line 1\nline 2\nfork "+strconv.Itoa(i)+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	killMidMerge(t, m, ws, fork)
	m2 := mountForeground(t, ws)
	defer m2.crash(t, ws)
	merged, unmerged := countMerged(t, ws, n, func(i int) string {
		return filepath.Join("d"+strconv.Itoa(i%30), "f"+strconv.Itoa(i))
	}, "fork")
	if merged != 0 && unmerged != 0 {
		t.Fatalf("after a SIGKILL during a merge and a remount: %d files merged, %d not", merged, unmerged)
	}
	t.Logf("after the remount: %d of %d files merged", merged, n)
	if merged == n {
		if b, err := exec.Command(binary, "-C", ws, "undo").CombinedOutput(); err != nil || !bytes.Contains(b, []byte("undid merge")) {
			t.Fatalf("undo: %v %s", err, b)
		}
		b, _ := os.ReadFile(filepath.Join(ws, "d0", "f0"))
		if string(b) != "line 1\nline 2\n" {
			t.Errorf("after undo: f0 %q", b)
		}
	}
}

// killMidMerge runs `zerofs merge side` in the workspace ws mounted by m
// and SIGKILLs m's daemon once the merge's progress in .zero/status says
// it has applied some of its changes (or after a minute without a sign).
func killMidMerge(t *testing.T, m *fgMount, ws, side string) {
	t.Helper()
	merge := exec.Command(binary, "-C", ws, "merge", side)
	var out bytes.Buffer
	merge.Stdout, merge.Stderr = &out, &out
	if err := merge.Start(); err != nil {
		t.Fatal(err)
	}
	done := regexp.MustCompile(`"doneItems":([1-9][0-9]*)`)
	var seen string
	err := testsupport.Poll(60*time.Second, func() bool {
		st, _ := os.ReadFile(filepath.Join(ws, ".zero/status"))
		if mm := done.FindSubmatch(st); mm != nil {
			seen = string(mm[1])
			return true
		}
		return false
	})
	m.crash(t, ws)
	merge.Wait()
	if err != nil {
		t.Logf("the merge's progress was never seen (%v); killed anyway; merge said: %s", err, out.String())
	} else {
		t.Logf("killed with %s of the merge's changes done", seen)
	}
}

// countMerged counts the n files name(i) of ws that hold their merged
// content ("line 1\nline 2\n" + side + " i\n") and those that hold the
// base's; any other content fails the test.
func countMerged(t *testing.T, ws string, n int, name func(int) string, side string) (merged, unmerged int) {
	t.Helper()
	for i := range n {
		c, err := os.ReadFile(filepath.Join(ws, name(i)))
		switch {
		case err != nil:
			t.Fatal(err)
		case string(c) == "line 1\nline 2\n":
			unmerged++
		case string(c) == "line 1\nline 2\n"+side+" "+strconv.Itoa(i)+"\n":
			merged++
		default:
			t.Fatalf("%s: %q", name(i), c)
		}
	}
	return merged, unmerged
}
