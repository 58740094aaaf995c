package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/zerofs/zerofs/history"
	"github.com/zerofs/zerofs/internal/testsupport"
)

// TestClaudeSubagentsInBranchesMounted runs the real Claude Code (where it
// is installed: $ZEROFS_AGENTS_BIN or PATH) against a fake model
// (hooks/testdata/capture/anthropic.py, "worktree") on a mounted
// workspace after `zerofs hooks install claude --worktrees`. The main
// agent starts two subagents with isolation: "worktree"; Claude Code asks
// zerofs's WorktreeCreate hook for each worktree, and each is a zerofs
// branch beside the workspace. The first subagent writes greet.py with a
// Bash command in its branch: a step of the branch's own history (the
// branch carries the workspace's hooks), never a change of the
// workspace. Claude Code keeps both worktrees (it keeps a worktree a hook
// made) and names the first one's path to the main agent, which merges it
// with `zerofs merge PATH` (a Bash command): greet.py comes into the
// workspace as one entry of its log that names the subagent's step. Both
// branches are then deleted with `zerofs branch --delete`, which refuses
// neither: one is merged, the other changed nothing. The same in a git
// repository (Claude Code then reads the worktree's HEAD): the merge
// brings greet.py and nothing of the branch's .git.
func TestClaudeSubagentsInBranchesMounted(t *testing.T) {
	for _, git := range []bool{false, true} {
		name := "plain"
		if git {
			name = "git"
		}
		t.Run(name, func(t *testing.T) { claudeSubagentsInBranches(t, git) })
	}
}

func claudeSubagentsInBranches(t *testing.T, git bool) {
	claude := agentBinary(t, "claude")
	built.NeedFUSE(t)
	home := t.TempDir()
	t.Setenv("HOME", home)
	dir := t.TempDir()
	ws := filepath.Join(dir, "app")
	os.Mkdir(ws, 0o755)
	writeFile(t, filepath.Join(ws, "app.py"), "print('hi')\n")
	if git {
		sh(t, ws, "git init -q && git config user.email ada@example.com && git config user.name Ada && git add . && git commit -qm init")
	}
	t.Setenv("ZEROFS_CAPTURE_MERGE", binary)
	port := fakeModel(t, "anthropic.py", ws, "worktree")
	mountT(t, ws)
	deleteBranchesAtCleanup(t, ws)
	binOK(t, ws, "hooks", "install", "claude", "--worktrees")
	debug := filepath.Join(t.TempDir(), "claude-debug.log")
	out := runAgent(t, ws, []string{fmt.Sprintf("ANTHROPIC_BASE_URL=http://127.0.0.1:%d", port), "ANTHROPIC_API_KEY=fake"},
		claude, "-p", "Have two subagents work in worktrees", "--allowedTools", "Bash Edit Write Agent",
		"--permission-mode", "acceptEdits", "--debug-file", debug)
	defer func() {
		if t.Failed() {
			b, _ := os.ReadFile(debug)
			var lines []string
			for l := range strings.Lines(string(b)) {
				if strings.Contains(l, "orktree") || strings.Contains(l, "ook") {
					lines = append(lines, l)
				}
			}
			t.Logf("claude -p:\n%s\nits debug log, the worktree and hook lines:\n%s", out, strings.Join(lines, ""))
		}
	}()

	branches := branchList(t, ws)
	if len(branches) != 2 {
		t.Fatalf("branches after the run: %+v, want the two subagents'", branches)
	}
	var greet, list branchInfo
	for _, b := range branches {
		if filepath.Dir(b.Dir) != filepath.Join(dir, "app-branches") || !strings.HasPrefix(filepath.Base(b.Dir), "agent-") {
			t.Errorf("a branch at %s, want app-branches/agent-ID beside the workspace", b.Dir)
		}
		if !b.Mounted {
			t.Errorf("%s is not mounted", b.Dir)
		}
		if _, err := os.Stat(filepath.Join(b.Dir, "greet.py")); err == nil {
			greet = b
		} else {
			list = b
		}
	}
	if greet.Dir == "" || list.Dir == "" {
		t.Fatalf("no branch holds greet.py, or both do: %+v", branches)
	}
	if readTrim(t, filepath.Join(greet.Dir, "greet.py")) != "def greet():\n    return 1" {
		t.Errorf("greet.py in the branch: %q", readTrim(t, filepath.Join(greet.Dir, "greet.py")))
	}
	// The subagent's tool call is a step of the branch's own history.
	var blog []history.Entry
	if err := json.Unmarshal([]byte(binOK(t, greet.Dir, "log", "--json")), &blog); err != nil {
		t.Fatal(err)
	}
	var sub *history.Entry
	for i := range blog {
		if strings.HasPrefix(blog[i].Label, "Bash: printf") {
			sub = &blog[i]
		}
	}
	if sub == nil || sub.Agent != "" && sub.Agent != "claude" || len(sub.Changes) != 1 || sub.Changes[0].Path != "greet.py" {
		t.Fatalf("the branch's log: %+v, want the subagent's Bash step adding greet.py", blog)
	}

	// The main agent merged it: one entry of the workspace's log, naming
	// the subagent's step.
	if got := readTrim(t, filepath.Join(ws, "greet.py")); got != "def greet():\n    return 1" {
		t.Fatalf("greet.py in the workspace after the main agent's merge: %q", got)
	}
	var wlog []history.Entry
	if err := json.Unmarshal([]byte(binOK(t, ws, "log", "--json")), &wlog); err != nil {
		t.Fatal(err)
	}
	var merge *history.Entry
	for i := range wlog {
		if wlog[i].Rewind != nil && wlog[i].Rewind.Merge != nil {
			merge = &wlog[i]
		}
	}
	if merge == nil || merge.Rewind.Merge.Dir != greet.Dir || len(merge.Rewind.Merge.Steps) != 1 ||
		!strings.HasPrefix(merge.Rewind.Merge.Steps[0].Label, "Bash: printf") || merge.Turn == 0 {
		t.Fatalf("the workspace's log: %+v, want the merge of %s naming the subagent's step, in the person's turn", wlog, greet.Dir)
	}
	for _, e := range wlog {
		for _, c := range e.Changes {
			if c.Path == "greet.py" && e.Sequence != merge.Sequence {
				t.Errorf("greet.py changed in the workspace outside the merge: %+v", e)
			}
		}
	}

	// Done with them: neither is refused.
	for _, b := range []branchInfo{greet, list} {
		binOK(t, ws, "branch", "--delete", b.Dir)
		if testsupport.FUSEMounted(b.Dir) {
			t.Errorf("%s is still mounted after its deletion", b.Dir)
		}
	}
	if left := branchList(t, ws); len(left) != 0 {
		t.Errorf("branches left: %+v", left)
	}
	entries, _ := os.ReadDir(ws)
	var names []string
	for _, e := range entries {
		if e.Name() != ".zero" {
			names = append(names, e.Name())
		}
	}
	want := []string{".claude", "app.py", "greet.py"}
	if git {
		want = []string{".claude", ".git", "app.py", "greet.py"}
		if st := sh(t, ws, "git status --short"); st != "?? .claude/\n?? greet.py\n" {
			t.Errorf("git status after the merge:\n%s", st)
		}
	}
	if !slices.Equal(names, want) {
		t.Errorf("the workspace holds %q, want %q", names, want)
	}
}

// TestClaudeExitWorktreeKeepsUnmergedBranchMounted runs the real Claude
// Code ("enter": EnterWorktree, a Bash command writing greet.py there,
// ExitWorktree "remove", then again with discard_changes) on a mounted
// workspace with zerofs's worktree hooks: EnterWorktree's worktree is a
// branch; when Claude Code asks zerofs's WorktreeRemove hook to remove it,
// the hook refuses (the branch holds greet.py, merged nowhere), Claude
// Code keeps the worktree and logs the hook's reason, and the work is
// still there to merge. After `zerofs merge`, `zerofs branch --delete`
// drops it.
func TestClaudeExitWorktreeKeepsUnmergedBranchMounted(t *testing.T) {
	claude := agentBinary(t, "claude")
	built.NeedFUSE(t)
	t.Setenv("HOME", t.TempDir())
	dir := t.TempDir()
	ws := filepath.Join(dir, "app")
	os.Mkdir(ws, 0o755)
	writeFile(t, filepath.Join(ws, "app.py"), "print('hi')\n")
	port := fakeModel(t, "anthropic.py", ws, "enter")
	mountT(t, ws)
	deleteBranchesAtCleanup(t, ws)
	binOK(t, ws, "hooks", "install", "claude", "--worktrees")
	debug := filepath.Join(t.TempDir(), "claude-debug.log")
	out := runAgent(t, ws, []string{fmt.Sprintf("ANTHROPIC_BASE_URL=http://127.0.0.1:%d", port), "ANTHROPIC_API_KEY=fake"},
		claude, "-p", "Work in a worktree", "--allowedTools", "Bash Edit Write EnterWorktree ExitWorktree",
		"--permission-mode", "acceptEdits", "--debug-file", debug)
	b, _ := os.ReadFile(debug)
	defer func() {
		if t.Failed() {
			var lines []string
			for l := range strings.Lines(string(b)) {
				if strings.Contains(l, "orktree") {
					lines = append(lines, l)
				}
			}
			t.Logf("claude -p:\n%s\nits debug log, the worktree lines:\n%s", out, strings.Join(lines, ""))
		}
	}()
	p := filepath.Join(dir, "app-branches", "greet")
	if !strings.Contains(string(b), "WorktreeRemove hook failed") || !strings.Contains(string(b), "zerofs: kept the branch "+p+": it holds changes not merged") ||
		!strings.Contains(string(b), "WorktreeRemove hook exited 1") || !strings.Contains(string(b), "kept worktree at: "+p) {
		t.Errorf("Claude Code's debug log does not show the hook's refusal")
	}
	branches := branchList(t, ws)
	if len(branches) != 1 || branches[0].Dir != p || !branches[0].Mounted || !branches[0].Unmerged {
		t.Fatalf("branches: %+v, want %s kept, mounted and unmerged", branches, p)
	}
	if got := readTrim(t, filepath.Join(p, "greet.py")); got != "def greet():\n    return 1" {
		t.Fatalf("greet.py in the kept branch: %q", got)
	}
	if _, err := os.Stat(filepath.Join(ws, "greet.py")); err == nil {
		t.Fatal("the branch's work reached the workspace without a merge")
	}
	binOK(t, ws, "merge", p)
	binOK(t, ws, "branch", "--delete", p)
	if got := readTrim(t, filepath.Join(ws, "greet.py")); got != "def greet():\n    return 1" || testsupport.FUSEMounted(p) {
		t.Errorf("after merge and delete: greet.py %q, %s mounted %v", got, p, testsupport.FUSEMounted(p))
	}
}
