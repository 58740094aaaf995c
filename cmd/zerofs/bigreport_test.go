package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRewindLongReport (issue 14, defect 9): on a mounted workspace a
// rewind whose report is over 1 MiB (a dry run of 10,000 paths: its
// preview names each) is read whole, for a rewind and an undo alike. The
// client read at most 1 MiB and failed with "unexpected end of JSON
// input"; the real rewind, which ran a dry run first, failed with it too.
func TestRewindLongReport(t *testing.T) {
	ws := t.TempDir()
	mp := mountT(t, ws)
	mustRun(t, mp, "step", "many")
	dir := filepath.Join(mp, "a-directory-with-a-rather-long-name", "and-another-one-below-it")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	const n = 10_000
	for i := range n {
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("file-with-a-long-descriptive-name-%05d.txt", i)), []byte("x\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, args := range [][]string{{"rewind", "--dry-run", "1"}, {"undo", "--dry-run"}} {
		r := bin(t, mp, "", args...)
		if r.code != 0 {
			t.Fatalf("%s of %d paths: exit %d, stderr %q", args, n, r.code, r.stderr)
		}
		if got := strings.Count(r.stdout, "\n  delete "); got != n+2 || len(r.stdout) < 1<<20 {
			t.Fatalf("%s lists %d deletions in %d bytes, want %d in over 1 MiB", args, got, len(r.stdout), n+2)
		}
	}
	// The undo counts what it deleted as the dry run listed it: the
	// directories and every file beneath them.
	r := bin(t, mp, "", "undo")
	if r.code != 0 || r.stdout != fmt.Sprintf("undid step 1 \"many\": restored 0, deleted %d\n", n+2) {
		t.Fatalf("undo of %d paths: exit %d, stdout %q, stderr %q", n, r.code, r.stdout, r.stderr)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("after the undo the directory is still there: %v", err)
	}
}
