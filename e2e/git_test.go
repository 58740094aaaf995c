package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestGit runs a small git history under the mount (init, commit, branch,
// git mv, gc) with a step before each command, then rewinds to several of
// those steps: each time the tree is exactly what it was, `git fsck --full`
// is clean and git sees the expected branch, history and a clean status.
// git is a hard client: lock files renamed into place, packs, read-only
// objects, an index full of stat data that a rewind makes stale.
func TestGit(t *testing.T) {
	ws := mountT(t)
	home := t.TempDir()
	env := []string{
		"HOME=" + home, "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null",
		"GIT_AUTHOR_NAME=zerofs", "GIT_AUTHOR_EMAIL=e2e@zerofs.invalid",
		"GIT_COMMITTER_NAME=zerofs", "GIT_COMMITTER_EMAIL=e2e@zerofs.invalid",
	}
	git := func(args ...string) string {
		t.Helper()
		return must(t, ws, env, "git", append([]string{"-c", "init.defaultBranch=main", "-c", "gc.auto=0"}, args...)...)
	}
	materialize(t, ws, genTree(4, 40))
	os.WriteFile(filepath.Join(ws, "a.txt"), []byte("first\n"), 0o644)

	type point struct {
		seq    int64
		tree   tree
		branch string // "" when there is no repository
		log    string // git log --format=%s
	}
	mark := func(label, branch, log string) point {
		t.Helper()
		seq := step(t, ws, label)
		return point{seq, snapshot(t, ws), branch, log}
	}

	beforeInit := mark("git init", "", "")
	git("init", "-q")
	git("add", ".")
	git("commit", "-q", "-m", "one")
	beforeCheckout := mark("git checkout -b", "main", "one")
	git("checkout", "-q", "-b", "feature")
	git("mv", "a.txt", "b.txt")
	os.WriteFile(filepath.Join(ws, "b.txt"), []byte("second\n"), 0o644)
	git("commit", "-q", "-am", "two")
	beforeGC := mark("git gc", "feature", "two one")
	git("gc", "-q", "--prune=now")
	if out := git("count-objects", "-v"); !strings.Contains(out, "count: 0") {
		t.Errorf("git count-objects after gc: want no loose objects, got\n%s", out)
	}
	if got := git("status", "--porcelain"); got != "" {
		t.Errorf("git status --porcelain after gc: got %q, want empty", got)
	}

	// Newest first, then back and forth: a rewind is itself undoable
	// history, so the order must not matter.
	for _, p := range []point{beforeGC, beforeCheckout, beforeGC, beforeInit, beforeCheckout} {
		rewindTo(t, ws, p.seq)
		sameTree(t, "after rewind to "+itoa(p.seq), p.tree, snapshot(t, ws))
		if p.branch == "" {
			if exists(filepath.Join(ws, ".git")) {
				t.Errorf("rewind to %d (before git init): .git still exists", p.seq)
			}
			continue
		}
		if out := git("fsck", "--full", "--strict"); strings.TrimSpace(out) != "" {
			t.Errorf("git fsck --full after rewind to %d: got %q, want no output", p.seq, out)
		}
		if got := strings.TrimSpace(git("branch", "--show-current")); got != p.branch {
			t.Errorf("git branch after rewind to %d: got %q, want %q", p.seq, got, p.branch)
		}
		if got := strings.Join(strings.Fields(git("log", "--format=%s")), " "); got != p.log {
			t.Errorf("git log after rewind to %d: got %q, want %q", p.seq, got, p.log)
		}
		if got := git("status", "--porcelain"); got != "" {
			t.Errorf("git status --porcelain after rewind to %d: got %q, want empty", p.seq, got)
		}
	}

	// Rewound to before the checkout: git carries on from there.
	git("checkout", "-q", "-b", "again")
	os.WriteFile(filepath.Join(ws, "a.txt"), []byte("third\n"), 0o644)
	git("commit", "-q", "-am", "three")
	git("gc", "-q", "--prune=now")
	if out := git("fsck", "--full", "--strict"); strings.TrimSpace(out) != "" {
		t.Errorf("git fsck --full after carrying on: got %q", out)
	}
}
