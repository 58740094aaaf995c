package rewind

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"

	"github.com/zerofs/zerofs/internal/testsupport"
	"github.com/zerofs/zerofs/record"
	"pgregory.net/rapid"
)

// TestMergeModel: random operations in a workspace and in a fork of it
// (each through its own engine, so both record their steps), and random
// merges, some settling every conflict one way. After each merge the
// workspace equals the model's three-way result, or the merge was refused
// naming exactly the model's conflicts and changed nothing. The model is
// written apart from package merge: the rules of the doc comment of
// package merge, with `git merge-file` merging text. 60 cases by default
// (each runs git); more with -rapid.checks.
func TestMergeModel(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Fatal("git is needed: the model merges text with git merge-file")
	}
	if f := flag.Lookup("rapid.checks"); f != nil && !flagSetByUser("rapid.checks") {
		old := f.Value.String()
		f.Value.Set("60")
		defer f.Value.Set(old)
	}
	merges, conflicts := 0, 0
	rapid.Check(t, func(rt *rapid.T) {
		e, ws := openRapid(rt, Options{RenameRecords: rapid.Bool().Draw(rt, "rename records")})
		side := func(e *Engine, root string) *modelSide { return &modelSide{rt: rt, e: e, root: root} }
		ours := side(e, ws)
		// A few paths to start from.
		ours.step("setup")
		for _, p := range []string{"f", "d/g"} {
			ours.write(p, "1\n2\n3\n4\n5\n", 0o644)
		}
		fork := filepath.Join(filepath.Dir(ws), "fork")
		if _, err := e.Fork(context.Background(), e.Head(), fork, ws); err != nil {
			rt.Fatal(err)
		}
		base := diskTree(rt, ws)
		froot, err := os.Open(fork)
		if err != nil {
			rt.Fatal(err)
		}
		rt.Cleanup(func() { froot.Close() })
		fe, err := Open(context.Background(), froot, Options{StoreDir: filepath.Join(fork, record.StoreName)})
		if err != nil {
			rt.Fatal(err)
		}
		rt.Cleanup(func() { fe.Close() })
		theirs := side(fe, fork)
		for round := range rapid.IntRange(1, 3).Draw(rt, "rounds") {
			ours.step("ours")
			theirs.step("theirs")
			for range rapid.IntRange(0, 8).Draw(rt, "ops") {
				s := ours
				if rapid.Bool().Draw(rt, "theirs") {
					s = theirs
				}
				s.randomOp()
			}
			settle := rapid.SampledFrom([]string{"", "", record.SettleOurs, record.SettleTheirs}).Draw(rt, "settle")
			o, th := diskTree(rt, ws), forkTree(rt, fork)
			want, wantConflicts := modelMerge(rt, base, o, th, settle)
			head := e.Head()
			res, err := e.Apply(context.Background(), record.Request{Merge: &record.MergeRequest{Dir: fork, Workspace: ws, Settle: settle}})
			var ce *record.MergeConflictError
			switch {
			case len(wantConflicts) > 0:
				if !errors.As(err, &ce) {
					rt.Fatalf("round %d: got %v, want conflicts on %v\nbase:\n%sours:\n%stheirs:\n%s", round, err, wantConflicts, base, o, th)
				}
				var got []string
				for _, c := range ce.Conflicts {
					got = append(got, c.Path)
				}
				if strings.Join(got, " ") != strings.Join(wantConflicts, " ") {
					rt.Fatalf("round %d: conflicts: got %v, want %v\nbase:\n%sours:\n%stheirs:\n%s", round, got, wantConflicts, base, o, th)
				}
				if d := diffTrees(diskTree(rt, ws), o); d != "" || e.Head() != head {
					rt.Fatalf("round %d: a refused merge changed the workspace:\n%s", round, d)
				}
				conflicts++
			case err != nil:
				rt.Fatalf("round %d: merge: %v\nbase:\n%sours:\n%stheirs:\n%s", round, err, base, o, th)
			default:
				if d := diffTrees(diskTree(rt, ws), want); d != "" {
					rt.Fatalf("round %d: the merged workspace differs from the model:\n%s\nbase:\n%sours:\n%stheirs:\n%s", round, d, base, o, th)
				}
				merges++
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
	t.Logf("%d merges done, %d refused for conflicts", merges, conflicts)
	if merges == 0 || conflicts == 0 {
		t.Errorf("the model never merged (%d) or never conflicted (%d)", merges, conflicts)
	}
}

// modelSide is a workspace or a fork changed through its engine.
type modelSide struct {
	rt   *rapid.T
	e    *Engine
	root string
}

func (s *modelSide) step(label string) {
	if _, err := s.e.BeginStep(context.Background(), label, nil); err != nil {
		s.rt.Fatal(err)
	}
}

func (s *modelSide) do(fn func() error, changes ...Change) {
	release, _, err := s.e.Begin(context.Background(), Caller{PID: os.Getpid(), Comm: "test"}, changes...)
	if err != nil {
		s.rt.Fatal(err)
	}
	defer release()
	if err := fn(); err != nil {
		s.rt.Fatal(err)
	}
}

func (s *modelSide) abs(p string) string { return filepath.Join(s.root, p) }

// clear removes whatever p is, with everything beneath it.
func (s *modelSide) clear(p string) {
	if _, err := os.Lstat(s.abs(p)); err == nil {
		s.do(func() error { return os.RemoveAll(s.abs(p)) }, Change{Path: p, Tree: true})
	}
}

// parentDirs makes p's parents directories (clearing whatever is there).
func (s *modelSide) parentDirs(p string) {
	for i, c := range p {
		if c != '/' {
			continue
		}
		d := p[:i]
		if fi, err := os.Lstat(s.abs(d)); err == nil && fi.IsDir() {
			continue
		}
		s.clear(d)
		s.do(func() error { return os.Mkdir(s.abs(d), 0o755) }, Change{Path: d})
	}
}

func (s *modelSide) write(p, content string, mode os.FileMode) {
	s.parentDirs(p)
	if fi, err := os.Lstat(s.abs(p)); err == nil && !fi.Mode().IsRegular() {
		s.clear(p)
	}
	s.do(func() error {
		if err := os.WriteFile(s.abs(p), []byte(content), mode); err != nil {
			return err
		}
		return os.Chmod(s.abs(p), mode)
	}, Change{Path: p})
}

var (
	modelPaths = []string{"f", "g", "d", "d/g", "d/h", "d/e", "d/e/i"}
	modelLines = []string{"1", "2", "3", "4", "5", "x", "y"}
)

// randomOp edits, removes, retypes or re-modes one path.
func (s *modelSide) randomOp() {
	rt := s.rt
	p := rapid.SampledFrom(modelPaths).Draw(rt, "path")
	switch rapid.IntRange(0, 6).Draw(rt, "op") {
	case 0, 1: // edit a line of the file (or make it)
		old, _ := os.ReadFile(s.abs(p))
		lines := strings.Split(strings.TrimSuffix(string(old), "\n"), "\n")
		if len(old) == 0 {
			lines = []string{"1", "2", "3"}
		}
		i := rapid.IntRange(0, len(lines)).Draw(rt, "line")
		l := rapid.SampledFrom(modelLines).Draw(rt, "text")
		switch {
		case i == len(lines):
			lines = append(lines, l)
		case rapid.Bool().Draw(rt, "insert"):
			lines = append(lines[:i], append([]string{l}, lines[i:]...)...)
		default:
			lines[i] = l
		}
		mode := os.FileMode(0o644)
		if fi, err := os.Lstat(s.abs(p)); err == nil && fi.Mode().IsRegular() {
			mode = fi.Mode().Perm()
		}
		s.write(p, strings.Join(lines, "\n")+"\n", mode)
	case 2: // remove
		s.clear(p)
	case 3: // chmod a file
		if fi, err := os.Lstat(s.abs(p)); err == nil && fi.Mode().IsRegular() {
			mode := rapid.SampledFrom([]os.FileMode{0o600, 0o644, 0o755}).Draw(rt, "mode")
			s.do(func() error { return os.Chmod(s.abs(p), mode) }, Change{Path: p})
		}
	case 4: // a directory
		if fi, err := os.Lstat(s.abs(p)); err == nil && fi.IsDir() {
			return
		}
		s.parentDirs(p)
		s.clear(p)
		s.do(func() error { return os.Mkdir(s.abs(p), 0o755) }, Change{Path: p})
	case 5: // a symlink
		s.parentDirs(p)
		s.clear(p)
		target := rapid.SampledFrom([]string{"f", "../f", "nowhere"}).Draw(rt, "target")
		s.do(func() error { return os.Symlink(target, s.abs(p)) }, Change{Path: p})
	case 6: // a rename (of a directory, one rename record where the engine takes it)
		fi, err := os.Lstat(s.abs(p))
		q := rapid.SampledFrom(modelPaths).Draw(rt, "to")
		if err != nil || q == p || strings.HasPrefix(q, p+"/") || strings.HasPrefix(p, q+"/") {
			return
		}
		s.parentDirs(q)
		if _, err := os.Lstat(s.abs(p)); err != nil {
			return // making q's parents took p away
		}
		s.clear(q)
		rename := func() error {
			err := os.Rename(s.abs(p), s.abs(q))
			if errors.Is(err, syscall.EXDEV) {
				// A branch's directory from its base (overlayfs): mv copies it.
				if out, err := exec.Command("cp", "-a", s.abs(p), s.abs(q)).CombinedOutput(); err != nil {
					return fmt.Errorf("cp: %v: %s", err, out)
				}
				return os.RemoveAll(s.abs(p))
			}
			return err
		}
		if fi.IsDir() && s.e.opts.RenameRecords {
			release, _, err := s.e.Begin(context.Background(), Caller{PID: 1, Comm: "mv"})
			if err != nil {
				rt.Fatal(err)
			}
			handled, err := s.e.RenameDir(context.Background(), Caller{PID: 1, Comm: "mv"}, p, q, rename)
			release()
			if err != nil {
				rt.Fatal(err)
			}
			if handled {
				return
			}
		}
		from := ""
		if fi.IsDir() {
			from = p
		}
		s.do(rename, Change{Path: p, Tree: fi.IsDir()}, Change{Path: q, From: from})
	}
}

// modelMerge is the three-way merge of whole trees, path by path, as
// package merge's doc comment states it (text merged by git merge-file),
// written apart from it. It returns the merged tree, or the conflicts
// (sorted) when any is left unsettled.
func modelMerge(rt *rapid.T, base, ours, theirs tree, settle string) (tree, []string) {
	paths := map[string]bool{}
	for _, tr := range []tree{base, ours, theirs} {
		for p := range tr {
			paths[p] = true
		}
	}
	type res struct {
		n        node
		exists   bool
		conflict bool
	}
	out := map[string]*res{}
	get := func(tr tree, p string) (node, bool) { n, ok := tr[p]; return n, ok }
	for p := range paths {
		b, bok := get(base, p)
		o, ook := get(ours, p)
		t, tok := get(theirs, p)
		same := func(x node, xok bool, y node, yok bool) bool { return xok == yok && (!xok || x == y) }
		r := &res{}
		switch {
		case same(o, ook, t, tok), same(t, tok, b, bok):
			r.n, r.exists = o, ook
		case same(o, ook, b, bok):
			r.n, r.exists = t, tok
		case !ook || !tok || o.Kind != t.Kind:
			r.conflict = true
		default:
			r.n, r.exists = o, true
			haveBase := bok && b.Kind == o.Kind
			mode, ok := modelThree(haveBase, b.Mode, o.Mode, t.Mode)
			r.n.Mode = mode
			r.conflict = !ok
			if !r.conflict && o.Kind != record.KindDir {
				c, ok := modelThree(haveBase, b.Content, o.Content, t.Content)
				if !ok && o.Kind == record.KindFile {
					bc := ""
					if haveBase {
						bc = b.Content
					}
					c, ok = gitMergeFile(rt, bc, o.Content, t.Content)
				}
				r.n.Content, r.conflict = c, !ok
			}
		}
		out[p] = r
	}
	settled := map[string]bool{}
	take := func(p string) {
		r := out[p]
		if !r.conflict || settle == "" {
			return
		}
		tr := ours
		if settle == record.SettleTheirs {
			tr = theirs
		}
		r.n, r.exists = get(tr, p)
		r.conflict = false
		settled[p] = true
	}
	for p := range out {
		take(p)
	}
	var sorted []string
	for p := range out {
		sorted = append(sorted, p)
	}
	sort.Strings(sorted)
	for {
		flagged := false
		for i, x := range sorted {
			rx := out[x]
			if rx.conflict || (rx.exists && rx.n.Kind == record.KindDir) {
				continue
			}
			for _, y := range sorted[i+1:] {
				if !strings.HasPrefix(y, x+"/") {
					break
				}
				ry := out[y]
				if ry.conflict || !ry.exists {
					continue
				}
				if settled[x] && settled[y] {
					rt.Fatalf("the model's settled tree is broken at %s and %s", x, y)
				}
				for _, q := range []string{x, y} {
					if !settled[q] {
						out[q].conflict = true
						take(q)
						flagged = true
					}
				}
				break
			}
		}
		if !flagged {
			break
		}
	}
	var conflicts []string
	merged := tree{}
	for _, p := range sorted {
		r := out[p]
		switch {
		case r.conflict:
			conflicts = append(conflicts, p)
		case r.exists:
			merged[p] = r.n
		}
	}
	return merged, conflicts
}

func modelThree[T comparable](haveBase bool, b, o, t T) (T, bool) {
	switch {
	case o == t:
		return o, true
	case haveBase && o == b:
		return t, true
	case haveBase && t == b:
		return o, true
	}
	return o, false
}

// gitMergeFile is git's merge of the three texts ("" when it conflicts).
func gitMergeFile(rt *rapid.T, base, ours, theirs string) (string, bool) {
	out, clean, err := testsupport.GitMergeFile(base, ours, theirs)
	if err != nil {
		rt.Fatal(err)
	}
	if !clean {
		return "", false
	}
	return out, true
}
