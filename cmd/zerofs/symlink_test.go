package main

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/zerofs/zerofs/record"
)

// TestMountedDiffNeverFollowsSymlinkOutOfWorkspace (issue 7, defect 5):
// after `rm -rf d; ln -s /outside/dir d`, the mounted `zerofs diff 1`
// printed /outside/dir/victim.txt as the new d/victim.txt, and `log
// --stat` its size. Now and every past state are read beneath the mount's
// root, never through a symlink: d/victim.txt is deleted, d is a symlink.
func TestMountedDiffNeverFollowsSymlinkOutOfWorkspace(t *testing.T) {
	built.NeedFUSE(t)
	dir := t.TempDir()
	outside := filepath.Join(dir, "outside", "dir")
	writeFile(t, filepath.Join(outside, "victim.txt"), "SECRET outside the workspace\n")
	ws := filepath.Join(dir, "ws")
	writeFile(t, filepath.Join(ws, "d", "victim.txt"), "mine\n")
	mountT(t, ws)

	binOK(t, ws, "step", "swap")
	if err := os.RemoveAll(filepath.Join(ws, "d")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(ws, "d")); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"diff", "1"}, {"diff", "0"}, {"log", "--stat"}, {"log", "--json"}} {
		out := binOK(t, ws, args...)
		if strings.Contains(out, "SECRET") || strings.Contains(out, "added     d/victim.txt") || strings.Contains(out, "29 B") {
			t.Errorf("zerofs %s read outside the workspace:\n%s", strings.Join(args, " "), out)
		}
	}
	diff := binOK(t, ws, "diff", "1")
	for _, want := range []string{
		"diff --git a/d/victim.txt b/d/victim.txt\ndeleted file mode 100644\n",
		"-mine\n",
		"diff --git a/d b/d\nnew file mode 120000\n",
		"+" + outside + "\n",
	} {
		if !strings.Contains(diff, want) {
			t.Errorf("diff 1 lacks %q:\n%s", want, diff)
		}
	}
	// --stat shows the directory becoming a symlink, with no directory sizes.
	stat := binOK(t, ws, "log", "--stat")
	for _, want := range []string{
		"modified  d@  (directory -> symlink to " + outside + ")",
		"deleted   d/victim.txt",
	} {
		if !strings.Contains(stat, want) {
			t.Errorf("log --stat lacks %q:\n%s", want, stat)
		}
	}
	if strings.Contains(stat, "KiB") {
		t.Errorf("log --stat shows a directory size:\n%s", stat)
	}

	// A past state where d was the symlink is read the same way: @T/d is
	// never crossed.
	swapped := strconv.FormatUint(uint64(daemonHead(t, ws)), 10)
	binOK(t, ws, "step", "back")
	os.Remove(filepath.Join(ws, "d"))
	writeFile(t, filepath.Join(ws, "d", "victim.txt"), "back\n")
	diff = binOK(t, ws, "diff", swapped)
	if strings.Contains(diff, "SECRET") || !strings.Contains(diff, "deleted file mode 120000") ||
		!strings.Contains(diff, "+back\n") || !strings.Contains(diff, "--- /dev/null\n+++ b/d/victim.txt\t(now)") {
		t.Errorf("diff %s:\n%s", swapped, diff)
	}
	if r := bin(t, ws, "", "show", swapped, "d/victim.txt"); r.code != 1 || strings.Contains(r.stdout, "SECRET") {
		t.Errorf("show %s d/victim.txt: exit %d, stdout %q, stderr %q", swapped, r.code, r.stdout, r.stderr)
	}
}

// daemonHead is the mount's head sequence.
func daemonHead(t *testing.T, ws string) record.Seq {
	t.Helper()
	n, err := strconv.ParseUint(readTrim(t, filepath.Join(ws, ".zero", "head")), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return record.Seq(n)
}
