package fs

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
	"pgregory.net/rapid"

	"github.com/zerofs/zerofs/control"
	"github.com/zerofs/zerofs/internal/testsupport"
	"github.com/zerofs/zerofs/record"
)

// mountModel drives random tool-like operations through a real mount. Its
// "model" is the tree itself, recorded at every step boundary: history must
// give each recorded tree back, in @T and by a rewind.
type mountModel struct {
	t      *rapid.T
	m      *Mounted
	mp, ws string
	// states maps each recorded sequence to the tree at it.
	states map[record.Seq]testsupport.Tree
	nops   int

	// links: this case makes hard links, and then changes no file's mode
	// and rewinds only while nothing has two names. (A rewind that removes
	// one name of a hard-linked file leaves go-fuse's tree pointing at it;
	// a rewind that only fixes the mode of a hard-linked name changes its
	// other names too.)
	links bool

	held       *os.File // a file held open for writing, or nil
	heldP      string   // the path it was opened by
	heldIno    uint64   // its backing inode: it is never hard-linked
	heldAppend bool     // opened with O_APPEND
}

var modelNames = []string{"a", "b", "c"}

// symlink targets: inside, dangling, and leading out of the mount.
var modelTargets = []string{"a", "b", "c/a", "../a", "../b/c", "missing", "../../outside", "/nonexistent/zerofs-model"}

func (m *mountModel) abs(p string) string { return filepath.Join(m.mp, p) }

// existing lists the workspace's paths as the backing directory has them
// (no symlink followed), sorted.
func (m *mountModel) existing() []string {
	var out []string
	filepath.WalkDir(m.ws, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		rel, _ := filepath.Rel(m.ws, p)
		if rel == record.StoreName {
			return filepath.SkipDir
		}
		if rel != "." {
			out = append(out, rel)
		}
		return nil
	})
	sort.Strings(out)
	return out
}

// Where genPath draws a path from, each as often as it appears: any path,
// an existing one, an existing directory, a name in an existing directory.
var (
	newKinds = []string{"any", "existing", "dir", "in-dir", "in-dir"}
	oldKinds = []string{"any", "existing", "existing", "existing", "existing", "dir", "in-dir"}
	dirKinds = []string{"any", "existing", "dir", "dir", "dir", "in-dir"}
)

// genPath draws a path of depth 1 to 3 over a, b, c, from one of kinds,
// so that operations collide and many succeed.
func (m *mountModel) genPath(label string, kinds []string) string {
	var ex, dirs []string
	for _, p := range m.existing() {
		ex = append(ex, p)
		if isDir(filepath.Join(m.ws, p)) {
			dirs = append(dirs, p)
		}
	}
	switch kind := rapid.SampledFrom(kinds).Draw(m.t, label+"-kind"); {
	case kind == "existing" && len(ex) > 0:
		return rapid.SampledFrom(ex).Draw(m.t, label)
	case kind == "dir" && len(dirs) > 0:
		return rapid.SampledFrom(dirs).Draw(m.t, label)
	case kind == "in-dir":
		parents := []string{""}
		for _, d := range dirs {
			if strings.Count(d, "/") < 2 {
				parents = append(parents, d)
			}
		}
		dir := rapid.SampledFrom(parents).Draw(m.t, label+"-dir")
		return join(dir, rapid.SampledFrom(modelNames).Draw(m.t, label+"-name"))
	}
	n := rapid.IntRange(1, 3).Draw(m.t, label+"-depth")
	parts := make([]string, n)
	for i := range parts {
		parts[i] = rapid.SampledFrom(modelNames).Draw(m.t, label+"-name")
	}
	return strings.Join(parts, "/")
}

// resolve resolves p the way the kernel does, component by component on the
// backing directory, following symlinks on the way (and the last one when
// follow is set). ok is false when that would leave the mount (an absolute
// target, ".." above the root) or loop: such an operation is not run, to
// keep the host safe. A missing or non-directory component is fine (the
// kernel fails the operation); rel is then the path so far.
func (m *mountModel) resolve(p string, follow bool) (rel string, ok bool) {
	todo := strings.Split(p, "/")
	var stack []string
	hops := 0
	for len(todo) > 0 {
		c := todo[0]
		todo = todo[1:]
		switch c {
		case "", ".":
			continue
		case "..":
			if len(stack) == 0 {
				return "", false
			}
			stack = stack[:len(stack)-1]
			continue
		}
		cur := strings.Join(append(stack, c), "/")
		fi, err := os.Lstat(filepath.Join(m.ws, cur))
		if err != nil {
			return cur, true
		}
		if fi.Mode()&os.ModeSymlink != 0 && (len(todo) > 0 || follow) {
			if hops++; hops > 8 {
				return "", false
			}
			target, err := os.Readlink(filepath.Join(m.ws, cur))
			if err != nil || filepath.IsAbs(target) {
				return "", false
			}
			todo = append(strings.Split(target, "/"), todo...)
			continue
		}
		if len(todo) > 0 && !fi.IsDir() {
			return cur, true
		}
		stack = append(stack, c)
	}
	return strings.Join(stack, "/"), true
}

// multiLinked reports whether the backing object at rel (resolved) is a
// regular file with more than one name: a change through one name is
// captured for one name only (a documented limit), so the model never
// changes such a file.
func (m *mountModel) multiLinked(rel string) bool {
	var st unix.Stat_t
	if err := unix.Lstat(filepath.Join(m.ws, rel), &st); err != nil {
		return false
	}
	return st.Mode&unix.S_IFMT == unix.S_IFREG && st.Nlink > 1
}

// ino is the backing inode at rel, not following a symlink (0 if none),
// and whether it is a file or symlink with more than one name.
func (m *mountModel) ino(rel string) (ino uint64, linked bool) {
	var st unix.Stat_t
	if err := unix.Lstat(filepath.Join(m.ws, rel), &st); err != nil {
		return 0, false
	}
	return st.Ino, st.Mode&unix.S_IFMT != unix.S_IFDIR && st.Nlink > 1
}

// safe reports whether an operation on p that follows a final symlink or
// not (follow) stays inside the mount and changes no multi-linked file
// (when it changes content or mode, change).
func (m *mountModel) safe(p string, follow, change bool) bool {
	rel, ok := m.resolve(p, follow)
	if !ok {
		m.t.Logf("skip %s: it leads out of the mount", p)
		return false
	}
	if change && m.multiLinked(rel) {
		m.t.Logf("skip %s: %s has hard links", p, rel)
		return false
	}
	return true
}

// log logs an operation with its result and the head after it.
func (m *mountModel) log(what string, err error) {
	m.nops++
	m.t.Logf("op %d: %s -> %v (head %d)", m.nops, what, err, m.m.Engine().Head())
}

// check fails when the mount differs from want.
func (m *mountModel) check(what string, want testsupport.Tree) {
	m.t.Helper()
	if d := diffTrees(testsupport.Snapshot(m.t, m.mp), want); d != "" {
		m.t.Fatalf("%s: the mount differs:\n%s", what, d)
	}
}

// checkBacking fails when the mount does not show the backing directory.
func (m *mountModel) checkBacking(what string) {
	m.t.Helper()
	back := testsupport.Snapshot(m.t, m.ws)
	for p := range back {
		if p == record.StoreName || strings.HasPrefix(p, record.StoreName+"/") {
			delete(back, p)
		}
	}
	if d := diffTrees(testsupport.Snapshot(m.t, m.mp), back); d != "" {
		m.t.Fatalf("%s: the mount differs from the backing directory:\n%s", what, d)
	}
}

// step begins a step and records the tree at its sequence.
func (m *mountModel) step(label string) record.Seq {
	m.t.Helper()
	stepT(m.t, m.mp, label)
	line := strings.TrimSpace(ctlRead(m.t, m.mp, "step"))
	seqStr, got, _ := strings.Cut(line, " ")
	n, err := strconv.ParseUint(seqStr, 10, 64)
	if err != nil {
		m.t.Fatalf(".zero/step = %q: %v", line, err)
	}
	seq := record.Seq(n)
	want := label
	if strings.HasPrefix(label, "{") {
		want = "tool"
	}
	if got != want || !m.boundaryHead(seq) {
		m.t.Fatalf(".zero/step = %q after step %q; want label %q at head %d", line, label, want, headOf(m.t, m.mp))
	}
	m.states[seq] = testsupport.Snapshot(m.t, m.mp)
	m.t.Logf("step %q at %d", label, seq)
	return seq
}

// boundaryHead reports whether the head is right after a step boundary at
// seq: seq itself, or with passthrough, the one checkpoint that captures the
// files open for writing in the new step (the held file, or one whose
// RELEASE, asynchronous after close, had not arrived yet).
func (m *mountModel) boundaryHead(seq record.Seq) bool {
	head := headOf(m.t, m.mp)
	if m.m.Passthrough() {
		return head == seq || head == seq+1
	}
	return head == seq
}

// lastRewind reads .zero/rewind.
func (m *mountModel) lastRewind() control.RewindReport {
	m.t.Helper()
	var rep control.RewindReport
	readJSON(m.t, ctlRead(m.t, m.mp, "rewind"), &rep)
	return rep
}

// rewind rewinds to seq and checks that the mount then shows want: first
// path by path, through what the kernel cached before the rewind (the
// tree was just read), then by a fresh walk.
func (m *mountModel) rewind(seq record.Seq, want testsupport.Tree) control.RewindReport {
	m.t.Helper()
	before := testsupport.Snapshot(m.t, m.mp)
	// The handle's own report, not a fresh read of .zero/rewind: a rewind
	// that changes nothing records nothing, and the head alone cannot tell
	// (with passthrough, a late capture of a held file may move it).
	rep, err := ctlRequest(m.t, m.mp, strconv.FormatUint(uint64(seq), 10))
	if err != nil {
		m.t.Fatalf("rewind to %d: %v", seq, err)
	}
	if rep.Unchanged {
		m.t.Logf("rewind to %d changed nothing, recorded nothing", seq)
		if d := diffTrees(before, want); d != "" {
			m.t.Fatalf("rewind to %d recorded nothing, yet the tree should change:\n%s", seq, d)
		}
		m.check(fmt.Sprintf("after rewinding to %d", seq), want)
		return rep
	}
	m.t.Logf("rewind to %d: %+v", seq, rep)
	if last := m.lastRewind(); rep.TargetSequence != seq || !m.boundaryHead(rep.Sequence) || !reflect.DeepEqual(last, rep) {
		m.t.Fatalf("after rewinding to %d, the handle's report %+v, .zero/rewind %+v, head %d", seq, rep, last, headOf(m.t, m.mp))
	}
	if len(rep.Report.Skipped) != 0 {
		m.t.Fatalf("rewind to %d skipped %v", seq, rep.Report.Skipped)
	}
	m.checkPaths(fmt.Sprintf("after rewinding to %d", seq), want, before)
	m.check(fmt.Sprintf("after rewinding to %d", seq), want)
	return rep
}

// checkPaths looks up every path of want and of before, one by one with no
// directory listing first, and fails unless the mount shows want.
func (m *mountModel) checkPaths(what string, want, before testsupport.Tree) {
	m.t.Helper()
	var paths []string
	for p := range before {
		if _, ok := want[p]; !ok {
			paths = append(paths, p)
		}
	}
	for p := range want {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	for _, p := range paths {
		w, ok := want[p]
		if !ok && !realDirs(want, p) {
			continue // a symlink on the way leads elsewhere, maybe out of the mount
		}
		got, err := testsupport.ReadEntry(m.abs(p))
		switch {
		case ok && err != nil:
			m.t.Fatalf("%s: %s: %v, want %s", what, p, err, w)
		case ok && got != w:
			m.t.Fatalf("%s: %s: got %s, want %s", what, p, got, w)
		case ok:
		case err == nil:
			m.t.Fatalf("%s: %s: got %s, want none", what, p, got)
		case !errors.Is(err, unix.ENOENT) && !errors.Is(err, unix.ENOTDIR):
			m.t.Fatalf("%s: %s: %v, want ENOENT", what, p, err)
		}
	}
}

// realDirs reports whether no ancestor of p is a symlink in tree (the
// kernel would follow it elsewhere).
func realDirs(tree testsupport.Tree, p string) bool {
	for dir, _ := split(p); dir != ""; dir, _ = split(dir) {
		if tree[dir].Kind == "symlink" {
			return false
		}
	}
	return true
}

func (m *mountModel) seqs() []record.Seq {
	var out []record.Seq
	for s := range m.states {
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// openWrite opens p for writing with flags and runs fn on the handle.
func openWrite(p string, flags int, fn func(f *os.File) error) error {
	f, err := os.OpenFile(p, flags, 0o644)
	if err != nil {
		return err
	}
	err = fn(f)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

var modelContents = []string{"", "x", "hello", "hello world\n", strings.Repeat("z", 5000)}

// modelOps are the operations, each as often as it appears.
var modelOps = strings.Fields(`
	write write write mkfile mkfile otrunc append append truncate ftruncate
	unlink unlink rmdir rmrf rename rename rename rename
	mkdir mkdir mkdir mkdir symlink symlink link chmod chmod
	hold heldwrite heldwrite heldtrunc step step step rewind`)

// opKinds says where an operation's path is drawn from (default oldKinds).
var opKinds = map[string][]string{
	"write": newKinds, "mkfile": newKinds, "append": newKinds, "mkdir": newKinds,
	"symlink": newKinds, "hold": newKinds, "rmdir": dirKinds, "rmrf": dirKinds,
}

func (m *mountModel) randomOp() {
	op := rapid.SampledFrom(modelOps).Draw(m.t, "op")
	kinds, ok := opKinds[op]
	if !ok {
		kinds = oldKinds
	}
	p := m.genPath("path", kinds)
	content := modelContents[rapid.IntRange(0, len(modelContents)-1).Draw(m.t, "content")]
	switch op {
	case "write": // write: create or O_TRUNC, one write
		if m.safe(p, true, true) {
			m.log("write "+p+" "+shortQuote(content), os.WriteFile(m.abs(p), []byte(content), 0o644))
		}
	case "mkfile": // mkdir -p, then write
		if m.safe(p, true, true) {
			dir, _ := split(p)
			err := os.MkdirAll(m.abs(dir), 0o755)
			if err == nil {
				err = os.WriteFile(m.abs(p), []byte(content), 0o644)
			}
			m.log("mkdir -p && write "+p+" "+shortQuote(content), err)
		}
	case "otrunc": // open O_TRUNC, no write
		if m.safe(p, true, true) {
			m.log("open O_TRUNC "+p, openWrite(m.abs(p), os.O_WRONLY|os.O_TRUNC, func(*os.File) error { return nil }))
		}
	case "append": // append
		if m.safe(p, true, true) {
			m.log("append "+p+" "+shortQuote(content), openWrite(m.abs(p), os.O_WRONLY|os.O_APPEND|os.O_CREATE, func(f *os.File) error {
				_, err := f.WriteString(content)
				return err
			}))
		}
	case "truncate": // truncate(2)
		n := rapid.Int64Range(0, 10).Draw(m.t, "size")
		if m.safe(p, true, true) {
			m.log(fmt.Sprintf("truncate %s %d", p, n), os.Truncate(m.abs(p), n))
		}
	case "ftruncate": // ftruncate through a handle
		n := rapid.Int64Range(0, 10).Draw(m.t, "size")
		if m.safe(p, true, true) {
			m.log(fmt.Sprintf("ftruncate %s %d", p, n), openWrite(m.abs(p), os.O_WRONLY, func(f *os.File) error { return f.Truncate(n) }))
		}
	case "unlink": // unlink
		if m.safe(p, false, false) {
			m.log("unlink "+p, unix.Unlink(m.abs(p)))
		}
	case "rmdir": // rmdir
		if m.safe(p, false, false) {
			m.log("rmdir "+p, unix.Rmdir(m.abs(p)))
		}
	case "rmrf": // rm -rf
		if m.safe(p, false, false) {
			m.log("rm -rf "+p, os.RemoveAll(m.abs(p)))
		}
	case "rename": // rename, plain or renameat2
		q := m.genPath("to", newKinds)
		flag := rapid.SampledFrom([]uint{0, 0, unix.RENAME_EXCHANGE, unix.RENAME_NOREPLACE}).Draw(m.t, "flag")
		if m.safe(p, false, false) && m.safe(q, false, false) {
			m.log(fmt.Sprintf("rename %s %s flags %d", p, q, flag),
				unix.Renameat2(unix.AT_FDCWD, m.abs(p), unix.AT_FDCWD, m.abs(q), flag))
		}
	case "mkdir": // mkdir
		mode := rapid.SampledFrom([]os.FileMode{0o755, 0o700, 0o750}).Draw(m.t, "mode")
		if m.safe(p, false, false) {
			m.log(fmt.Sprintf("mkdir %s %o", p, mode), os.Mkdir(m.abs(p), mode))
		}
	case "symlink": // symlink
		target := rapid.SampledFrom(modelTargets).Draw(m.t, "target")
		if m.safe(p, false, false) {
			m.log("symlink "+target+" "+p, os.Symlink(target, m.abs(p)))
		}
	case "link": // hard link (never of the held file)
		q := m.genPath("to", newKinds)
		if !m.links || !m.safe(p, false, false) || !m.safe(q, false, false) {
			return
		}
		if rel, _ := m.resolve(p, false); m.held != nil {
			if ino, _ := m.ino(rel); ino == m.heldIno {
				return
			}
		}
		m.log("link "+p+" "+q, os.Link(m.abs(p), m.abs(q)))
	case "chmod": // chmod, keeping the owner's rwx on directories
		mode := rapid.SampledFrom([]os.FileMode{0o600, 0o644, 0o755, 0o700, 0o750, 0o444, 0o400}).Draw(m.t, "mode")
		if !m.safe(p, true, true) {
			return
		}
		if rel, _ := m.resolve(p, true); isDir(filepath.Join(m.ws, rel)) {
			mode |= 0o700
		} else if m.links {
			return
		}
		m.log(fmt.Sprintf("chmod %s %o", p, mode), os.Chmod(m.abs(p), mode))
	case "hold": // hold a file open for writing
		flags := os.O_RDWR | os.O_CREATE
		appending := rapid.Bool().Draw(m.t, "append")
		if appending {
			flags |= os.O_APPEND
		}
		if !m.safe(p, true, true) {
			return
		}
		m.closeHeld()
		f, err := os.OpenFile(m.abs(p), flags, 0o644)
		m.log(fmt.Sprintf("hold %s flags %#o", p, flags), err)
		if err == nil {
			rel, _ := m.resolve(p, true)
			ino, _ := m.ino(rel)
			m.held, m.heldP, m.heldIno, m.heldAppend = f, p, ino, appending
		}
	case "heldwrite": // write through the held handle
		if m.held == nil {
			return
		}
		off := rapid.Int64Range(0, 8).Draw(m.t, "off")
		var err error
		if m.heldAppend { // pwrite would append too; os refuses WriteAt
			_, err = m.held.WriteString(content)
		} else {
			_, err = m.held.WriteAt([]byte(content), off)
		}
		m.log(fmt.Sprintf("held write %s at %d %s", m.heldP, off, shortQuote(content)), err)
	case "heldtrunc": // ftruncate through the held handle
		if m.held == nil {
			return
		}
		n := rapid.Int64Range(0, 10).Draw(m.t, "size")
		m.log(fmt.Sprintf("held ftruncate %s %d", m.heldP, n), m.held.Truncate(n))
	case "step":
		label := rapid.SampledFrom([]string{"step", "edit", `{"name":"tool","args":{"x":1}}`}).Draw(m.t, "label")
		m.step(label)
	case "rewind": // rewind to a recorded state in the middle of the work
		seq := rapid.SampledFrom(m.seqs()).Draw(m.t, "rewind-to")
		if len(m.linked()) > 0 {
			return
		}
		if rep := m.rewind(seq, m.states[seq]); !rep.Unchanged {
			m.states[rep.Sequence] = m.states[seq]
		}
	}
}

// linked lists the names of every file or symlink with more than one,
// grouped by inode, each group sorted.
func (m *mountModel) linked() [][]string {
	names := map[uint64][]string{}
	for _, p := range m.existing() {
		if ino, linked := m.ino(p); linked {
			names[ino] = append(names[ino], p)
		}
	}
	var out [][]string
	for _, ps := range names {
		out = append(out, ps)
	}
	sort.Slice(out, func(i, j int) bool { return out[i][0] < out[j][0] })
	return out
}

// unlinkLinks removes all names but the first of every hard-linked file.
func (m *mountModel) unlinkLinks() {
	for _, ps := range m.linked() {
		for _, p := range ps[1:] {
			m.log("unlink extra name "+p, unix.Unlink(m.abs(p)))
		}
	}
}

func isDir(p string) bool {
	fi, err := os.Lstat(p)
	return err == nil && fi.IsDir()
}

func (m *mountModel) closeHeld() {
	if m.held != nil {
		m.log("close held "+m.heldP, m.held.Close())
		m.held = nil
	}
}

// TestMountModel runs random operations through a real mount, the way tools
// do (os and unix calls, failures included), in random steps and with
// rewinds among them, recording the whole tree at the start of every step
// and after every rewind. Then, for every recorded sequence T: @T shows that
// tree; rewinding to T (in random order) brings it back, path by path
// through the kernel's caches and by a fresh walk, and leaves @T alone;
// rewinding to just before that rewind brings the final tree back. Through
// it all the mount shows the backing directory.
//
// The seed is printed on failure; rerun with -rapid.seed=N (the operations,
// their results and the head after each are logged then). -rapid.checks=N
// runs more cases.
func TestMountModel(t *testing.T) {
	requireFUSE(t)
	rapid.Check(t, func(rt *rapid.T) {
		sync := rapid.Bool().Draw(rt, "sync")
		links := rapid.Bool().Draw(rt, "links")
		ws := t.TempDir()
		mt := mountT(t, Options{Workspace: ws, Sync: sync})
		defer unmountT(t, mt)
		m := &mountModel{t: rt, m: mt, mp: mt.Mountpoint(), ws: ws, states: map[record.Seq]testsupport.Tree{0: {}}, links: links}
		defer m.closeHeld()

		nops := rapid.IntRange(1, 60).Draw(rt, "ops")
		for range nops {
			m.randomOp()
		}
		m.closeHeld()
		m.unlinkLinks()
		m.checkBacking("after the operations")
		last := m.step("final")
		final := m.states[last]

		seqs := m.seqs()
		for _, s := range seqs {
			if d := diffTrees(testsupport.Snapshot(rt, view(m.mp, s)), m.states[s]); d != "" {
				rt.Fatalf("@%d differs from the tree recorded at %d:\n%s", s, s, d)
			}
		}
		for _, s := range rapid.Permutation(seqs).Draw(rt, "order") {
			rep := m.rewind(s, m.states[s])
			if d := diffTrees(testsupport.Snapshot(rt, view(m.mp, s)), m.states[s]); d != "" {
				rt.Fatalf("after rewinding to %d, @%d differs:\n%s", s, s, d)
			}
			if rep.Unchanged || rep.CheckpointSequence == 0 {
				m.check(fmt.Sprintf("rewind to %d changed nothing", s), final)
				continue
			}
			m.t.Logf("undo the rewind to %d:", s)
			m.rewind(rep.CheckpointSequence-1, final)
		}
		m.checkBacking("after the rewinds")
		for _, s := range seqs {
			if d := diffTrees(testsupport.Snapshot(rt, view(m.mp, s)), m.states[s]); d != "" {
				rt.Fatalf("after the rewinds, @%d differs:\n%s", s, d)
			}
		}
	})
}
