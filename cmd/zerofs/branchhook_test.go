package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/zerofs/zerofs/internal/testsupport"
)

// worktreeRemovePayload is Claude Code's real WorktreeRemove payload
// (hooks/testdata/payloads) naming the worktree at path, with its cwd
// there, as Claude Code sent it.
func worktreeRemovePayload(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "hooks", "testdata", "payloads", "claude-WorktreeRemove.json"))
	if err != nil {
		t.Fatal(err)
	}
	return strings.ReplaceAll(string(b), "/work/app-worktrees/greet", path)
}

// lastLine is the last non-empty line of s: what Claude Code takes from a
// WorktreeCreate hook's stdout.
func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.TrimSpace(lines[len(lines)-1])
}

// TestBranchHookMounted runs `zerofs branch --hook --agent claude` as the
// hooks `hooks install claude --worktrees` writes run it, with Claude Code
// 2.1.328's real WorktreeCreate and WorktreeRemove payloads: on an
// unmounted workspace the creation fails and says why; mounted, each
// worktree is a branch beside the workspace (WORKSPACE-branches/NAME),
// printed as the last line on stdout, at the workspace as it is now, a
// workspace of its own whose writes stay there; asking again for the same
// name gives the same branch; a removal while the branch holds changes
// not merged exits 1 saying how to merge or drop it and keeps it; once
// merged, the removal deletes it, as it deletes a subagent's branch that
// changed nothing at once; a payload with a name that could lead
// elsewhere fails the creation, and a removal of a directory that is no
// branch leaves it alone.
func TestBranchHookMounted(t *testing.T) {
	built.NeedFUSE(t)
	dir := t.TempDir()
	ws := filepath.Join(dir, "app")
	os.Mkdir(ws, 0o755)
	writeFile(t, filepath.Join(ws, "app.py"), "print('hi')\n")
	hook := func(cwd, payload string) result {
		t.Helper()
		return bin(t, cwd, payload, "branch", "--hook", "--agent", "claude")
	}
	mountT(t, ws)
	binOK(t, "/", "umount", ws)
	if r := hook("/", fixture(t, "claude-WorktreeCreate.json", ws)); r.code != 1 || !strings.Contains(r.stderr, "not mounted") || r.stdout != "" {
		t.Fatalf("on an unmounted workspace: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	if _, err := os.Stat(filepath.Join(dir, "app-branches")); err == nil {
		t.Error("a failed creation made the branches' directory")
	}
	mountT(t, ws)
	made := map[string]bool{}
	t.Cleanup(func() {
		for d := range made {
			if _, err := os.Stat(d); err == nil {
				bin(t, ws, "", "branch", "--delete", d, "--force")
			}
			if testsupport.FUSEMounted(d) {
				t.Errorf("%s is still mounted", d)
				testsupport.Detach(t, d)
			}
		}
	})
	create := func(fixtureName string) string {
		t.Helper()
		r := hook("/", fixture(t, fixtureName, ws))
		if r.code != 0 {
			t.Fatalf("%s: exit %d: %s", fixtureName, r.code, r.stderr)
		}
		p := lastLine(r.stdout)
		made[p] = true
		return p
	}

	p := create("claude-WorktreeCreate.json")
	if want := filepath.Join(dir, "app-branches", "greet"); p != want {
		t.Fatalf("the branch is at %q, want %q", p, want)
	}
	if !testsupport.FUSEMounted(p) || readTrim(t, filepath.Join(p, "app.py")) != "print('hi')" {
		t.Fatalf("%s is not a mounted branch of the workspace", p)
	}
	binOK(t, p, "step", "Write greet.py")
	writeFile(t, filepath.Join(p, "greet.py"), "def greet():\n    return 1\n")
	if _, err := os.Stat(filepath.Join(ws, "greet.py")); err == nil {
		t.Fatal("a write in the branch reached the workspace")
	}
	if again := create("claude-WorktreeCreate.json"); again != p {
		t.Errorf("asked again for greet: %q, want the same branch %q", again, p)
	}
	list := binOK(t, ws, "branch", "--list")
	if !strings.Contains(list, p) {
		t.Errorf("branch --list does not name %s:\n%s", p, list)
	}

	// Removal with changes not merged: refused, the branch kept. The hook
	// runs in the worktree itself, as Claude Code's payload says.
	r := hook(p, worktreeRemovePayload(t, p))
	if r.code != 1 || !strings.Contains(r.stderr, "not merged") || !strings.Contains(r.stderr, "zerofs merge "+p) ||
		!strings.Contains(r.stderr, "zerofs branch --delete "+p+" --force") {
		t.Fatalf("removal of an unmerged branch: exit %d, stderr %q", r.code, r.stderr)
	}
	if !testsupport.FUSEMounted(p) || readTrim(t, filepath.Join(p, "greet.py")) != "def greet():\n    return 1" {
		t.Fatal("a refused removal did not keep the branch")
	}
	binOK(t, ws, "merge", p)
	if got := readTrim(t, filepath.Join(ws, "greet.py")); got != "def greet():\n    return 1" {
		t.Fatalf("after the merge greet.py is %q", got)
	}
	if r := hook(p, worktreeRemovePayload(t, p)); r.code != 0 {
		t.Fatalf("removal of a merged branch: exit %d, stderr %q", r.code, r.stderr)
	}
	if testsupport.FUSEMounted(p) || strings.Contains(binOK(t, ws, "branch", "--list"), p) {
		t.Errorf("the removed branch %s is still there", p)
	}
	// Removed twice (the agent retrying): nothing to do.
	if r := hook("/", worktreeRemovePayload(t, p)); r.code != 0 {
		t.Errorf("a second removal: exit %d, stderr %q", r.code, r.stderr)
	}

	// A subagent's worktree that changed nothing goes at once.
	q := create("claude-WorktreeCreate-subagent.json")
	if filepath.Base(q) != "agent-a51dc467bf860b5bc" || filepath.Dir(q) != filepath.Join(dir, "app-branches") {
		t.Errorf("the subagent's branch is at %s", q)
	}
	if r := hook("/", worktreeRemovePayload(t, q)); r.code != 0 || testsupport.FUSEMounted(q) {
		t.Errorf("removal of an unchanged branch: exit %d, stderr %q", r.code, r.stderr)
	}

	// A name that could lead elsewhere fails the creation; nothing is made.
	bad := strings.Replace(fixture(t, "claude-WorktreeCreate.json", ws), `"name":"greet"`, `"name":"../../etc"`, 1)
	if r := hook("/", bad); r.code != 1 || r.stdout != "" || !strings.Contains(r.stderr, "worktree name") {
		t.Errorf("a bad name: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	// A workspace that cannot branch (overlayfs options cannot carry a
	// ',' in its path) fails the creation and leaves nothing beside it.
	odd := filepath.Join(dir, "odd,name")
	os.Mkdir(odd, 0o755)
	mountT(t, odd)
	if r := hook("/", fixture(t, "claude-WorktreeCreate.json", odd)); r.code != 1 || r.stdout != "" || !strings.Contains(r.stderr, "overlayfs") {
		t.Errorf("a workspace that cannot branch: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	if _, err := os.Stat(odd + "-branches"); err == nil {
		t.Errorf("a failed creation left %s-branches behind", odd)
	}
	if bs := branchList(t, odd); len(bs) != 0 {
		t.Errorf("a failed creation left branches %+v", bs)
	}
	// Where the directory beside the workspace cannot be made (here a
	// file is in the way), the branch goes to the user's state directory,
	// and its removal finds its workspace all the same.
	home := t.TempDir()
	t.Setenv("HOME", home)
	t.Setenv("XDG_STATE_HOME", "")
	ws2 := filepath.Join(dir, "app2")
	os.Mkdir(ws2, 0o755)
	writeFile(t, filepath.Join(dir, "app2-branches"), "in the way\n")
	mountT(t, ws2)
	r = hook("/", fixture(t, "claude-WorktreeCreate.json", ws2))
	s := lastLine(r.stdout)
	if r.code == 0 {
		made[s] = true
	}
	if r.code != 0 || !strings.HasPrefix(s, filepath.Join(home, ".local", "state", "zerofs", "branches", "app2-")+"") || filepath.Base(s) != "greet" || !testsupport.FUSEMounted(s) {
		t.Fatalf("with the sibling directory in the way: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	if r := hook(s, worktreeRemovePayload(t, s)); r.code != 0 || testsupport.FUSEMounted(s) {
		t.Errorf("removal of the branch in the state directory: exit %d, stderr %q", r.code, r.stderr)
	}
	// A directory that is no branch is left alone.
	other := filepath.Join(dir, "other")
	os.Mkdir(other, 0o755)
	writeFile(t, filepath.Join(other, "keep.txt"), "keep\n")
	if r := hook("/", worktreeRemovePayload(t, other)); r.code != 1 || !strings.Contains(r.stderr, "no branch") {
		t.Errorf("removal of a directory that is no branch: exit %d, stderr %q", r.code, r.stderr)
	}
	if readTrim(t, filepath.Join(other, "keep.txt")) != "keep" {
		t.Error("a removal touched a directory that is no branch")
	}
}

// TestBranchHookParallel: Claude Code starts parallel subagents' worktrees
// at once; four WorktreeCreate hooks running together each get a branch of
// their own, and four WorktreeRemove hooks together delete them all.
func TestBranchHookParallel(t *testing.T) {
	built.NeedFUSE(t)
	dir := t.TempDir()
	ws := filepath.Join(dir, "app")
	os.Mkdir(ws, 0o755)
	writeFile(t, filepath.Join(ws, "app.py"), "print('hi')\n")
	mountT(t, ws)
	deleteBranchesAtCleanup(t, ws)
	const n = 4
	payload := fixture(t, "claude-WorktreeCreate-subagent.json", ws)
	paths := make([]string, n)
	results := make([]result, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p := strings.Replace(payload, "agent-a51dc467bf860b5bc", fmt.Sprintf("agent-%d", i), 1)
			results[i] = bin(t, "/", p, "branch", "--hook", "--agent", "claude")
			paths[i] = lastLine(results[i].stdout)
		}()
	}
	wg.Wait()
	seen := map[string]bool{}
	for i, r := range results {
		if r.code != 0 || seen[paths[i]] || !testsupport.FUSEMounted(paths[i]) {
			t.Fatalf("creation %d: exit %d, path %q, stderr %q", i, r.code, paths[i], r.stderr)
		}
		seen[paths[i]] = true
	}
	if bs := branchList(t, ws); len(bs) != n {
		t.Fatalf("branches: %+v", bs)
	}
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i] = bin(t, "/", worktreeRemovePayload(t, paths[i]), "branch", "--hook", "--agent", "claude")
		}()
	}
	wg.Wait()
	for i, r := range results {
		if r.code != 0 || testsupport.FUSEMounted(paths[i]) {
			t.Errorf("removal %d: exit %d, stderr %q", i, r.code, r.stderr)
		}
	}
	if bs := branchList(t, ws); len(bs) != 0 {
		t.Errorf("branches left: %+v", bs)
	}
}
