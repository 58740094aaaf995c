package rewind

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/zerofs/zerofs/record"

	"github.com/zerofs/zerofs/rewind/internal/index"
)

// A directory's rename is recorded as one rename record (Options.
// RenameRecords; SPEC, Past states): one checkpoint holding the source's own
// before-state with RenamedTo and the destination's (absent, or the empty
// directory it replaces) with RenamedFrom, instead of a capture of both
// subtrees. Nothing beneath the directory is read, hashed or copied; views,
// rewinds and diffs resolve paths through the record (index.Resolve).
//
// A record must never claim a rename that did not happen: the destination
// is checked to be absent or an empty directory first (the kernel holds the
// destination's inode lock through RENAME, so nothing enters it through the
// mount meanwhile), and a rename that fails after its record is taken back
// by a second record renaming the other way.
//
// Captures of other paths are excluded while the record is appended and the
// rename made (mvMu), so a capture beneath the directory either ends before
// the rename, under the old name, or starts after it; one that still names
// the old path (resolved by the FUSE layer before the rename) captures the
// new one too (movedNames).

// RenameDir renames directory from to to by calling rename (the caller's
// rename of the backing paths) after recording it as one rename record,
// durable per Options.Sync before rename is called. handled is false, and
// nothing was done, when the rename is not one the engine records this way
// (RenameRecords off, from not a directory, to neither absent nor an empty
// directory): the caller then captures with Changes and renames itself. The
// caller holds the workspace lock through Begin. err is the engine's error,
// or rename's.
func (e *Engine) RenameDir(ctx context.Context, who Caller, from, to string, rename func() error) (handled bool, err error) {
	if !e.opts.RenameRecords || from == "" || to == "" || from == to ||
		strings.HasPrefix(to, from+"/") || strings.HasPrefix(from, to+"/") {
		return false, nil
	}
	if record.CleanPath(from) != nil || record.CleanPath(to) != nil {
		return false, nil
	}
	e.mvMu.Lock()
	defer e.mvMu.Unlock()
	st, err := e.ws.lstat(from)
	if err != nil || !isDirMode(st.Mode) {
		return false, nil
	}
	if m := e.ignoreRules(); e.ignored(m, from, record.KindDir, -1, false) || e.ignored(m, to, record.KindDir, -1, false) {
		return false, nil // across the ignore rules' edge: captured path by path (ignore.go)
	}
	if dst, err := e.ws.lstat(to); err == nil {
		if !isDirMode(dst.Mode) {
			return false, nil
		}
		names, err := e.ws.readDirNames(to)
		if err != nil || len(names) > 0 {
			return false, nil
		}
	} else if !isMissing(err) {
		return false, nil
	}
	if err := e.appendRename(ctx, who, from, to); err != nil {
		return true, err
	}
	crashPoint("rename:recorded")
	if rerr := rename(); rerr != nil {
		// Nothing moved: a second record takes the first back, so that
		// every state before it resolves to the names as they are.
		if err := e.appendRename(ctx, who, to, from); err != nil {
			return true, e.fail(fmt.Errorf("rewind: a failed rename's record could not be taken back: %w", err))
		}
		return true, rerr
	}
	return true, nil
}

// appendRename appends the rename record of from to to in the current step
// and forgets what the step captured at and beneath both names (they name
// other files from now on).
func (e *Engine) appendRename(ctx context.Context, who Caller, from, to string) error {
	who = who.resolved()
	src, err := e.readState(from, false, false, false)
	if err != nil {
		return err
	}
	dst, err := e.readState(to, false, false, false)
	if err != nil {
		return err
	}
	src.RenamedTo, dst.RenamedFrom = to, from
	src.PID, src.Comm, dst.PID, dst.Comm = who.PID, who.Comm, who.PID, who.Comm
	step, person := e.stepFor(who)
	e.capMu.Lock()
	newest := e.step.Seq
	e.capMu.Unlock()
	cp := record.Checkpoint{Tool: step.Label, Files: []record.FileState{src, dst}}
	switch {
	case person:
		cp = record.Checkpoint{Files: cp.Files, Person: true}
	case step.Seq != newest:
		cp.Step = step.Seq
	}
	ev, err := e.appendCheckpoint(ctx, cp)
	if err != nil {
		return err
	}
	e.capMu.Lock()
	for p := range e.captured {
		if p == from || p == to || strings.HasPrefix(p, from+"/") || strings.HasPrefix(p, to+"/") {
			delete(e.captured, p)
		}
	}
	e.moves = append(e.moves, index.Rename{Seq: ev.Seq, From: from, To: to})
	e.capMu.Unlock()
	return nil
}

// movedNames adds to paths, for each path at or beneath a directory renamed
// by a rename record in the current step, the name it has now: a request
// resolved to its path before the rename captures the file it acts on.
func (e *Engine) movedNames(paths []string) []string {
	e.capMu.Lock()
	moves := e.moves
	e.capMu.Unlock()
	if len(moves) == 0 {
		return paths
	}
	seen := map[string]bool{}
	for _, p := range paths {
		seen[p] = true
	}
	out := paths
	for _, p := range paths {
		for _, m := range moves {
			if p == m.From || strings.HasPrefix(p, m.From+"/") {
				p = m.To + p[len(m.From):]
				if !seen[p] {
					seen[p] = true
					out = append(out, p)
				}
			}
		}
	}
	return out
}

// isDirMode reports whether a stat mode is a directory's.
func isDirMode(mode uint32) bool { return mode&0o170000 == 0o040000 }

// recoverRename takes back a rename record that a crash left without its
// rename: the log's last event is the record (nothing can be appended
// between a record and its rename, which hold mvMu and the workspace lock),
// and its source is still a directory (after the rename nothing could make
// it again through the mount without a capture after the record).
func (e *Engine) recoverRename(ctx context.Context) error {
	head := e.log.Head()
	if head == 0 || head <= e.PrunedBefore() {
		return nil
	}
	var last record.Event
	for ev, err := range e.log.Events(head) {
		if err != nil {
			return err
		}
		last = ev
	}
	if last.Seq != head || last.Type != record.TypeCheckpoint {
		return nil
	}
	var cp record.Checkpoint
	if json.Unmarshal(last.Payload, &cp) != nil || len(cp.Files) != 2 {
		return nil
	}
	src, dst := cp.Files[0], cp.Files[1]
	if src.RenamedTo == "" || src.RenamedTo != dst.Path || dst.RenamedFrom != src.Path {
		return nil
	}
	st, err := e.ws.lstat(src.Path)
	if err != nil || !isDirMode(st.Mode) {
		return nil // renamed
	}
	e.opts.Logger.Warn("rewind: taking back the record of a rename a crash interrupted", "from", src.Path, "to", dst.Path, "seq", head)
	if err := e.appendRename(ctx, Caller{Comm: "zerofs"}, dst.Path, src.Path); err != nil {
		return err
	}
	return e.Sync()
}
