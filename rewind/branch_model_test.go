package rewind

import (
	"context"
	"errors"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
	"pgregory.net/rapid"

	"github.com/zerofs/zerofs/internal/testsupport"
	"github.com/zerofs/zerofs/record"
)

// modelBranch is a branch of the model's workspace: its copy-up layer
// (a real overlayfs over a copy of the workspace at its base, its upper
// and work directories where the engine made them), changed through an
// engine of its own, and the model's base of its next merge.
type modelBranch struct {
	*modelSide
	dir  string
	base tree
}

// newModelBranch makes a branch of e's workspace ws now: the engine's
// branch request, then the overlay (its lower layer a copy of the
// workspace as it is: what @BASE/ serves under a mount) and the branch's
// own engine over it.
func newModelBranch(rt *rapid.T, e *Engine, ws, name string) *modelBranch {
	dir := filepath.Join(filepath.Dir(ws), name)
	if err := os.Mkdir(dir, 0o755); err != nil {
		rt.Fatal(err)
	}
	res, err := e.Apply(context.Background(), record.Request{Branch: &record.BranchRequest{Dir: dir}})
	if err != nil {
		rt.Fatal(err)
	}
	lower := dir + "-lower"
	if out, err := exec.Command("cp", "-a", ws, lower).CombinedOutput(); err != nil {
		rt.Fatalf("cp: %v: %s", err, out)
	}
	bdir := BranchDir(e.opts.StoreDir, res.Branch.ID)
	data := "lowerdir=" + lower + ",upperdir=" + filepath.Join(bdir, record.BranchUpperName) +
		",workdir=" + filepath.Join(bdir, record.BranchWorkName) + ",redirect_dir=off,index=off,metacopy=off"
	if err := unix.Mount("zerofs-branch", dir, "overlay", 0, data); err != nil {
		rt.Fatalf("mount overlay: %v", err)
	}
	rt.Cleanup(func() { unix.Unmount(dir, unix.MNT_DETACH) })
	root, err := os.Open(dir)
	if err != nil {
		rt.Fatal(err)
	}
	rt.Cleanup(func() { root.Close() })
	be, err := Open(context.Background(), root, Options{StoreDir: filepath.Join(bdir, record.BranchStoreName)})
	if err != nil {
		rt.Fatal(err)
	}
	rt.Cleanup(func() { be.Close() })
	return &modelBranch{modelSide: &modelSide{rt: rt, e: be, root: dir}, dir: dir, base: diskTree(rt, ws)}
}

// TestBranchMergeModel: random operations in a workspace and in two
// branches of it (each a real overlayfs, changed through its own engine),
// and random merges of either, some settling every conflict one way.
// After each merge the workspace equals the model's three-way result, or
// the merge was refused naming exactly the model's conflicts and changed
// nothing. A branch's base is its state at its creation until it is
// merged, then its state as last merged (git's rule), undone or not. The
// model is TestMergeModel's (the rules of package merge's doc comment,
// text merged by git merge-file). 30 cases by default; more with
// -rapid.checks.
func TestBranchMergeModel(t *testing.T) {
	testsupport.RequireRoot(t, "a branch is an overlayfs mount")
	if _, err := exec.LookPath("git"); err != nil {
		t.Fatal("git is needed: the model merges text with git merge-file")
	}
	if f := flag.Lookup("rapid.checks"); f != nil && !flagSetByUser("rapid.checks") {
		old := f.Value.String()
		f.Value.Set("30")
		defer f.Value.Set(old)
	}
	merges, conflicts, second := 0, 0, 0
	rapid.Check(t, func(rt *rapid.T) {
		e, ws := openRapid(rt, Options{RenameRecords: rapid.Bool().Draw(rt, "rename records")})
		ours := &modelSide{rt: rt, e: e, root: ws}
		ours.step("setup")
		for _, p := range []string{"f", "d/g"} {
			ours.write(p, "1\n2\n3\n4\n5\n", 0o644)
		}
		branches := []*modelBranch{newModelBranch(rt, e, ws, "b1")}
		merged := map[*modelBranch]bool{}
		for round := range rapid.IntRange(1, 4).Draw(rt, "rounds") {
			if len(branches) < 2 && rapid.Bool().Draw(rt, "second branch") {
				branches = append(branches, newModelBranch(rt, e, ws, "b2"))
			}
			ours.step("ours")
			for _, b := range branches {
				b.step("theirs")
			}
			for range rapid.IntRange(0, 8).Draw(rt, "ops") {
				s := ours
				if i := rapid.IntRange(-1, len(branches)-1).Draw(rt, "side"); i >= 0 {
					s = branches[i].modelSide
				}
				s.randomOp()
			}
			b := rapid.SampledFrom(branches).Draw(rt, "merge")
			settle := rapid.SampledFrom([]string{"", "", record.SettleOurs, record.SettleTheirs}).Draw(rt, "settle")
			o, th := diskTree(rt, ws), diskTree(rt, b.dir)
			want, wantConflicts := modelMerge(rt, b.base, o, th, settle)
			head := e.Head()
			res, err := e.Apply(context.Background(), record.Request{Merge: &record.MergeRequest{Dir: b.dir, Workspace: ws, Settle: settle}})
			var ce *record.MergeConflictError
			switch {
			case len(wantConflicts) > 0:
				if !errors.As(err, &ce) {
					rt.Fatalf("round %d: got %v, want conflicts on %v\nbase:\n%sours:\n%stheirs:\n%s", round, err, wantConflicts, b.base, o, th)
				}
				var got []string
				for _, c := range ce.Conflicts {
					got = append(got, c.Path)
				}
				if strings.Join(got, " ") != strings.Join(wantConflicts, " ") {
					rt.Fatalf("round %d: conflicts: got %v, want %v\nbase:\n%sours:\n%stheirs:\n%s", round, got, wantConflicts, b.base, o, th)
				}
				if d := diffTrees(diskTree(rt, ws), o); d != "" || e.Head() != head {
					rt.Fatalf("round %d: a refused merge changed the workspace:\n%s", round, d)
				}
				conflicts++
			case err != nil:
				rt.Fatalf("round %d: merge: %v\nbase:\n%sours:\n%stheirs:\n%s", round, err, b.base, o, th)
			default:
				if d := diffTrees(diskTree(rt, ws), want); d != "" {
					rt.Fatalf("round %d: the merged workspace differs from the model:\n%s\nbase:\n%sours:\n%stheirs:\n%s", round, d, b.base, o, th)
				}
				if res.Merge == nil || res.Merge.Record.Branch == "" {
					rt.Fatalf("round %d: the merge does not say it merged a branch: %+v", round, res.Merge)
				}
				merges++
				if merged[b] {
					second++
				}
				merged[b] = true
				b.base = th // git's rule: the next merge's base
				if !res.Unchanged && rapid.Bool().Draw(rt, "undo") {
					if _, err := e.Apply(context.Background(), record.Request{Undo: true}); err != nil {
						rt.Fatal(err)
					}
					if d := diffTrees(diskTree(rt, ws), o); d != "" {
						rt.Fatalf("round %d: undo of the merge:\n%s", round, d)
					}
				}
			}
		}
	})
	t.Logf("%d merges done (%d of a branch merged before), %d refused for conflicts", merges, second, conflicts)
	if merges == 0 || conflicts == 0 || second == 0 {
		t.Errorf("the model never merged (%d), never merged a branch twice (%d) or never conflicted (%d)", merges, second, conflicts)
	}
}
