package index

import (
	"encoding/binary"
	"sort"
	"strings"

	"github.com/zerofs/zerofs/record"
)

// A directory's rename is recorded once, not as a capture of everything
// beneath it (SPEC, Past states). Its checkpoint holds two records: the
// source's own before-state with RenamedTo (what was beneath the source
// just before the checkpoint is beneath RenamedTo just after it), and the
// destination's before-state (absent, or the empty directory it replaced)
// with RenamedFrom (nothing beneath the destination just after the
// checkpoint was beneath it before).
//
// So the state of P at T is decided by the earliest checkpoint after T
// that names P itself or names one of P's ancestors with a rename side:
// P's own record gives its state; an ancestor A's RenamedTo at S sends
// the question on to the same place beneath RenamedTo at S (State(S,
// RenamedTo + P[len(A):])); an ancestor's RenamedFrom says P did not
// exist. Each redirect moves to a later sequence, so resolution ends.
//
// The index keeps the rename sides per path (moves) beside the records
// themselves, so a lookup checks P's ancestors in O(depth) map accesses,
// and none at all while no rename was ever recorded.

// move is one rename side recorded for a path: at seq, the path was renamed
// to `to` (from is false), or replaced by a directory renamed from `to`
// (from is true).
type move struct {
	seq  record.Seq
	to   string
	from bool
}

// Rename is one directory rename recorded between two sequences: at Seq,
// From was renamed to To.
type Rename struct {
	Seq      record.Seq
	From, To string
}

// addMoveLocked notes f's rename side at seq, if it has one.
func (ix *Index) addMoveLocked(seq record.Seq, f record.FileState) {
	var m move
	switch {
	case f.RenamedTo != "":
		m = move{seq: seq, to: f.RenamedTo}
	case f.RenamedFrom != "":
		m = move{seq: seq, to: f.RenamedFrom, from: true}
	default:
		return
	}
	if ix.moves == nil {
		ix.moves = map[string][]move{}
	}
	ix.moves[f.Path] = append(ix.moves[f.Path], m)
}

// loadMoves rebuilds the rename sides from the records (after a snapshot
// is read): only a record's flags are read unless it has a side.
func (ix *Index) loadMoves() {
	ix.moves = nil
	for i := range ix.paths.n {
		pr := ix.paths.at(i)
		for _, r := range pr.list() {
			if flags, _ := binary.Uvarint(ix.arena.packed(r.off)); flags&stateRenamed == 0 {
				continue
			}
			f := ix.arena.get(r.off)
			f.Path = pr.path
			ix.addMoveLocked(r.seq, f)
		}
	}
}

// pruneMovesLocked drops the rename sides with seq <= before.
func (ix *Index) pruneMovesLocked(before record.Seq) {
	for p, ms := range ix.moves {
		j := sort.Search(len(ms), func(j int) bool { return ms[j].seq > before })
		if j == len(ms) {
			delete(ix.moves, p)
		} else if j > 0 {
			ix.moves[p] = append([]move(nil), ms[j:]...)
		}
	}
}

// firstMove is p's first rename side with after < seq < limit.
func (ix *Index) firstMove(p string, after, limit record.Seq) (move, bool) {
	ms := ix.moves[p]
	j := sort.Search(len(ms), func(j int) bool { return ms[j].seq > after })
	if j == len(ms) || ms[j].seq >= limit {
		return move{}, false
	}
	return ms[j], true
}

// ancestorMove is the earliest rename side with after < seq < limit of one
// of p's ancestors, self included when self is true; anc is that ancestor.
func (ix *Index) ancestorMove(p string, self bool, after, limit record.Seq) (m move, anc string, ok bool) {
	if len(ix.moves) == 0 {
		return move{}, "", false
	}
	a := p
	if !self {
		if p == "" {
			return move{}, "", false
		}
		a, _ = SplitPath(p)
	}
	for {
		if mv, found := ix.firstMove(a, after, limit); found && (!ok || mv.seq < m.seq) {
			m, anc, ok = mv, a, true
		}
		if a == "" {
			return m, anc, ok
		}
		a, _ = SplitPath(a)
	}
}

// Resolve is what decides p's state at after, from the records with after <
// seq < limit: the record (p's own, or for an ancestor's RenamedFrom an
// absent record of p at that sequence), or when none does, the path whose
// live state p's is (p itself, or where renames after `after` took it).
func (ix *Index) Resolve(p string, after, limit record.Seq) (rec Record, ok bool, live string) {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	for {
		rec, ok = ix.atLocked(p, after, limit)
		m, anc, moved := ix.ancestorMove(p, false, after, limit)
		if moved && (!ok || m.seq < rec.Seq) {
			if m.from {
				return Record{Seq: m.seq, State: record.FileState{Path: p, Absent: true}}, true, ""
			}
			p, after = m.to+p[len(anc):], m.seq
			continue
		}
		if ok {
			return rec, true, ""
		}
		return Record{}, false, p
	}
}

// NamesAt returns the names that may have been directly under dir at
// after, judging by the records below limit: every name recorded under dir
// or under the directories renames after `after` took dir's content to,
// and the directories whose live listing may add names (dir, and where
// those renames took it). Each name still needs resolving.
func (ix *Index) NamesAt(dir string, after, limit record.Seq) (names map[string]bool, liveDirs []string) {
	ix.childrenRLock()
	defer ix.mu.RUnlock()
	names = map[string]bool{}
	liveDirs = []string{dir}
	cur := dir
	for {
		for _, id := range ix.children[cur] {
			_, n := SplitPath(ix.paths.at(id).path)
			names[n] = true
		}
		m, anc, moved := ix.ancestorMove(cur, true, after, limit)
		if !moved || m.from {
			break
		}
		cur, after = m.to+cur[len(anc):], m.seq
	}
	if cur != dir {
		liveDirs = append(liveDirs, cur)
	}
	return names, liveDirs
}

// RenamesBetween lists the directory renames recorded with after < seq <
// limit, in sequence order.
func (ix *Index) RenamesBetween(after, limit record.Seq) []Rename {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	out := ix.renamesBetweenLocked(after, limit)
	sort.Slice(out, func(i, j int) bool {
		if out[i].Seq != out[j].Seq {
			return out[i].Seq < out[j].Seq
		}
		return out[i].From < out[j].From
	})
	return out
}

// HasMoves reports whether any rename side is recorded.
func (ix *Index) HasMoves() bool {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	return len(ix.moves) > 0
}

// thinKeepLocked is, for path pr in a thin of (after, before], the indexes
// in [lo, hi) of the records to keep besides the first: every rename side
// (a state before it may resolve through it), and beneath the destination
// of each rename in the interval, the first record after that rename (the
// state at `after` may be redirected to the state just after it).
func (ix *Index) thinKeepLocked(pr *pathRecords, lo, hi int, renames []Rename) map[int]bool {
	var keep map[int]bool
	mark := func(j int) {
		if keep == nil {
			keep = map[int]bool{}
		}
		keep[j] = true
	}
	for _, m := range ix.moves[pr.path] {
		for j := lo; j < hi; j++ {
			if pr.list()[j].seq == m.seq {
				mark(j)
			}
		}
	}
	for _, r := range renames {
		if !strings.HasPrefix(pr.path, r.To+"/") {
			continue
		}
		j := pr.search(r.Seq)
		if j >= lo && j < hi {
			mark(j)
		}
	}
	return keep
}

// renamesBetweenLocked is RenamesBetween with the lock held.
func (ix *Index) renamesBetweenLocked(after, limit record.Seq) []Rename {
	var out []Rename
	for p, ms := range ix.moves {
		for _, m := range ms {
			if !m.from && m.seq > after && m.seq < limit {
				out = append(out, Rename{Seq: m.seq, From: p, To: m.to})
			}
		}
	}
	return out
}
