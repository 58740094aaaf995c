package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/zerofs/zerofs/internal/testsupport"
)

// tree is a workspace's files (kind, permission bits, content), the
// store left out.
func tree(t *testing.T, ws string) testsupport.Tree { return testsupport.Snapshot(t, ws, ".zero") }

// TestUndoRedoStack: three undos then three redos return exactly where
// they started, each naming its step; mounted and unmounted alike (one
// golden for both).
func TestUndoRedoStack(t *testing.T) {
	bothSourcesTidy(t, func(t *testing.T, ws string) {
		start := tree(t, ws)
		var out bytes.Buffer
		trees := []testsupport.Tree{start}
		for range 3 {
			out.WriteString("$ zerofs undo\n" + mustRun(t, ws, "undo"))
			trees = append(trees, tree(t, ws))
		}
		r := wantFail(t, ws, 1, "zerofs: nothing to undo", "undo")
		out.WriteString("$ zerofs undo\n" + r.stderr)
		for i := range 3 {
			out.WriteString("$ zerofs redo\n" + mustRun(t, ws, "redo"))
			testsupport.SameTree(t, fmt.Sprintf("after redo %d, the tree as before undo %d", i+1, 3-i), trees[2-i], tree(t, ws))
		}
		r = wantFail(t, ws, 1, "zerofs: nothing to redo", "redo")
		out.WriteString("$ zerofs redo\n" + r.stderr)
		testsupport.SameTree(t, "after 3 undos and 3 redos", start, tree(t, ws))
		out.WriteString("$ zerofs log\n" + mustRun(t, ws, "log"))
		golden(t, "undo-redo.txt", out.String())
	})
}

// TestUndoAfterGC: undo after `gc --before 10` failed with "no sequence
// 9": the step at 10 is undone from the state just before its first
// checkpoint, which the gc kept. A step whose before-state is gone says so.
func TestUndoAfterGC(t *testing.T) {
	bothSourcesTidy(t, func(t *testing.T, ws string) {
		mustRun(t, ws, "gc", "--before", "10")
		if out := mustRun(t, ws, "undo"); out != "undid step 10 \"Tidy\": restored 1, deleted 0\n" {
			t.Errorf("undo after gc --before 10: %q", out)
		}
		if got := readTrim(t, filepath.Join(ws, "src", "main.go")); got != "package main" {
			t.Errorf("src/main.go after undo = %q", got)
		}
		wantFail(t, ws, 1, `zerofs: cannot undo step 4 "Bash": the state at 4 was pruned (history starts at 10)`, "undo")
		if out := mustRun(t, ws, "redo"); out != "redid step 10 \"Tidy\": restored 1, deleted 0\n" {
			t.Errorf("redo after gc: %q", out)
		}
	})
}

// TestConcurrentUndosMounted: two `zerofs undo`s at once through the mount
// undo two different steps, never the same one twice (the daemon picks
// each target under its lock).
func TestConcurrentUndosMounted(t *testing.T) {
	built.NeedFUSE(t)
	ws := filepath.Join(t.TempDir(), "ws")
	if err := os.MkdirAll(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	mountT(t, ws)
	const steps = 6
	for i := range steps {
		binOK(t, ws, "step", fmt.Sprintf("s%d", i))
		writeFile(t, filepath.Join(ws, fmt.Sprintf("f%d", i)), "x")
	}
	undone := map[string]bool{}
	for round := range steps / 2 {
		var wg sync.WaitGroup
		outs := make([]result, 2)
		for i := range outs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				outs[i] = bin(t, ws, "", "undo")
			}()
		}
		wg.Wait()
		for _, r := range outs {
			if r.code != 0 || !strings.HasPrefix(r.stdout, "undid step ") {
				t.Fatalf("round %d: undo: exit %d, stdout %q, stderr %q", round, r.code, r.stdout, r.stderr)
			}
			name := strings.Fields(r.stdout)[3]
			if undone[name] {
				t.Errorf("round %d: step %s undone twice: %q", round, name, r.stdout)
			}
			undone[name] = true
		}
		// The two newest steps still in effect went, and nothing else.
		for i := range steps {
			_, err := os.Lstat(filepath.Join(ws, fmt.Sprintf("f%d", i)))
			if want := i < steps-2*(round+1); (err == nil) != want {
				t.Errorf("round %d: f%d exists %v, want %v", round, i, err == nil, want)
			}
		}
	}
	if len(undone) != steps {
		t.Errorf("undid %d different steps, want %d: %v", len(undone), steps, undone)
	}
	wantFail(t, ws, 1, "nothing to undo", "undo")
	// A new step ends the redo chain; nothing is lost: every state keeps
	// its sequence.
	binOK(t, ws, "redo")
	binOK(t, ws, "step", "new")
	writeFile(t, filepath.Join(ws, "g"), "y")
	if r := bin(t, ws, "", "redo"); r.code != 1 || !strings.HasPrefix(r.stderr, "zerofs: nothing to redo: ") {
		t.Errorf("redo after a new step: exit %d, stderr %q", r.code, r.stderr)
	}
	if _, err := os.Stat(filepath.Join(ws, "f1")); !os.IsNotExist(err) {
		t.Errorf("f1 after redo of one undo: %v, want absent", err)
	}
}

// TestRefusalsCLI: each refusal the daemon (or the engine, unmounted)
// hands back typed reads as one clear line, mounted and unmounted alike,
// with the details the refusal carries (the mounted client reads nothing
// else to explain it): a sequence beyond head, one pruned, a revert of a
// step beyond head, nothing to undo or redo, an undo whose state was
// pruned, and a revert over later changes.
func TestRefusalsCLI(t *testing.T) {
	bothSourcesTidy(t, func(t *testing.T, ws string) {
		wantFail(t, ws, 1, "zerofs: no sequence 999 (head is ", "rewind", "999")
		wantFail(t, ws, 1, "zerofs: no sequence 999 (head is ", "revert", "999")
		wantFail(t, ws, 1, "zerofs: nothing to redo", "redo")
		mustRun(t, ws, "gc", "--before", "10")
		wantFail(t, ws, 1, "zerofs: no sequence 3: history before 10 was pruned", "rewind", "3")
		mustRun(t, ws, "undo")
		wantFail(t, ws, 1, `zerofs: cannot undo step 4 "Bash": the state at 4 was pruned (history starts at 10)`, "undo", "--dry-run")
	})
}

// TestUndoTakesBackARewindOrRevert: right after a rewind or a revert,
// undo takes that back (not the last step), and its help says so.
func TestUndoTakesBackARewindOrRevert(t *testing.T) {
	help := mustRun(t, t.TempDir(), "undo", "--help")
	if !strings.Contains(help, "Right after a rewind, path rewind or revert, it takes that back instead") {
		t.Errorf("undo --help does not say it takes back a rewind or revert just made:\n%s", help)
	}
	s := newStore(t, map[string]string{"f": "0\n"})
	s.step("A")
	s.write("f", "a\n")
	s.step("B")
	s.write("f", "b\n")
	s.close()
	mustRun(t, s.ws, "rewind", "0")
	if out := mustRun(t, s.ws, "undo"); !strings.HasPrefix(out, "undid rewind ") {
		t.Errorf("undo right after a rewind: %q, want it to take the rewind back", out)
	}
	if b, _ := os.ReadFile(filepath.Join(s.ws, "f")); string(b) != "b\n" {
		t.Errorf("after undoing the rewind f = %q, want b", b)
	}
	mustRun(t, s.ws, "revert", "3")
	if out := mustRun(t, s.ws, "undo"); !strings.HasPrefix(out, "undid revert ") {
		t.Errorf("undo right after a revert: %q, want it to take the revert back", out)
	}
	if b, _ := os.ReadFile(filepath.Join(s.ws, "f")); string(b) != "b\n" {
		t.Errorf("after undoing the revert f = %q, want b", b)
	}
}
