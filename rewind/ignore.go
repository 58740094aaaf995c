package rewind

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"

	"github.com/zerofs/zerofs/internal/ignore"
	"github.com/zerofs/zerofs/internal/quote"
	"github.com/zerofs/zerofs/record"
	"github.com/zerofs/zerofs/rewind/internal/index"
)

// Ignored paths (SPEC, .zeroignore): the patterns of .zeroignore at the
// workspace root, then Options.Ignore (mount's --ignore), in gitignore
// syntax. A path they match is never captured (expand drops it before
// anything is read, and prunes the walks of ignored directories) and never
// touched by a rewind, undo, redo, revert, merge or fork (leaveIgnored takes
// it out of every plan, and keeps a directory the plan would remove while
// something ignored is in it; mergeignore.go drops it from a merge's
// results, so it is never in conflict either). .zeroignore itself is never ignored: a
// change to it is recorded like any other.
//
// The engine reads .zeroignore at Open, and again after any change that
// names it (a capture of the path, or a rewind that restores it) once that
// change has had the chance to land: at the next capture, the next step
// boundary, or the next record.IgnoreStatus, whichever comes first. A .zeroignore
// that is not a regular file, is larger than MaxIgnoreFile, or cannot be
// read is not used (everything is then recorded, but for Options.Ignore)
// and record.IgnoreStatus says why; nothing is lost either way. Until the step
// ends, every capture reads the file again (it is small, and only a step
// that changed it pays), since a write through a handle already captured
// reaches the engine no more.
//
// A rewind's intent records the patterns its plan left alone: a rewind
// finished after a crash plans with them, whatever the next mount's rules
// (recover.go). Views show an ignored path as it is now (Ignores): its
// present content changed since T is not a change made behind the mount.
//
// With no patterns at all the request path pays one comparison per change
// (is it .zeroignore?) and an atomic load. With patterns, each change's
// path is matched once per capture call, before the engine's own "captured
// in this step" check; a path whose type decides the match (a pattern
// ending in /) and that Change does not describe costs one fstatat.

// MaxIgnoreFile is the largest .zeroignore the engine reads.
const MaxIgnoreFile = 1 << 20

// ignoreSet is a loaded set of patterns; replaced, never changed.
type ignoreSet struct {
	m      *ignore.Matcher // nil: nothing is ignored
	file   []byte          // .zeroignore's content as read (nil: absent or unusable)
	status record.IgnoreStatus
}

// ignoreState is the engine's ignore rules: the set in effect (read
// lock-free on every capture), whether .zeroignore may have changed since
// it was read, and a lock serialising its reads.
type ignoreState struct {
	set   atomic.Pointer[ignoreSet]
	dirty atomic.Bool
	mu    sync.Mutex // guards reading .zeroignore and replacing set
	// plan, while Open finishes an interrupted rewind, is the rules that
	// rewind was planned with (its intent's), used instead of set's.
	plan *ignore.Matcher
}

// loadIgnore reads .zeroignore and builds the set with Options.Ignore.
func (e *Engine) loadIgnore() {
	e.ign.mu.Lock()
	defer e.ign.mu.Unlock()
	e.ign.dirty.Store(false)
	e.ign.set.Store(e.readIgnoreSet(nil))
}

// readIgnoreSet reads .zeroignore and returns the set it and Options.Ignore
// make; old, when its file content is the same, is returned as it is.
func (e *Engine) readIgnoreSet(old *ignoreSet) *ignoreSet {
	data, err := e.ws.readIgnoreFile()
	if old != nil && err == nil && data != nil && bytes.Equal(data, old.file) {
		return old
	}
	s := &ignoreSet{}
	var file *ignore.Matcher
	switch {
	case err != nil:
		s.status.Err = err.Error()
		e.opts.Logger.Warn("rewind: "+record.IgnoreFile+" is not used: everything is recorded but for --ignore", "reason", err)
	case data != nil:
		file = ignore.Parse(data)
		s.file = data
		s.status.File = file.Patterns()
	}
	flags := ignore.New(e.opts.Ignore...)
	s.status.Flags = flags.Patterns()
	if m := ignore.Join(file, flags); m.Len() > 0 {
		s.m = m
		s.status.Patterns = m.Len()
	}
	return s
}

// readIgnoreFile is .zeroignore's content: nil when there is none, an error
// when it is there but cannot be used.
func (w *workspace) readIgnoreFile() ([]byte, error) {
	f, err := w.open(record.IgnoreFile, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK)
	if errors.Is(err, unix.ENOENT) {
		return nil, nil
	}
	if errors.Is(err, unix.ELOOP) {
		return nil, errors.New(record.IgnoreFile + " is a symlink: it must be a regular file at the workspace root")
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", record.IgnoreFile, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", record.IgnoreFile, err)
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file (%s)", record.IgnoreFile, fi.Mode().Type())
	}
	data, err := io.ReadAll(io.LimitReader(f, MaxIgnoreFile+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", record.IgnoreFile, err)
	}
	if len(data) > MaxIgnoreFile {
		return nil, fmt.Errorf("%s is larger than %d bytes", record.IgnoreFile, MaxIgnoreFile)
	}
	if data == nil {
		data = []byte{}
	}
	return data, nil
}

// ReadIgnore is what the .zeroignore of the workspace whose root directory
// is root ignores, read as Open reads it (for a workspace not mounted).
func ReadIgnore(root *os.File) record.IgnoreStatus {
	var st record.IgnoreStatus
	data, err := (&workspace{root: root}).readIgnoreFile()
	switch {
	case err != nil:
		st.Err = err.Error()
	case data != nil:
		st.File = ignore.Parse(data).Patterns()
		st.Patterns = len(st.File)
	}
	return st
}

// ignoreRules is the rules in effect, read again first when .zeroignore
// may have changed; nil when nothing is ignored.
func (e *Engine) ignoreRules() *ignore.Matcher {
	if e.ign.plan != nil {
		return e.ign.plan
	}
	if e.ign.dirty.Load() {
		e.ign.mu.Lock()
		if e.ign.dirty.Load() {
			e.ign.set.Store(e.readIgnoreSet(e.ign.set.Load()))
		}
		e.ign.mu.Unlock()
	}
	if s := e.ign.set.Load(); s != nil {
		return s.m
	}
	return nil
}

// ignoreSettled reads .zeroignore again if a change named it, and from
// then on reads it only after a new change names it: a step boundary,
// where the change's writes through the handle it had have landed (a
// handle kept open across the boundary is captured again, which names
// it again).
func (e *Engine) ignoreSettled() {
	if e.ign.dirty.Load() {
		e.ignoreRules()
		e.ign.dirty.Store(false)
	}
}

// IgnoreStatus is what is ignored now, and why .zeroignore is not used
// when it is not.
func (e *Engine) IgnoreStatus() record.IgnoreStatus {
	e.ignoreRules()
	if s := e.ign.set.Load(); s != nil {
		return s.status
	}
	return record.IgnoreStatus{}
}

// IgnorePatterns are the patterns in effect, in order (.zeroignore's, then
// Options.Ignore's).
func (e *Engine) IgnorePatterns() []string {
	return e.ignoreRules().Patterns()
}

// noteIgnoreChange marks .zeroignore as possibly changed when p names it.
func (e *Engine) noteIgnoreChange(p string) {
	if p == record.IgnoreFile {
		e.ign.dirty.Store(true)
	}
}

// ignored reports whether m ignores p, whose type is kind ("" when not
// known: then p is stat'ed if its type decides, and dir says whether an
// absent p is about to become a directory).
func (e *Engine) ignored(m *ignore.Matcher, p string, kind record.Kind, dirfd int, dir bool) bool {
	if m == nil || p == record.IgnoreFile || p == "" {
		return false
	}
	if kind != "" {
		return m.Match(p, kind == record.KindDir)
	}
	asFile, asDir := m.Match(p, false), m.Match(p, true)
	if asFile == asDir {
		return asFile
	}
	var st unix.Stat_t
	var err error
	if dirfd >= 0 {
		_, name := index.SplitPath(p)
		err = unix.Fstatat(dirfd, name, &st, unix.AT_SYMLINK_NOFOLLOW)
	} else {
		st, err = e.ws.lstat(p)
	}
	if err != nil {
		if dir {
			return asDir
		}
		return asFile
	}
	if st.Mode&unix.S_IFMT == unix.S_IFDIR {
		return asDir
	}
	return asFile
}

// keptChange reports whether change c is captured at all under m (its own
// path is not ignored); Tree and From walks prune ignored paths
// themselves (walkKept).
func (e *Engine) keptChange(m *ignore.Matcher, c Change) bool {
	dirfd := -1
	if c.InDir {
		dirfd = c.Dirfd
	}
	return !e.ignored(m, c.Path, "", dirfd, c.Dir)
}

// walkKept calls fn for every path under directory p that m does not
// ignore, parents before children, never reading an ignored directory.
// to, when not "", maps each path under p to the name fn is given (the
// same relative path under to) and is what m is asked about.
func (e *Engine) walkKept(m *ignore.Matcher, p, to string, fn func(string)) error {
	f, err := e.ws.openDirRead(p)
	if isMissing(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("rewind: read directory %q: %w", p, err)
	}
	ents, err := f.ReadDir(-1)
	f.Close()
	if err != nil {
		return fmt.Errorf("rewind: read directory %q: %w", p, err)
	}
	for _, de := range ents {
		n := de.Name()
		if p == "" && record.IsReserved(n) {
			continue
		}
		src, name := index.JoinPath(p, n), index.JoinPath(p, n)
		if to != "" {
			name = index.JoinPath(to, n)
		}
		isDir := de.Type().IsDir()
		if name != record.IgnoreFile && m.Match(name, isDir) {
			continue
		}
		fn(name)
		if isDir {
			next := ""
			if to != "" {
				next = name
			}
			if err := e.walkKept(m, src, next, fn); err != nil {
				return err
			}
		}
	}
	return nil
}

// leaveIgnored takes the paths the rules ignore out of plan p: nothing
// ignored is restored, changed or removed, and a directory the plan would
// remove while something ignored is in it stays, with only its other
// contents removed (as git leaves a directory that holds ignored files).
// A path whose restore needs such a directory gone is listed as skipped.
func (e *Engine) leaveIgnored(p *rewindPlan) error {
	m := e.ignoreRules()
	if m == nil {
		return nil
	}
	cur := map[string]record.Kind{}
	for _, en := range p.entries {
		if en.cur.Exists {
			cur[en.path] = en.cur.State.Kind
		}
	}
	// A path is left alone if it is ignored as what it is now or as what
	// the plan would make it.
	leave := func(path string, want record.Kind) bool {
		if k, ok := cur[path]; ok && e.ignored(m, path, k, -1, false) {
			return true
		}
		return want != "" && e.ignored(m, path, want, -1, false)
	}
	var removes []string
	blocked := map[string]bool{}
	for _, r := range p.removes {
		if leave(r, "") {
			continue
		}
		if cur[r] != record.KindDir {
			removes = append(removes, r)
			continue
		}
		var pieces []string
		kept, err := e.removeAround(m, r, &pieces)
		if err != nil {
			return err
		}
		removes = append(removes, pieces...)
		if !kept {
			continue
		}
		blocked[r] = true
		// What goes instead of r is previewed path by path.
		for _, q := range pieces {
			if _, ok := cur[q]; ok {
				continue // a path of the plan's own
			}
			now, err := e.live(q)
			if err != nil {
				return err
			}
			p.entries = append(p.entries, planEntry{path: q, tgt: Entry{}, cur: now})
		}
	}
	p.removes = removes
	creates := p.creates[:0]
	for _, st := range p.creates {
		if leave(st.Path, st.Kind) {
			continue
		}
		if blocked[st.Path] {
			p.skipped = append(p.skipped, st.Path)
			continue
		}
		creates = append(creates, st)
	}
	p.creates = creates
	chmods := p.chmods[:0]
	for _, st := range p.chmods {
		if leave(st.Path, st.Kind) || blocked[st.Path] {
			continue
		}
		chmods = append(chmods, st)
	}
	p.chmods = chmods
	entries := p.entries[:0]
	for _, en := range p.entries {
		var want record.Kind
		if en.tgt.Exists {
			want = en.tgt.State.Kind
		}
		if leave(en.path, want) || blocked[en.path] {
			continue // left alone, or a directory that stays
		}
		entries = append(entries, en)
	}
	p.entries = entries
	if len(blocked) > 0 {
		sort.SliceStable(p.entries, func(i, j int) bool {
			a, b := p.entries[i].path, p.entries[j].path
			if da, db := depth(a), depth(b); da != db {
				return da < db
			}
			return a < b
		})
	}
	return nil
}

// removeAround adds to removes what removing directory dir takes away
// without touching anything m ignores: dir itself when nothing ignored is
// in it, else each of its entries that holds nothing ignored (kept is then
// true: dir stays).
func (e *Engine) removeAround(m *ignore.Matcher, dir string, removes *[]string) (kept bool, err error) {
	f, err := e.ws.openDirRead(dir)
	if isMissing(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("rewind: read directory %q: %w", dir, err)
	}
	ents, err := f.ReadDir(-1)
	f.Close()
	if err != nil {
		return false, fmt.Errorf("rewind: read directory %q: %w", dir, err)
	}
	var mine []string
	for _, de := range ents {
		c := index.JoinPath(dir, de.Name())
		if dir == "" && record.IsReserved(de.Name()) {
			continue
		}
		isDir := de.Type().IsDir()
		if c != record.IgnoreFile && m.Match(c, isDir) {
			kept = true
			continue
		}
		if !isDir {
			mine = append(mine, c)
			continue
		}
		inner, err := e.removeAround(m, c, &mine)
		if err != nil {
			return false, err
		}
		kept = kept || inner
	}
	if !kept {
		*removes = append(*removes, dir)
		return false, nil
	}
	*removes = append(*removes, mine...)
	return true, nil
}

// loadIgnoreAt reads the rules of the .zeroignore in directory dir (a
// mounted workspace's root, or a view of it), for ForkDir: nil when there
// is none or it cannot be used.
func loadIgnoreAt(dir string) *ignore.Matcher {
	f, err := os.OpenFile(filepath.Join(dir, record.IgnoreFile), os.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK, 0)
	if err != nil {
		return nil
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		return nil
	}
	data, err := io.ReadAll(io.LimitReader(f, MaxIgnoreFile+1))
	if err != nil || len(data) > MaxIgnoreFile {
		return nil
	}
	if m := ignore.Parse(data); m.Len() > 0 {
		return m
	}
	return nil
}

// Ignores reports whether the rules in effect ignore workspace path p as
// it is now (a view shows such a path as it is now: it has no history).
func (e *Engine) Ignores(p string) bool {
	return e.ignored(e.ignoreRules(), p, "", -1, false)
}

// refuseIgnored refuses a path rewind whose every path is ignored: a
// rewind leaves such paths alone, so it could change nothing (a mistake,
// as a path that exists neither then nor now is). nil roots is a
// whole-workspace rewind.
func (e *Engine) refuseIgnored(roots []string) error {
	m := e.ignoreRules()
	if m == nil || len(roots) == 0 {
		return nil
	}
	for _, p := range roots {
		if !e.ignored(m, p, "", -1, false) {
			return nil
		}
	}
	q := make([]string, len(roots))
	for i, p := range roots {
		q[i] = quote.Name(p)
	}
	verb := "are"
	if len(q) == 1 {
		verb = "is"
	}
	return &record.RefusedError{Refusal: record.RefusedBadRequest, Head: e.Head(), PrunedBefore: e.PrunedBefore(),
		Msg: fmt.Sprintf("rewind: %s %s ignored (%s or --ignore): rewinds leave ignored paths alone", strings.Join(q, ", "), verb, record.IgnoreFile)}
}

// IgnoreRules is the rules st describes: its file's patterns, then its
// flags'.
func IgnoreRules(st record.IgnoreStatus) *ignore.Matcher {
	return ignore.Join(ignore.New(st.File...), ignore.New(st.Flags...))
}
