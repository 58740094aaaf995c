package rewind

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sort"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/zerofs/zerofs/blobstore"
	"github.com/zerofs/zerofs/record"
	"github.com/zerofs/zerofs/rewind/internal/index"
)

// Caller names the process whose request causes a capture.
type Caller struct {
	PID  int
	Comm string
	// Resolve, when set, gives PID and Comm instead. The engine calls it
	// only when it stores a before-state, while the request still waits
	// for it: most changes find their path captured already in the step,
	// and naming a process costs a read of /proc.
	Resolve func() (pid int, comm string)
	// Lineage, when set, gives the process and its ancestors, nearest
	// first, read now. The engine calls it when an agent session begins a
	// step or turn, to find its agent process, and to tell whose change a
	// change is while agents are known (session.go) when Tree is not set.
	Lineage func() []Proc
	// Tree, when set, is Lineage kept per process by the caller: the ids
	// and start times are exact, the names may be older than an exec.
	// The engine asks it on every capture while agents are known, so it
	// must cost next to nothing after the first call for a process.
	Tree func() []Proc
}

// resolved is c with Resolve called.
func (c Caller) resolved() Caller {
	if c.Resolve != nil {
		c.PID, c.Comm = c.Resolve()
		c.Resolve = nil
	}
	return c
}

// Change is one path about to change.
//
// Tree asks for the whole subtree under a directory to be captured too (a
// directory about to be renamed away: its descendants' paths change with it).
// From names a directory whose subtree is about to appear under Path (the
// source of that rename, seen from its destination): for every path From/x,
// Path/x is captured as it is now, usually absent. Without it, a state
// before the rename in which Path was a different directory would show the
// moved-in names as if they had been there.
//
// Removed says Path's own name is about to go (an unlink, or the victim of
// a rename): a regular file with one link that no handle holds open for
// writing (Options.OpenForWrite) is then kept, its inode hard-linked into
// the store (blobstore.Store.Keep), instead of copied.
//
// Stash, with Removed, says the name goes by an unlink: such a file is
// stashed instead (linked into the store unread, its blob named after the
// request returns: stash.go).
//
// Dirfd, where InDir is set, is a descriptor of Path's parent directory
// that the caller resolved beneath the workspace root while holding the
// workspace lock (Begin's), still open: Path itself is then read through
// it (fstatat and openat of its name) instead of being resolved again.
//
// Dir says an absent Path is about to become a directory (a mkdir): a
// pattern that ignores directories only (ignore.go) then applies to it.
type Change struct {
	Path    string
	Tree    bool
	From    string
	Removed bool
	Stash   bool
	Dirfd   int
	InDir   bool
	Dir     bool

	// NoXattrs, with Removed, says the caller knows the file has no
	// extended attributes: a stash by a move then reads none.
	NoXattrs bool

	// move, set by CaptureUnlinkLocked, lets the capture stash Path by
	// moving it into the store (stashmove.go).
	move *moveSlot
}

// Begin is called before every mutating operation. It takes the workspace
// lock for reading (until release is called; release is nil on error),
// begins an auto step if one is due, and captures each change not yet
// captured in the current step; the captures are durable (per Options.Sync)
// when it returns. It returns the current step's sequence, which a caller
// keeping a file open for writing remembers: when a later Begin returns a
// different step, the caller captures that file again with CaptureLocked.
// On error nothing was changed and the operation must fail.
func (e *Engine) Begin(ctx context.Context, who Caller, changes ...Change) (release func(), step record.Seq, err error) {
	e.wsMu.RLock()
	var once sync.Once
	release = func() { once.Do(e.wsMu.RUnlock) }
	if err := e.syncFailed(); err != nil {
		release()
		return nil, 0, err
	}
	if err := e.autoStep(ctx); err != nil {
		release()
		return nil, 0, err
	}
	if len(changes) > 0 {
		if err := e.CaptureLocked(ctx, who, changes...); err != nil {
			release()
			return nil, 0, err
		}
	}
	return release, record.Seq(e.stepSeq.Load()), nil
}

// autoStep begins a step labelled "auto" when the workspace was idle for
// Options.AutoStep, and notes the activity. Idle time is measured on the
// engine's clock (Options.Now), the one that stamps events.
func (e *Engine) autoStep(ctx context.Context) error {
	if e.opts.AutoStep <= 0 {
		return nil
	}
	now := time.Now()
	if e.opts.Now != nil {
		now = e.opts.Now()
	}
	e.capMu.Lock()
	idle := e.lastActivity.IsZero() || now.Sub(e.lastActivity) > e.opts.AutoStep
	if !idle {
		e.lastActivity = now
		e.capMu.Unlock()
		return nil
	}
	// Durable before the step begins (preSync), without capMu: changes
	// under way by other processes do not wait for it. Whoever comes first
	// after it begins the step; the others find the workspace active.
	last := e.lastActivity
	e.capMu.Unlock()
	if err := e.preSync(); err != nil {
		return err
	}
	e.capMu.Lock()
	if e.lastActivity != last {
		e.lastActivity = now
		e.capMu.Unlock()
		return nil // another change began the auto step meanwhile
	}
	e.lastActivity = now
	_, err := e.beginStepLocked(ctx, "auto", map[string]any{"name": "auto"})
	if err == nil {
		e.sessions = nil // after an idle gap, no session's step is open
		e.step.ByHand = true
	}
	e.capMu.Unlock()
	if err != nil {
		return err
	}
	return e.captureOpenWriters(ctx)
}

// CaptureLocked captures changes in the current step; the caller holds the
// workspace lock through Begin.
func (e *Engine) CaptureLocked(ctx context.Context, who Caller, changes ...Change) error {
	e.mvMu.RLock()
	defer e.mvMu.RUnlock()
	paths, err := e.expand(changes)
	if err != nil {
		return err
	}
	paths = e.movedNames(paths)
	var removed map[string]removal
	var dirs map[string]int
	for _, c := range changes {
		if c.InDir {
			if dirs == nil {
				dirs = map[string]int{}
			}
			dirs[c.Path] = c.Dirfd
		}
		if c.Removed {
			if removed == nil {
				removed = map[string]removal{}
			}
			removed[c.Path] = removal{stash: c.Stash, move: c.move, noXattrs: c.NoXattrs}
		}
	}
	step, person := e.stepFor(who)
	key := step.Seq
	if person {
		key |= personKey
	}
	for attempt := 0; ; attempt++ {
		mine, theirs, newest := e.claim(paths, key)
		err := e.captureClaimed(ctx, who, mine, removed, dirs, step, newest, person, key)
		for _, c := range theirs {
			<-c.done
			if c.err != nil && err == nil {
				err = c.err
			}
		}
		if err != nil || len(theirs) == 0 || attempt > 0 {
			return err
		}
		// Paths someone else was capturing are captured now, unless a step
		// began meanwhile; one more claim settles it.
	}
}

// expand turns changes into the list of paths to capture: each path, and
// for Tree changes of a directory, every path under it; paths the ignore
// rules match are left out (ignore.go).
func (e *Engine) expand(changes []Change) ([]string, error) {
	for _, c := range changes {
		e.noteIgnoreChange(c.Path)
	}
	// Under ignore rules m, a change to an ignored path is dropped and the
	// walks never read an ignored directory (ignore.go).
	m := e.ignoreRules()
	walk := func(p, to string, fn func(string)) error {
		switch {
		case m != nil:
			return e.walkKept(m, p, to, fn)
		case to == "":
			return e.walk(p, fn)
		}
		return e.walk(p, func(q string) { fn(index.JoinPath(to, strings.TrimPrefix(q, p+"/"))) })
	}
	var out []string
	seen := map[string]bool{}
	add := func(p string) {
		if !seen[p] {
			seen[p] = true
			out = append(out, p)
		}
	}
	for _, c := range changes {
		if err := record.CleanPath(c.Path); err != nil {
			return nil, fmt.Errorf("%w: %q", err, c.Path)
		}
		if m != nil && !e.keptChange(m, c) {
			continue
		}
		add(c.Path)
		if c.Tree {
			if err := walk(c.Path, "", add); err != nil {
				return nil, err
			}
		}
		if c.From != "" {
			if err := record.CleanPath(c.From); err != nil {
				return nil, fmt.Errorf("%w: %q", err, c.From)
			}
			if err := walk(c.From, c.Path, add); err != nil {
				return nil, err
			}
		}
	}
	return out, nil
}

// walk calls fn for every path under directory p (not p itself), parents
// before children. A p that is not a directory has nothing under it.
func (e *Engine) walk(p string, fn func(string)) error {
	names, err := e.ws.readDirNames(p)
	if isMissing(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("rewind: read directory %q: %w", p, err)
	}
	sort.Strings(names)
	for _, n := range names {
		if p == "" && record.IsReserved(n) {
			continue
		}
		c := index.JoinPath(p, n)
		fn(c)
		if err := e.walk(c, fn); err != nil {
			return err
		}
	}
	return nil
}

// personKey marks, in a capture's key (captured), the person's captures
// while the step of that sequence is the newest: a person's change to a
// path an agent captured in the step is captured again, and the other way
// round.
const personKey = record.Seq(1) << 63

// claim splits paths into those this call must capture (now marked in
// flight) and captures under way by others to wait for; paths already
// captured under key (a step's sequence, or with personKey a person's
// captures during it) are dropped. newest is the newest step's sequence.
func (e *Engine) claim(paths []string, step record.Seq) (mine []string, theirs []*capture, newest record.Seq) {
	e.capMu.Lock()
	defer e.capMu.Unlock()
	for _, p := range paths {
		if s, ok := e.captured[p]; ok && s == step {
			continue
		}
		if c := e.inflight[p]; c != nil {
			theirs = append(theirs, c)
			continue
		}
		mine = append(mine, p)
	}
	if len(mine) > 0 {
		c := &capture{done: make(chan struct{})}
		for _, p := range mine {
			e.inflight[p] = c
		}
	}
	return mine, theirs, e.step.Seq
}

// captureClaimed stores the before-states of paths in step (blobs first,
// captureClaimed stores the before-states of paths in step (blobs first,
// then one checkpoint event), or as a person's change (person), then
// releases the claim, noting the paths captured under key; newest is the
// newest step's sequence when the paths were claimed. The files among
// removed are kept rather than copied where they can be; those in dirs are
// read through their parent's descriptor (Change.Dirfd).
func (e *Engine) captureClaimed(ctx context.Context, who Caller, paths []string, removed map[string]removal, dirs map[string]int, step Step, newest record.Seq, person bool, key record.Seq) (err error) {
	if len(paths) == 0 {
		return nil
	}
	e.capMu.Lock()
	c := e.inflight[paths[0]]
	e.capMu.Unlock()
	defer func() {
		e.capMu.Lock()
		for _, p := range paths {
			delete(e.inflight, p)
			if err == nil && e.step.Seq == newest {
				e.captured[p] = key
			}
		}
		e.capMu.Unlock()
		c.err = err
		close(c.done)
	}()
	who = who.resolved()
	files := make([]record.FileState, 0, len(paths))
	stashed := 0
	for _, p := range paths {
		r, gone := removed[p]
		dirfd, in := dirs[p]
		if !in {
			dirfd = -1
		}
		var st record.FileState
		var err error
		moved := false
		if r.move != nil && dirfd >= 0 && !e.opts.Sync {
			st, moved, err = e.stashByMove(p, dirfd, r.move, r.noXattrs)
		}
		if !moved && err == nil {
			st, err = e.readStateAt(p, dirfd, gone, r.stash, true)
		}
		if err != nil {
			e.unstashFailed(files)
			return err
		}
		st.PID, st.Comm = who.PID, who.Comm
		files = append(files, st)
		if st.Kept != "" {
			stashed++
		}
	}
	cp := record.Checkpoint{Tool: step.Label, Files: files}
	switch {
	case person:
		cp = record.Checkpoint{Files: files, Person: true} // no step's (session.go)
	case step.Seq != newest:
		cp.Step = step.Seq // not the newest step's (session.go)
	}
	if _, err = e.appendCheckpoint(ctx, cp); err != nil {
		e.unstashFailed(files)
		return err
	}
	if stashed > 0 {
		e.wakeNamer()
	}
	return nil
}

// removal is how a removed path's file may be captured: stash says by a
// stash (an unlink), else kept; move, when set, lets the stash be made by
// the unlink's own rename (CaptureUnlinkLocked).
type removal struct {
	stash    bool
	move     *moveSlot
	noXattrs bool
}

// appendCheckpoint appends checkpoint cp and adds it to the index. With
// Options.Sync the blobs are already durable (Put synced) and Append waits
// for its fsync; in batch mode the flusher is told.
func (e *Engine) appendCheckpoint(ctx context.Context, cp record.Checkpoint) (record.Event, error) {
	ev, err := e.log.Append(ctx, record.TypeCheckpoint, cp)
	if err != nil {
		return ev, err
	}
	if err := e.state.AddCheckpoint(ev.Seq, cp.Step, cp.Person, cp.Files); err != nil {
		return ev, e.fail(err)
	}
	if !e.opts.Sync {
		e.markDirty()
	}
	return ev, nil
}

// readState reads path p's current state from the workspace, storing a
// regular file's content as a blob: kept (its inode linked into the store)
// when removed says its name is about to go and the store can keep it,
// else copied. With sparse, a file about to be written that is large and
// mostly holes is stashed by a copy of its data (blobstore.Store.StashCopy),
// named later like an unlinked file's stash; only a capture that wakes the
// namer (captureClaimed) asks for it.
func (e *Engine) readState(p string, removed, stash, sparse bool) (record.FileState, error) {
	return e.readStateAt(p, -1, removed, stash, sparse)
}

// readStateAt is readState reading p through dirfd, a descriptor of its
// parent directory (Change.Dirfd), unless dirfd is -1.
func (e *Engine) readStateAt(p string, dirfd int, removed, stash, sparse bool) (record.FileState, error) {
	var st unix.Stat_t
	var err error
	_, name := index.SplitPath(p)
	if dirfd >= 0 && removed && stash && !e.opts.Sync {
		if fs, ok, err := e.stashAt(p, dirfd, name); ok || err != nil {
			return fs, err
		}
	}
	if dirfd >= 0 {
		err = unix.Fstatat(dirfd, name, &st, unix.AT_SYMLINK_NOFOLLOW)
	} else {
		st, err = e.ws.lstat(p)
	}
	if isMissing(err) {
		return record.FileState{Path: p, Absent: true}, nil
	}
	if err != nil {
		return record.FileState{}, fmt.Errorf("rewind: capture %q: %w", p, err)
	}
	fs := record.FileState{Path: p, Mode: st.Mode & 0o7777}
	setMeta(&fs, &st)
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFDIR:
		fs.Kind = record.KindDir
		if dirfd >= 0 {
			fs.Xattrs, err = dirXattrs(dirfd, name)
		} else {
			fs.Xattrs, err = e.ws.xattrs(p)
		}
		if err != nil {
			return record.FileState{}, fmt.Errorf("rewind: capture %q: %w", p, err)
		}
	case unix.S_IFLNK:
		target, err := e.ws.readlink(p)
		if err != nil {
			return record.FileState{}, fmt.Errorf("rewind: capture %q: %w", p, err)
		}
		fs.Kind, fs.Target, fs.Bytes = record.KindSymlink, target, int64(len(target))
	case unix.S_IFREG:
		fs.Kind, fs.Bytes = record.KindFile, st.Size
		if e.opts.MaxBlobSize > 0 && st.Size > e.opts.MaxBlobSize {
			fs.Skipped = true
			fs.Reason = fmt.Sprintf("file of %d bytes is larger than the blob size cap of %d bytes", st.Size, e.opts.MaxBlobSize)
			return fs, nil
		}
		// How the content is stored, and when it is durable, is the
		// blob store's choice (blobstore.Store.Capture).
		o := blobstore.CaptureOptions{Removed: removed && st.Nlink == 1, Stash: stash, Sparse: sparse, Writing: e.openForWrite, Name: p}
		var c blobstore.Captured
		if dirfd >= 0 {
			fd, err := unix.Openat(dirfd, name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
			if err != nil {
				return record.FileState{}, fmt.Errorf("rewind: capture %q: %w", p, err)
			}
			if fs.Xattrs, err = fdXattrs(fd); err != nil {
				unix.Close(fd)
				return record.FileState{}, fmt.Errorf("rewind: capture %q: %w", p, err)
			}
			c, err = e.blobs.Capture(fd, nil, o) // closes fd
			if err != nil {
				return record.FileState{}, fmt.Errorf("rewind: capture %q: %w", p, err)
			}
		} else {
			f, err := e.ws.openFile(p)
			if err != nil {
				return record.FileState{}, fmt.Errorf("rewind: capture %q: %w", p, err)
			}
			fd := int(f.Fd())
			if fs.Xattrs, err = fdXattrs(fd); err != nil {
				f.Close()
				return record.FileState{}, fmt.Errorf("rewind: capture %q: %w", p, err)
			}
			c, err = e.blobs.Capture(fd, f, o)
			f.Close()
			if err != nil {
				return record.FileState{}, fmt.Errorf("rewind: capture %q: %w", p, err)
			}
		}
		fs.Bytes = c.Bytes
		if c.Stash != "" {
			fs.Kept = c.Stash
		} else {
			fs.Blob = c.ID.String()
		}
	default:
		fs.Skipped = true
		fs.Reason = "unsupported file type " + fileType(st.Mode)
	}
	return fs, nil
}

// openForWrite asks Options.OpenForWrite whether a handle holds the file
// (dev, ino) open for writing.
func (e *Engine) openForWrite(dev, ino uint64) bool {
	return e.opts.OpenForWrite != nil && e.opts.OpenForWrite(dev, ino)
}

// Capture modes (CaptureMode).
const (
	// CaptureLink: removed files are kept (hard-linked into the store).
	CaptureLink = "link removed files"
	// CaptureClone: files over 1 MiB about to be written are cloned
	// (FICLONE) into the store rather than copied.
	CaptureClone = "clone large files about to be written"
	// CopyOtherFS: the store is on another filesystem than the workspace,
	// so every before-state is copied.
	CopyOtherFS = "store on another filesystem"
)

// CaptureMode says how a removed file's before-state is captured:
// CaptureLink, or "copy: " and why not; CaptureClone is added where large
// files about to be written are cloned (reflinks).
func (e *Engine) CaptureMode() string {
	mode := CaptureLink
	if ok, why := e.blobs.KeepMode(); !ok {
		mode = "copy: " + why
	}
	if ok, _ := e.blobs.CloneMode(); ok {
		mode += "; " + CaptureClone
	}
	return mode
}

// Detach is called before a workspace file open at fd is written through
// the mount (after its handle is registered with OpenForWrite): if its
// inode is a kept blob, the blob is copied into the store first
// (blobstore.Store.Detach).
// A kept blob found damaged (changed behind the mount's back) is logged
// and the write goes ahead: refusing it would save nothing.
func (e *Engine) Detach(fd int) error {
	stash, err := e.blobs.Detach(fd)
	if err == nil && stash != "" {
		// An unlink failed after its stash: the stash's content is now
		// in a pack, and the log names it before anything is written.
		return e.NameStashes(context.Background())
	}
	if errors.Is(err, blobstore.ErrCorrupt) {
		e.opts.Logger.Warn("rewind: a kept before-state was changed outside the mount", "err", err)
		return nil
	}
	return err
}

// Kept says how many links of the file open at fd are the store's (a
// removed file kept or stashed: blobstore.Store.Kept); its link count
// includes them.
func (e *Engine) Kept(fd int) int { return e.blobs.Kept(fd) }

// sameFilesystem reports whether the workspace root and the store's
// directory dir are on one filesystem (so a workspace file can be
// hard-linked into the store).
func sameFilesystem(root *os.File, dir string) bool {
	var a, b unix.Stat_t
	if unix.Fstat(int(root.Fd()), &a) != nil || unix.Stat(dir, &b) != nil {
		return false
	}
	return a.Dev == b.Dev
}

// fileType names a special file's type for a skipped reason.
func fileType(mode uint32) string {
	switch mode & unix.S_IFMT {
	case unix.S_IFIFO:
		return "fifo"
	case unix.S_IFSOCK:
		return "socket"
	case unix.S_IFCHR:
		return "character device"
	case unix.S_IFBLK:
		return "block device"
	}
	return "unknown"
}
