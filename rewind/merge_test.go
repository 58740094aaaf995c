package rewind

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"

	"golang.org/x/sys/unix"

	"github.com/zerofs/zerofs/record"
)

// mergeT is a workspace with an engine and a fork of it with an engine of
// its own, so that both sides record their steps.
type mergeT struct {
	t        *testing.T
	e, f     *Engine
	ws, fork string
}

// newMergeT makes files in a fresh workspace, forks it, and opens the fork.
func newMergeT(t *testing.T, files map[string]string) *mergeT {
	t.Helper()
	e, ws := openT(t, Options{Sync: true})
	m := &mergeT{t: t, e: e, ws: ws}
	m.step(e, "setup")
	for p, c := range files {
		m.write(e, ws, p, c)
	}
	m.fork = filepath.Join(t.TempDir(), "fork")
	if _, err := e.Fork(context.Background(), e.Head(), m.fork, ws); err != nil {
		t.Fatal(err)
	}
	m.f = m.openFork()
	return m
}

func (m *mergeT) openFork() *Engine {
	m.t.Helper()
	return openAt(m.t, m.fork, Options{StoreDir: filepath.Join(m.fork, record.StoreName), Sync: true})
}

func (m *mergeT) step(e *Engine, label string) {
	m.t.Helper()
	if _, err := e.BeginStep(context.Background(), label, nil); err != nil {
		m.t.Fatal(err)
	}
}

// write writes p (parents made as needed) through e's capture.
func (m *mergeT) write(e *Engine, root, p, content string) {
	m.t.Helper()
	if dir := filepath.Dir(p); dir != "." {
		m.do(e, func() error { return os.MkdirAll(filepath.Join(root, dir), 0o755) }, Change{Path: dir})
	}
	m.do(e, func() error { return os.WriteFile(filepath.Join(root, p), []byte(content), 0o644) }, Change{Path: p})
}

func (m *mergeT) do(e *Engine, fn func() error, changes ...Change) {
	m.t.Helper()
	change(m.t, e, fn, changes...)
}

func (m *mergeT) merge(req record.MergeRequest, dry bool) (record.RewindResult, error) {
	req.Dir, req.Workspace = m.fork, m.ws
	return m.e.Apply(context.Background(), record.Request{Merge: &req, DryRun: dry})
}

func (m *mergeT) read(p string) string {
	m.t.Helper()
	b, err := os.ReadFile(filepath.Join(m.ws, p))
	if err != nil {
		return "<" + err.Error() + ">"
	}
	return string(b)
}

// TestMergeBringsForkIn: changes on both sides to different paths, and to
// different lines of one file, merge; a removal, a mode, a symlink, a new
// empty directory and a new file come in; the merge is one rewind of form
// "merge" naming the fork's steps, and undo and redo take it back and
// bring it back whole.
func TestMergeBringsForkIn(t *testing.T) {
	m := newMergeT(t, map[string]string{"a.txt": "1\n2\n3\n4\n5\n", "b.txt": "b\n", "d/x": "x\n", "keep": "k\n"})
	if err := os.Symlink("a.txt", filepath.Join(m.ws, "link")); err != nil {
		t.Fatal(err)
	}
	// The symlink above was made behind the engine's back before the fork:
	// fork again so both sides have it.
	os.RemoveAll(m.fork)
	if _, err := m.e.Fork(context.Background(), m.e.Head(), m.fork, m.ws); err != nil {
		t.Fatal(err)
	}
	m.f = m.openFork()
	base := m.e.Head()

	m.step(m.e, "ours edits line 1")
	m.write(m.e, m.ws, "a.txt", "ONE\n2\n3\n4\n5\n")
	m.write(m.e, m.ws, "ours.txt", "mine\n")

	m.step(m.f, "theirs edits line 5")
	m.write(m.f, m.fork, "a.txt", "1\n2\n3\n4\nFIVE\n")
	m.step(m.f, "theirs adds and removes")
	m.write(m.f, m.fork, "new/deep.txt", "new\n")
	m.do(m.f, func() error { return os.Remove(filepath.Join(m.fork, "b.txt")) }, Change{Path: "b.txt", Removed: true})
	m.do(m.f, func() error { return os.Chmod(filepath.Join(m.fork, "d/x"), 0o700) }, Change{Path: "d/x"})
	m.do(m.f, func() error { return os.Mkdir(filepath.Join(m.fork, "empty"), 0o750) }, Change{Path: "empty"})
	m.do(m.f, func() error {
		os.Remove(filepath.Join(m.fork, "link"))
		return os.Symlink("d/x", filepath.Join(m.fork, "link"))
	}, Change{Path: "link"})

	dry, err := m.merge(record.MergeRequest{}, true)
	if err != nil {
		t.Fatalf("dry run: %v", err)
	}
	if m.read("a.txt") != "ONE\n2\n3\n4\n5\n" {
		t.Fatalf("a dry run changed a.txt: %q", m.read("a.txt"))
	}
	got := map[string]string{}
	for _, c := range dry.Preview {
		got[c.Path] = c.Action
		if c.Path == "a.txt" && (c.Lines == nil || *c.Lines != (record.LineCount{Added: 1, Removed: 1})) {
			t.Errorf("preview of a.txt: got lines %+v, want +1 -1", c.Lines)
		}
	}
	want := map[string]string{"a.txt": record.ActionRestore, "b.txt": record.ActionDelete, "d/x": record.ActionRestore, "empty": record.ActionCreate,
		"link": record.ActionRestore, "new": record.ActionCreate, "new/deep.txt": record.ActionCreate}
	if len(got) != len(want) {
		t.Errorf("preview: got %v, want %v", got, want)
	}
	for p, a := range want {
		if got[p] != a {
			t.Errorf("preview of %s: got %q, want %q (all: %v)", p, got[p], a, got)
		}
	}
	head := m.e.Head()
	res, err := m.merge(record.MergeRequest{}, false)
	if err != nil {
		t.Fatalf("merge: %v", err)
	}
	check := func(when string) {
		t.Helper()
		if g := m.read("a.txt"); g != "ONE\n2\n3\n4\nFIVE\n" {
			t.Errorf("%s: a.txt: got %q", when, g)
		}
		if g := m.read("new/deep.txt"); g != "new\n" {
			t.Errorf("%s: new/deep.txt: got %q", when, g)
		}
		if g := m.read("ours.txt"); g != "mine\n" {
			t.Errorf("%s: ours.txt: got %q", when, g)
		}
		if _, err := os.Lstat(filepath.Join(m.ws, "b.txt")); !os.IsNotExist(err) {
			t.Errorf("%s: b.txt still there (%v)", when, err)
		}
		if fi, err := os.Stat(filepath.Join(m.ws, "d/x")); err != nil || fi.Mode().Perm() != 0o700 {
			t.Errorf("%s: d/x: %v %v, want mode 0700", when, fi.Mode(), err)
		}
		if fi, err := os.Stat(filepath.Join(m.ws, "empty")); err != nil || !fi.IsDir() || fi.Mode().Perm() != 0o750 {
			t.Errorf("%s: empty: %v, want an empty directory 0750", when, err)
		}
		if target, err := os.Readlink(filepath.Join(m.ws, "link")); err != nil || target != "d/x" {
			t.Errorf("%s: link: got %q %v, want d/x", when, target, err)
		}
	}
	check("after the merge")
	if res.Record.Form != record.FormMerge || res.Record.Merge == nil || res.Record.Merge.Base != base {
		t.Fatalf("record: got %+v, want form merge from base %d", res.Record, base)
	}
	if steps := res.Record.Merge.Steps; len(steps) != 2 || steps[0].Label != "theirs edits line 5" || steps[1].Label != "theirs adds and removes" {
		t.Errorf("steps brought in: got %+v", steps)
	}
	if len(res.Record.Merge.Merged) != 1 || res.Record.Merge.Merged[0] != "a.txt" {
		t.Errorf("merged line by line: got %v, want [a.txt]", res.Record.Merge.Merged)
	}
	// One undo takes the whole merge back.
	u, err := m.e.Apply(context.Background(), record.Request{Undo: true})
	if err != nil {
		t.Fatal(err)
	}
	if u.Undid == nil || u.Undid.Kind != "rewind" || u.Undid.Label != record.FormMerge {
		t.Errorf("undo took back %+v, want the merge", u.Undid)
	}
	if g := m.read("a.txt"); g != "ONE\n2\n3\n4\n5\n" {
		t.Errorf("after undo: a.txt: got %q", g)
	}
	if g := m.read("b.txt"); g != "b\n" {
		t.Errorf("after undo: b.txt: got %q", g)
	}
	for _, p := range []string{"new", "empty"} {
		if _, err := os.Lstat(filepath.Join(m.ws, p)); !os.IsNotExist(err) {
			t.Errorf("after undo: %s still there", p)
		}
	}
	if target, _ := os.Readlink(filepath.Join(m.ws, "link")); target != "a.txt" {
		t.Errorf("after undo: link -> %q, want a.txt", target)
	}
	if _, err := m.e.Apply(context.Background(), record.Request{Redo: true}); err != nil {
		t.Fatal(err)
	}
	check("after redo")
	// @head-before-the-merge still shows the workspace before it.
	if s, _ := readAt(t, m.e, "a.txt", head); s != "ONE\n2\n3\n4\n5\n" {
		t.Errorf("a.txt at %d: got %q", head, s)
	}
}

// TestMergeConflict: both sides change the same line, or one removes what
// the other changes: the merge changes nothing and names each path with
// both sides' steps; settling takes the side asked for.
func TestMergeConflict(t *testing.T) {
	m := newMergeT(t, map[string]string{"a.txt": "1\n2\n3\n", "b.txt": "b\n", "c.txt": "c\n"})
	m.step(m.e, "ours")
	m.write(m.e, m.ws, "a.txt", "1\nOURS\n3\n")
	m.write(m.e, m.ws, "b.txt", "b ours\n")
	m.step(m.f, "theirs")
	m.write(m.f, m.fork, "a.txt", "1\nTHEIRS\n3\n")
	m.do(m.f, func() error { return os.Remove(filepath.Join(m.fork, "b.txt")) }, Change{Path: "b.txt", Removed: true})
	m.write(m.f, m.fork, "c.txt", "c theirs\n")
	head := m.e.Head()
	res, err := m.merge(record.MergeRequest{}, false)
	var ce *record.MergeConflictError
	if !errors.As(err, &ce) || !errors.Is(err, record.ErrConflict) {
		t.Fatalf("got %v, want a *record.MergeConflictError", err)
	}
	if len(ce.Conflicts) != 2 || ce.Conflicts[0].Path != "a.txt" || ce.Conflicts[1].Path != "b.txt" {
		t.Fatalf("conflicts: got %+v, want a.txt and b.txt", ce.Conflicts)
	}
	for _, c := range ce.Conflicts {
		if c.Ours == nil || c.Ours.Label != "ours" || c.Theirs == nil || c.Theirs.Label != "theirs" {
			t.Errorf("%s: got ours %+v theirs %+v, want both sides' steps", c.Path, c.Ours, c.Theirs)
		}
	}
	if res.Merge == nil || len(res.Merge.Conflicts) != 2 {
		t.Errorf("result: got %+v, want the conflicts", res.Merge)
	}
	if m.e.Head() != head || m.read("c.txt") != "c\n" || m.read("a.txt") != "1\nOURS\n3\n" {
		t.Fatalf("a refused merge changed something: head %d (was %d), c.txt %q", m.e.Head(), head, m.read("c.txt"))
	}
	// A path to settle that holds no conflict is refused.
	if _, err := m.merge(record.MergeRequest{Settle: record.SettleTheirs, Paths: []string{"c.txt"}}, false); !errors.Is(err, record.ErrBadRequest) || !strings.Contains(err.Error(), "no conflict to settle at c.txt") {
		t.Fatalf("settling c.txt: got %v, want a bad request", err)
	}
	// Settle a.txt only: b.txt still conflicts.
	if _, err := m.merge(record.MergeRequest{Settle: record.SettleTheirs, Paths: []string{"a.txt"}}, false); !errors.As(err, &ce) || len(ce.Conflicts) != 1 || ce.Conflicts[0].Path != "b.txt" {
		t.Fatalf("settling a.txt: got %v, want b.txt to conflict", err)
	}
	res, err = m.merge(record.MergeRequest{Settle: record.SettleTheirs}, false)
	if err != nil {
		t.Fatal(err)
	}
	if m.read("a.txt") != "1\nTHEIRS\n3\n" || m.read("c.txt") != "c theirs\n" {
		t.Errorf("after settling as theirs: a.txt %q c.txt %q", m.read("a.txt"), m.read("c.txt"))
	}
	if _, err := os.Lstat(filepath.Join(m.ws, "b.txt")); !os.IsNotExist(err) {
		t.Errorf("b.txt: theirs removed it, still there")
	}
	if s := res.Record.Merge; strings.Join(s.Settled, " ") != "a.txt b.txt" || s.SettledAs != record.SettleTheirs {
		t.Errorf("settled: got %v as %q", s.Settled, s.SettledAs)
	}
}

// TestMergeRefusesNonFork: a directory that is not a fork of this
// workspace is refused, naming why, and nothing changes.
func TestMergeRefusesNonFork(t *testing.T) {
	m := newMergeT(t, map[string]string{"a": "a\n"})
	other, ows := openT(t, Options{})
	otherFork := filepath.Join(t.TempDir(), "otherfork")
	if _, err := other.Fork(context.Background(), 0, otherFork, ows); err != nil {
		t.Fatal(err)
	}
	plain := t.TempDir()
	head := m.e.Head()
	os.Mkdir(filepath.Join(m.ws, "inside"), 0o755)
	link := filepath.Join(plain, "link")
	os.Symlink(filepath.Join(m.ws, "inside"), link)
	for _, dir := range []string{plain, otherFork, filepath.Join(plain, "missing"), filepath.Join(m.ws, "inside"), m.ws, link} {
		_, err := m.e.Apply(context.Background(), record.Request{Merge: &record.MergeRequest{Dir: dir, Workspace: m.ws}})
		if !errors.Is(err, record.ErrNotFork) {
			t.Errorf("merge of %s: got %v, want record.ErrNotFork", dir, err)
		}
	}
	if m.e.Head() != head {
		t.Errorf("head moved: %d, was %d", m.e.Head(), head)
	}
}

// TestMergeNamesRoundTrip: names that are not UTF-8 keep their bytes
// through JSON in a merge's request, record and conflicts (the log, the
// intent and the daemon's report carry them so).
func TestMergeNamesRoundTrip(t *testing.T) {
	odd := "d\xff/f\xfe"
	req := record.MergeRequest{Dir: "/w/fork\xff", Workspace: "/w/ws\xfe", Settle: record.SettleOurs, Paths: []string{odd}}
	rec := record.MergeRecord{Dir: "/w/fork\xff", Merged: []string{odd}, Settled: []string{"x", odd}, SettledAs: record.SettleOurs}
	con := record.MergeConflict{Path: odd, Why: "both"}
	for _, c := range []struct {
		in, out any
	}{{req, &record.MergeRequest{}}, {rec, &record.MergeRecord{}}, {con, &record.MergeConflict{}}} {
		b, err := json.Marshal(c.in)
		if err != nil {
			t.Fatal(err)
		}
		if !utf8.Valid(b) {
			t.Fatalf("%T: JSON not UTF-8: %q", c.in, b)
		}
		if err := json.Unmarshal(b, c.out); err != nil {
			t.Fatal(err)
		}
		if got := reflect.ValueOf(c.out).Elem().Interface(); !reflect.DeepEqual(got, c.in) {
			t.Errorf("%T: got %+v, want %+v (JSON %s)", c.in, got, c.in, b)
		}
	}
}

// TestMergeXattrs: extended attributes merge name by name, on a file
// whose content changes too: the workspace's own attribute stays, the
// fork's new one comes in; the same attribute set two ways conflicts.
func TestMergeXattrs(t *testing.T) {
	m := newMergeT(t, map[string]string{"a.txt": "1\n2\n3\n", "b.txt": "b\n"})
	set := func(e *Engine, root, p, name, value string) {
		m.do(e, func() error { return unix.Lsetxattr(filepath.Join(root, p), name, []byte(value), 0) }, Change{Path: p})
	}
	if err := unix.Lsetxattr(filepath.Join(m.ws, "b.txt"), "user.probe", []byte("1"), 0); err != nil {
		t.Skipf("no user xattrs here: %v", err)
	}
	unix.Lremovexattr(filepath.Join(m.ws, "b.txt"), "user.probe")
	m.step(m.e, "ours")
	set(m.e, m.ws, "a.txt", "user.ours", "o")
	m.write(m.e, m.ws, "a.txt", "ONE\n2\n3\n")
	set(m.e, m.ws, "b.txt", "user.both", "ours")
	m.step(m.f, "theirs")
	set(m.f, m.fork, "a.txt", "user.theirs", "t")
	m.write(m.f, m.fork, "a.txt", "1\n2\nTHREE\n")
	set(m.f, m.fork, "b.txt", "user.both", "theirs")
	_, err := m.merge(record.MergeRequest{}, false)
	var ce *record.MergeConflictError
	if !errors.As(err, &ce) || len(ce.Conflicts) != 1 || ce.Conflicts[0].Path != "b.txt" || !strings.Contains(ce.Conflicts[0].Why, `"user.both"`) {
		t.Fatalf("got %v, want b.txt's user.both to conflict", err)
	}
	if _, err := m.merge(record.MergeRequest{Settle: record.SettleOurs, Paths: []string{"b.txt"}}, false); err != nil {
		t.Fatal(err)
	}
	if got := m.read("a.txt"); got != "ONE\n2\nTHREE\n" {
		t.Errorf("a.txt: got %q", got)
	}
	for name, want := range map[string]string{"user.ours": "o", "user.theirs": "t"} {
		buf := make([]byte, 64)
		n, err := unix.Lgetxattr(filepath.Join(m.ws, "a.txt"), name, buf)
		if err != nil || string(buf[:n]) != want {
			t.Errorf("a.txt %s: got %q %v, want %q", name, buf[:max(n, 0)], err, want)
		}
	}
	buf := make([]byte, 64)
	if n, err := unix.Lgetxattr(filepath.Join(m.ws, "b.txt"), "user.both", buf); err != nil || string(buf[:n]) != "ours" {
		t.Errorf("b.txt user.both: got %q %v, want ours (settled)", buf[:max(n, 0)], err)
	}
}

// TestMergeKeepsSetuidTheForkCouldNotCopy: a fork made by a user other
// than a setuid file's owner has the file without its setuid bit (a copy
// keeps it only for its owner); merging that fork back leaves the
// workspace's file as it is, rather than taking the bit's loss as the
// fork's change. A bit the fork's owner itself removed still comes in.
func TestMergeKeepsSetuidTheForkCouldNotCopy(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to give a file to another owner")
	}
	m := newMergeT(t, map[string]string{"tool": "#!/bin/sh\n", "mine": "m\n", "a.txt": "a\n"})
	for _, p := range []string{"tool", "mine"} {
		path := filepath.Join(m.ws, p)
		m.do(m.e, func() error {
			if err := os.Chown(path, 1234, 1234); err != nil {
				return err
			}
			return os.Chmod(path, 0o755|os.ModeSetuid)
		}, Change{Path: p})
	}
	// A fork made now (by root) cannot keep tool's and mine's setuid bits.
	os.RemoveAll(m.fork)
	if _, err := m.e.Fork(context.Background(), m.e.Head(), m.fork, m.ws); err != nil {
		t.Fatal(err)
	}
	m.f = m.openFork()
	if fi, _ := os.Stat(filepath.Join(m.fork, "tool")); fi.Mode()&os.ModeSetuid != 0 {
		t.Fatalf("the fork kept tool's setuid bit: %v", fi.Mode())
	}
	m.step(m.f, "theirs")
	m.write(m.f, m.fork, "a.txt", "theirs\n")
	m.do(m.f, func() error { return os.Chown(filepath.Join(m.fork, "mine"), 1234, 1234) }, Change{Path: "mine"})
	if _, err := m.merge(record.MergeRequest{}, false); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(filepath.Join(m.ws, "tool")); err != nil || fi.Mode() != 0o755|os.ModeSetuid {
		t.Errorf("tool: got %v %v, want -rwsr-xr-x as before", fi.Mode(), err)
	}
	// mine: the fork gave it back to its owner without the bit: that is
	// the fork's change.
	if fi, err := os.Stat(filepath.Join(m.ws, "mine")); err != nil || fi.Mode() != 0o755 {
		t.Errorf("mine: got %v %v, want -rwxr-xr-x (the fork's owner left the bit off)", fi.Mode(), err)
	}
	if got := m.read("a.txt"); got != "theirs\n" {
		t.Errorf("a.txt: got %q", got)
	}
}

// TestMergeKeepsCapabilityTheForkCouldNotCopy: as for a setuid bit, a
// file's capability recorded with another owner than the fork's writer
// is not copied into the fork, and merging the fork back keeps it.
func TestMergeKeepsCapabilityTheForkCouldNotCopy(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to set a capability")
	}
	m := newMergeT(t, map[string]string{"tool": "#!/bin/sh\n", "a.txt": "a\n"})
	// cap_net_bind_service+ep, VFS_CAP_REVISION_2.
	capv := []byte{0x01, 0x00, 0x00, 0x02, 0x00, 0x04, 0x00, 0x00, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}
	path := filepath.Join(m.ws, "tool")
	m.do(m.e, func() error {
		if err := os.Chown(path, 1234, 1234); err != nil {
			return err
		}
		return unix.Setxattr(path, record.XattrCapability, capv, 0)
	}, Change{Path: "tool"})
	os.RemoveAll(m.fork)
	if _, err := m.e.Fork(context.Background(), m.e.Head(), m.fork, m.ws); err != nil {
		t.Fatal(err)
	}
	m.f = m.openFork()
	if _, err := unix.Getxattr(filepath.Join(m.fork, "tool"), record.XattrCapability, make([]byte, 64)); err == nil {
		t.Fatal("the fork kept tool's capability")
	}
	m.step(m.f, "theirs")
	m.write(m.f, m.fork, "a.txt", "theirs\n")
	if _, err := m.merge(record.MergeRequest{}, false); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 64)
	n, err := unix.Getxattr(path, record.XattrCapability, buf)
	if err != nil || !bytes.Equal(buf[:n], capv) {
		t.Errorf("tool's capability after the merge: %x %v, want %x", buf[:max(n, 0)], err, capv)
	}
	if got := m.read("a.txt"); got != "theirs\n" {
		t.Errorf("a.txt: got %q", got)
	}
}

// TestMergeSymlinkRemovedByFork: a symlink the fork removed and the
// workspace left as it was goes in the merge, even when the workspace's
// history holds a before-state of it since the fork (a capture that
// changed nothing): the history's state of a symlink and a stat of it
// agree that a symlink has no mode, so the workspace did not change it
// (the branch model test found it: a conflict, settled ours, kept it).
func TestMergeSymlinkRemovedByFork(t *testing.T) {
	e, ws := openT(t, Options{Sync: true})
	m := &mergeT{t: t, e: e, ws: ws}
	m.step(e, "setup")
	m.write(e, ws, "a.txt", "a\n")
	m.do(e, func() error { return os.Symlink("a.txt", filepath.Join(ws, "s")) }, Change{Path: "s"})
	m.fork = filepath.Join(t.TempDir(), "fork")
	if _, err := e.Fork(context.Background(), e.Head(), m.fork, ws); err != nil {
		t.Fatal(err)
	}
	m.f = m.openFork()
	m.step(e, "ours")
	m.do(e, func() error { return nil }, Change{Path: "s"}) // captured, unchanged
	m.step(m.f, "theirs")
	m.do(m.f, func() error { return os.Remove(filepath.Join(m.fork, "s")) }, Change{Path: "s"})
	if _, err := m.merge(record.MergeRequest{}, false); err != nil {
		t.Fatalf("merge: %v, want the fork's removal of s taken", err)
	}
	if _, err := os.Lstat(filepath.Join(ws, "s")); !os.IsNotExist(err) {
		t.Errorf("s after the merge: %v, want it removed as the fork removed it", err)
	}
}
