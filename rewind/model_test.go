package rewind

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"sync/atomic"
	"testing"

	"pgregory.net/rapid"

	"github.com/zerofs/zerofs/internal/testsupport"
	"github.com/zerofs/zerofs/record"
	"github.com/zerofs/zerofs/rewind/internal/index"
)

// fataler is what both *testing.T and *rapid.T offer.
type fataler interface {
	Helper()
	Fatal(args ...any)
	Fatalf(format string, args ...any)
}

// node is one path of a recorded tree.
type node struct {
	Kind    record.Kind
	Mode    uint32
	Content string // file content, or symlink target
}

// tree is a whole workspace: path → node, the root left out.
type tree map[string]node

func (tr tree) String() string {
	var ps []string
	for p := range tr {
		ps = append(ps, p)
	}
	sort.Strings(ps)
	var b strings.Builder
	for _, p := range ps {
		n := tr[p]
		fmt.Fprintf(&b, "  %s %s %o %q\n", p, n.Kind, n.Mode, n.Content)
	}
	return b.String()
}

// diffTrees describes how got differs from want ("" when equal).
func diffTrees(got, want tree) string {
	var out []string
	for p, w := range want {
		g, ok := got[p]
		if !ok {
			out = append(out, fmt.Sprintf("missing %s (want %+v)", p, w))
		} else if g != w {
			out = append(out, fmt.Sprintf("%s: got %+v, want %+v", p, g, w))
		}
	}
	for p, g := range got {
		if _, ok := want[p]; !ok {
			out = append(out, fmt.Sprintf("extra %s (%+v)", p, g))
		}
	}
	sort.Strings(out)
	return strings.Join(out, "\n")
}

// diskTree records the real directory: testsupport.Snapshot, in the
// model's terms.
func diskTree(t fataler, dir string) tree {
	t.Helper()
	tr := tree{}
	for p, e := range testsupport.Snapshot(t, dir) {
		tr[p] = node{Kind: record.Kind(e.Kind), Mode: uint32(e.Mode.Perm()) | modeExtra(e.Mode), Content: e.Content}
	}
	return tr
}

func modeExtra(m os.FileMode) uint32 {
	var x uint32
	if m&os.ModeSetuid != 0 {
		x |= 0o4000
	}
	if m&os.ModeSetgid != 0 {
		x |= 0o2000
	}
	if m&os.ModeSticky != 0 {
		x |= 0o1000
	}
	return x
}

// indexTree computes the whole tree at seq from the engine alone.
func indexTree(t fataler, e *Engine, seq record.Seq) tree {
	tr := tree{}
	var walk func(dir string)
	walk = func(dir string) {
		ents, err := e.ReadDirAt(dir, seq)
		if err != nil {
			t.Fatalf("ReadDirAt(%q, %d): %v", dir, seq, err)
		}
		for _, de := range ents {
			p := index.JoinPath(dir, de.Name)
			st := de.Entry.State
			n := node{Kind: st.Kind, Mode: st.Mode}
			switch st.Kind {
			case record.KindDir:
				tr[p] = n
				walk(p)
				continue
			case record.KindSymlink:
				n.Mode = 0
				n.Content, err = e.ReadLink(de.Entry)
			case record.KindFile:
				var f Content
				f, err = e.OpenContent(de.Entry)
				if err == nil {
					var b []byte
					b, err = io.ReadAll(f)
					f.Close()
					n.Content = string(b)
				}
			}
			if err != nil {
				t.Fatalf("%s at %d: %v", p, seq, err)
			}
			tr[p] = n
		}
	}
	walk("")
	return tr
}

// model drives random operations against a real directory, capturing
// exactly as the FUSE layer does.
type model struct {
	t  *rapid.T
	e  *Engine
	ws string
	// states maps each recorded sequence to the tree at it.
	states map[record.Seq]tree
	// tick, when set, runs before each step begins (a test's clock).
	tick func(rt *rapid.T)
}

var names = []string{"a", "b", "c"}

func (m *model) genPath(rt *rapid.T, label string) string {
	n := rapid.IntRange(1, 3).Draw(rt, label+"-depth")
	parts := make([]string, n)
	for i := range parts {
		parts[i] = rapid.SampledFrom(names).Draw(rt, label+"-name")
	}
	return strings.Join(parts, "/")
}

// reachable reports whether every ancestor of p is a real directory, as the
// kernel requires before it sends an operation on p to the FUSE layer
// (symlinked ancestors are resolved by the kernel to other paths).
func (m *model) reachable(p string) bool {
	dir, _ := index.SplitPath(p)
	for dir != "" {
		fi, err := os.Lstat(filepath.Join(m.ws, dir))
		if err != nil || !fi.IsDir() {
			return false
		}
		dir, _ = index.SplitPath(dir)
	}
	return true
}

func (m *model) lstat(p string) (os.FileInfo, bool) {
	fi, err := os.Lstat(filepath.Join(m.ws, p))
	return fi, err == nil
}

// do runs op on the workspace after Begin captured changes.
func (m *model) do(op func() error, changes ...Change) {
	release, _, err := m.e.Begin(context.Background(), Caller{PID: 1, Comm: "model"}, changes...)
	if err != nil {
		m.t.Fatalf("Begin(%+v): %v", changes, err)
	}
	defer release()
	err = op() // operations may fail (ENOENT, ENOTEMPTY...) as they would for a tool
	m.t.Logf("op %+v -> %v (head %d)", changes, err, m.e.Head())
}

func (m *model) abs(p string) string { return filepath.Join(m.ws, p) }

func (m *model) step(rt *rapid.T) {
	rt.Helper()
	if m.tick != nil {
		m.tick(rt)
	}
	if _, err := m.e.BeginStep(context.Background(), "step", nil); err != nil {
		rt.Fatal(err)
	}
	rt.Logf("step at %d", m.e.Head())
	m.states[m.e.Head()] = diskTree(rt, m.ws)
}

func (m *model) randomOp(rt *rapid.T) {
	p := m.genPath(rt, "path")
	if !m.reachable(p) {
		return
	}
	fi, exists := m.lstat(p)
	isLink := exists && fi.Mode()&os.ModeSymlink != 0
	isDir := exists && fi.IsDir()
	content := rapid.SampledFrom([]string{"", "x", "hello", "hello world\n", strings.Repeat("z", 5000)}).Draw(rt, "content")
	switch op := rapid.IntRange(0, 11).Draw(rt, "op"); op {
	case 0: // write (create or truncate)
		if isLink {
			return
		}
		m.do(func() error { return os.WriteFile(m.abs(p), []byte(content), 0o644) }, Change{Path: p})
	case 1: // append
		if isLink {
			return
		}
		m.do(func() error {
			f, err := os.OpenFile(m.abs(p), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
			if err != nil {
				return err
			}
			defer f.Close()
			_, err = f.WriteString(content)
			return err
		}, Change{Path: p})
	case 2: // truncate
		if !exists || isLink || isDir {
			return
		}
		n := rapid.Int64Range(0, 10).Draw(rt, "size")
		m.do(func() error { return os.Truncate(m.abs(p), n) }, Change{Path: p})
	case 3: // remove (unlink or rmdir)
		m.do(func() error { return os.Remove(m.abs(p)) }, Change{Path: p})
	case 4: // rm -rf, one capture per removal as the kernel sends them
		if !exists {
			return
		}
		m.removeAll(p)
	case 5, 6: // rename
		if m.e.opts.RenameRecords && !isDir {
			// Mostly a directory, when there are some: random paths
			// seldom name one.
			if dirs := m.dirs(); len(dirs) > 0 && rapid.Bool().Draw(rt, "rename a directory") {
				p, isDir, isLink = rapid.SampledFrom(dirs).Draw(rt, "dir"), true, false
			}
		}
		q := m.genPath(rt, "to")
		if !m.reachable(q) || q == p || strings.HasPrefix(q, p+"/") {
			return
		}
		qi, qexists := m.lstat(q)
		qdir := qexists && qi.IsDir()
		from := func(dir bool, src string) string {
			if dir {
				return src
			}
			return ""
		}
		rename := func() error { return os.Rename(m.abs(p), m.abs(q)) }
		if isDir && m.e.opts.RenameRecords {
			// As the FUSE layer does: one record, when the engine takes it.
			release, _, err := m.e.Begin(context.Background(), Caller{PID: 1, Comm: "model"})
			if err != nil {
				m.t.Fatalf("Begin: %v", err)
			}
			handled, err := m.e.RenameDir(context.Background(), Caller{PID: 1, Comm: "model"}, p, q, rename)
			release()
			m.t.Logf("rename dir %q -> %q: handled %v, %v (head %d)", p, q, handled, err, m.e.Head())
			if handled {
				modelRenameRecords.Add(1)
				return
			}
		}
		m.do(rename, Change{Path: p, Tree: isDir, From: from(qdir, q)}, Change{Path: q, Tree: qdir, From: from(isDir, p)})
	case 7: // mkdir
		m.do(func() error { return os.Mkdir(m.abs(p), 0o755) }, Change{Path: p})
	case 8: // symlink
		target := rapid.SampledFrom([]string{"a", "../b", "c/a", "/etc/passwd", "../../../outside"}).Draw(rt, "target")
		m.do(func() error { return os.Symlink(target, m.abs(p)) }, Change{Path: p})
	case 9: // chmod
		if !exists || isLink {
			return
		}
		mode := rapid.SampledFrom([]os.FileMode{0o600, 0o644, 0o755, 0o700, 0o750, 0o444}).Draw(rt, "mode")
		if isDir {
			mode |= 0o700
		}
		m.do(func() error { return os.Chmod(m.abs(p), mode) }, Change{Path: p})
	case 10, 11:
		m.step(rt)
	}
}

// dirs lists the workspace's directories below its root.
func (m *model) dirs() []string {
	var out []string
	filepath.WalkDir(m.ws, func(path string, d os.DirEntry, err error) error {
		if err == nil && d.IsDir() && path != m.ws {
			rel, _ := filepath.Rel(m.ws, path)
			out = append(out, rel)
		}
		return nil
	})
	sort.Strings(out)
	return out
}

func (m *model) removeAll(p string) {
	fi, ok := m.lstat(p)
	if !ok {
		return
	}
	if fi.IsDir() {
		ents, _ := os.ReadDir(m.abs(p))
		for _, de := range ents {
			m.removeAll(index.JoinPath(p, de.Name()))
		}
	}
	m.do(func() error { return os.Remove(m.abs(p)) }, Change{Path: p})
}

// modelRenameRecords counts the directory renames TestModel recorded as one
// record.
var modelRenameRecords atomic.Int64

// TestModel runs random operations in random steps on a real directory,
// records the tree at every step boundary, then checks for every recorded
// sequence T that the index computes that tree, that Rewind(T) makes the
// directory equal to it, and that rewinding to just before that rewind
// brings the later tree back. The seed is printed on failure; rerun with
// -rapid.seed=N. -rapid.checks=N runs more cases.
func TestModel(t *testing.T) {
	defer func() {
		if modelRenameRecords.Load() == 0 {
			t.Error("no directory rename was recorded as one record")
		}
	}()
	rapid.Check(t, func(rt *rapid.T) {
		sync := rapid.Bool().Draw(rt, "sync")
		renames := rapid.Bool().Draw(rt, "rename records")
		e, ws := openT(t, Options{Sync: sync, RenameRecords: renames})
		m := &model{t: rt, e: e, ws: ws, states: map[record.Seq]tree{0: {}}}
		if renames {
			// Directories to rename from the start (random paths seldom
			// name one).
			m.do(func() error { return os.Mkdir(m.abs("a"), 0o755) }, Change{Path: "a"})
			m.do(func() error { return os.WriteFile(m.abs("a/b"), []byte("x"), 0o644) }, Change{Path: "a/b"})
			m.do(func() error { return os.Mkdir(m.abs("c"), 0o755) }, Change{Path: "c"})
		}
		nops := rapid.IntRange(1, 80).Draw(rt, "ops")
		for range nops {
			m.randomOp(rt)
		}
		m.step(rt)
		final := diskTree(rt, ws)
		var seqs []record.Seq
		for s := range m.states {
			seqs = append(seqs, s)
		}
		sort.Slice(seqs, func(i, j int) bool { return seqs[i] < seqs[j] })
		for _, s := range seqs {
			if d := diffTrees(indexTree(rt, e, s), m.states[s]); d != "" {
				rt.Fatalf("index at %d differs from the recorded tree:\n%s", s, d)
			}
		}
		// Rewind to each recorded state in random order, undoing each.
		order := rapid.Permutation(seqs).Draw(rt, "order")
		for _, s := range order {
			res, err := e.Rewind(context.Background(), s)
			if err != nil {
				rt.Fatalf("Rewind(%d): %v", s, err)
			}
			if d := diffTrees(diskTree(rt, ws), m.states[s]); d != "" {
				rt.Fatalf("after Rewind(%d) the workspace differs:\n%s", s, d)
			}
			if len(res.Report.Skipped) != 0 {
				rt.Fatalf("Rewind(%d) skipped %v", s, res.Report.Skipped)
			}
			last, _, _ := e.LastRewind()
			if res.Unchanged || last.CheckpointSequence == 0 {
				continue // nothing changed (and nothing was recorded)
			}
			if _, err := e.Rewind(context.Background(), last.CheckpointSequence-1); err != nil {
				rt.Fatalf("undo Rewind(%d): %v", s, err)
			}
			if d := diffTrees(diskTree(rt, ws), final); d != "" {
				rt.Fatalf("undoing Rewind(%d) did not bring the later tree back:\n%s", s, d)
			}
		}
		// Every state ever recorded is still reachable after all those rewinds.
		for _, s := range seqs {
			if d := diffTrees(indexTree(rt, e, s), m.states[s]); d != "" {
				rt.Fatalf("after the rewinds, the index at %d differs:\n%s", s, d)
			}
		}
		// Reverts and path rewinds from recorded states: every one in a
		// fifth of the cases, two at random in the others (each form costs
		// several fsynced rewinds).
		from := rapid.Permutation(seqs).Draw(rt, "forms from")
		if rapid.IntRange(0, 4).Draw(rt, "every state") != 0 {
			from = from[:min(len(from), 2)]
		}
		m.checkForms(rt, seqs, from)
		// The next open starts from the index snapshot Close writes, and
		// must answer alike.
		e2 := reopen(t, e, ws)
		if !e2.log.Resumed() {
			rt.Fatalf("the reopened engine did not start from the index snapshot")
		}
		for _, s := range seqs {
			if d := diffTrees(indexTree(rt, e2, s), m.states[s]); d != "" {
				rt.Fatalf("after a reopen from the snapshot, the index at %d differs:\n%s", s, d)
			}
		}
	})
}

// isDir reports whether tr has p as a directory.
func (tr tree) isDir(p string) bool {
	n, ok := tr[p]
	return ok && n.Kind == record.KindDir
}

func (tr tree) clone() tree {
	out := make(tree, len(tr))
	for p, n := range tr {
		out[p] = n
	}
	return out
}

// ancestors lists p's ancestors, outermost first.
func ancestors(p string) []string {
	var out []string
	for a, _ := index.SplitPath(p); a != ""; a, _ = index.SplitPath(a) {
		out = append([]string{a}, out...)
	}
	return out
}

// put sets p in tr to its state in from: gone (with everything under it)
// when from lacks it; else replacing what is there, keeping the children of
// a directory that stays one.
func (tr tree) put(p string, from tree) {
	n, ok := from[p]
	if !ok || n.Kind != record.KindDir || !tr.isDir(p) {
		for q := range tr {
			if q == p || strings.HasPrefix(q, p+"/") {
				delete(tr, q)
			}
		}
	}
	if ok {
		tr[p] = n
	}
}

// modelRevert is what reverting the step from before to after does to cur:
// the tree it should give (with force) and the conflicts that refuse it.
func modelRevert(before, after, cur tree) (want tree, conflicts []string) {
	changed := map[string]bool{}
	for p, n := range before {
		if after[p] != n || !hasKey(after, p) {
			changed[p] = true
		}
	}
	for p := range after {
		if !hasKey(before, p) {
			changed[p] = true
		}
	}
	bad := map[string]bool{}
	for p := range changed {
		if cur[p] != after[p] || hasKey(cur, p) != hasKey(after, p) {
			bad[p] = true
			continue
		}
		if cur.isDir(p) && !before.isDir(p) {
			for q := range unionKeys(cur, after) {
				if strings.HasPrefix(q, p+"/") && (cur[q] != after[q] || hasKey(cur, q) != hasKey(after, q)) {
					bad[q] = true
				}
			}
		}
	}
	var paths []string
	for p := range changed {
		paths = append(paths, p)
	}
	for p := range changed {
		if !hasKey(before, p) {
			continue
		}
		for _, a := range ancestors(p) {
			if !changed[a] && !cur.isDir(a) && !bad[a] {
				bad[a] = true
				paths = append(paths, a)
			}
		}
	}
	sortParentsFirst(paths)
	want = cur.clone()
	for _, p := range paths {
		want.put(p, before)
	}
	for p := range bad {
		conflicts = append(conflicts, p)
	}
	sort.Strings(conflicts)
	return want, conflicts
}

// modelRewindPaths is cur with roots (and everything under them) as in tgt,
// and the ancestors they need made directories as in tgt.
func modelRewindPaths(tgt, cur tree, roots []string) tree {
	want := cur.clone()
	for _, r := range roots {
		if hasKey(tgt, r) {
			for _, a := range ancestors(r) {
				if !want.isDir(a) {
					want.put(a, tgt)
				}
			}
		}
		want.put(r, tree{})
		for p, n := range tgt {
			if p == r || strings.HasPrefix(p, r+"/") {
				want[p] = n
			}
		}
	}
	return want
}

func hasKey(tr tree, p string) bool { _, ok := tr[p]; return ok }

func unionKeys(a, b tree) map[string]bool {
	out := map[string]bool{}
	for p := range a {
		out[p] = true
	}
	for p := range b {
		out[p] = true
	}
	return out
}

// checkForms goes to each recorded state S of from and there reverts a
// random step (of those between the recorded seqs) and rewinds random paths
// to a random state, comparing each with the model, and undoes each.
func (m *model) checkForms(rt *rapid.T, seqs, from []record.Seq) {
	ctx := context.Background()
	e, ws := m.e, m.ws
	undo := func(what string, want tree, res record.RewindResult) {
		last, _, _ := e.LastRewind()
		if res.Unchanged || last.CheckpointSequence == 0 {
			return // nothing changed, nothing was recorded
		}
		if _, err := e.Rewind(ctx, last.CheckpointSequence-1); err != nil {
			rt.Fatalf("undo %s: %v", what, err)
		}
		if d := diffTrees(diskTree(rt, ws), want); d != "" {
			rt.Fatalf("undoing %s did not bring the tree back:\n%s", what, d)
		}
	}
	for _, s := range from {
		if _, err := e.Rewind(ctx, s); err != nil {
			rt.Fatalf("Rewind(%d): %v", s, err)
		}
		cur := m.states[s]
		// Revert step k: from seqs[k] to seqs[k+1]. The implicit step before
		// the first tool_call is reverted by naming its first checkpoint.
		k := rapid.IntRange(0, len(seqs)-2).Draw(rt, "revert")
		step := seqs[k]
		if k == 0 {
			if seqs[1] == 1 {
				goto paths // no change before the first step
			}
			step = 1
		}
		{
			before, after := m.states[seqs[k]], m.states[seqs[k+1]]
			want, conflicts := modelRevert(before, after, cur)
			head := e.Head()
			res, err := e.Apply(ctx, record.Request{Revert: step})
			var ce *record.ConflictError
			switch {
			case len(conflicts) > 0:
				if !errors.As(err, &ce) || !reflect.DeepEqual(ce.Paths, conflicts) {
					rt.Fatalf("at %d, revert of step %d: got %v, want conflicts %v", s, step, err, conflicts)
				}
				if d := diffTrees(diskTree(rt, ws), cur); d != "" || e.Head() != head {
					rt.Fatalf("a refused revert of step %d changed the workspace:\n%s", step, d)
				}
				if res, err = e.Apply(ctx, record.Request{Revert: step, Force: true}); err != nil {
					rt.Fatalf("forced revert of step %d: %v", step, err)
				}
			case err != nil:
				rt.Fatalf("at %d, revert of step %d: %v", s, step, err)
			}
			if d := diffTrees(diskTree(rt, ws), want); d != "" {
				rt.Fatalf("at %d, revert of step %d (conflicts %v) differs from the model:\n%s", s, step, conflicts, d)
			}
			if len(res.Report.Skipped) > 0 {
				rt.Fatalf("revert skipped %v", res.Report.Skipped)
			}
			undo(fmt.Sprintf("the revert of step %d", step), cur, res)
		}
	paths:
		t := rapid.SampledFrom(seqs).Draw(rt, "target")
		roots := []string{m.genPath(rt, "root")}
		if rapid.Bool().Draw(rt, "two roots") {
			roots = append(roots, m.genPath(rt, "root"))
		}
		roots, _ = cleanRoots(roots)
		want := modelRewindPaths(m.states[t], cur, roots)
		var missing []string
		for _, r := range roots {
			if _, at := m.states[t][r]; !at {
				if _, now := cur[r]; !now {
					missing = append(missing, r)
				}
			}
		}
		if len(missing) > 0 {
			// A path that matches nothing is refused, dry or not.
			for _, dry := range []bool{true, false} {
				_, err := e.Apply(ctx, record.Request{Target: t, Paths: roots, DryRun: dry})
				var re *record.RefusedError
				if !errors.As(err, &re) || re.Refusal != record.RefusedNoSuchPath || !reflect.DeepEqual(re.Missing, missing) {
					rt.Fatalf("rewinding %v to %d (missing %v): %v, want a no-such-path refusal", roots, t, missing, err)
				}
			}
			if d := diffTrees(diskTree(rt, ws), cur); d != "" {
				rt.Fatalf("a refused rewind changed the workspace:\n%s", d)
			}
			continue
		}
		dry, err := e.Apply(ctx, record.Request{Target: t, Paths: roots, DryRun: true})
		if err != nil {
			rt.Fatalf("dry run of rewinding %v to %d: %v", roots, t, err)
		}
		if d := diffTrees(diskTree(rt, ws), cur); d != "" {
			rt.Fatalf("a dry run changed the workspace:\n%s", d)
		}
		res, err := e.Apply(ctx, record.Request{Target: t, Paths: roots})
		if err != nil {
			rt.Fatalf("rewinding %v to %d: %v", roots, t, err)
		}
		if d := diffTrees(diskTree(rt, ws), want); d != "" {
			rt.Fatalf("at %d, rewinding %v to %d differs from the model:\n%s", s, roots, t, d)
		}
		if !reflect.DeepEqual(dry.Report, res.Report) {
			rt.Fatalf("dry run reported %+v, the rewind %+v", dry.Report, res.Report)
		}
		undo(fmt.Sprintf("rewinding %v to %d", roots, t), cur, res)
	}
}
