package index

import (
	"sort"

	"github.com/zerofs/zerofs/record"
)

// A removed file's checkpoint record may name its before-state by its stash
// in the store (FileState.Kept) rather than by a blob: the removal linked
// the file there without reading it. A later stash_named event names each
// such stash's blob once it is hashed, and folding it gives the record its
// Blob; until then the record is unnamed (Index.Unnamed), and the engine
// names it before anything reads it. A stash that could not be named (gone
// from the store, or damaged) is named Lost, and its record becomes
// skipped with that reason: a rewind reports it and never invents content.

// Unnamed is a record whose stash is not named yet.
type Unnamed struct {
	Seq  record.Seq
	Path string
	Kept string
}

// unnamedRec is where an unnamed record is: its path's entry and its
// checkpoint.
type unnamedRec struct {
	id  uint32
	seq record.Seq
}

// Name gives each unnamed record that names names the blob (or the loss).
// A name for a record the index does not hold as unnamed (named before,
// pruned or thinned away since) changes nothing.
func (ix *Index) Name(names []record.Named) {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	for _, n := range names {
		u, ok := ix.unnamed[n.Kept]
		if !ok || u.seq != n.Sequence || u.id >= ix.paths.n {
			continue
		}
		pr := ix.paths.at(u.id)
		recs := pr.list()
		i := sort.Search(len(recs), func(i int) bool { return recs[i].seq >= u.seq })
		if i == len(recs) || recs[i].seq != u.seq {
			delete(ix.unnamed, n.Kept)
			continue
		}
		st := ix.arena.get(recs[i].off)
		if st.Kept != n.Kept || st.Blob != "" {
			delete(ix.unnamed, n.Kept)
			continue
		}
		if n.Lost != "" {
			st.Skipped, st.Reason = true, n.Lost
		} else {
			st.Blob, st.Bytes = n.Blob, n.Bytes
		}
		recs[i].off = ix.arena.add(st) // recs is pr's own: this changes pr's record
		delete(ix.unnamed, n.Kept)
	}
}

// Unnamed lists the records whose stashes are not named yet, oldest first.
func (ix *Index) Unnamed() []Unnamed {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	out := make([]Unnamed, 0, len(ix.unnamed))
	for kept, u := range ix.unnamed {
		out = append(out, Unnamed{Seq: u.seq, Path: ix.paths.at(u.id).path, Kept: kept})
	}
	sort.Slice(out, func(i, j int) bool {
		return out[i].Seq < out[j].Seq || (out[i].Seq == out[j].Seq && out[i].Kept < out[j].Kept)
	})
	return out
}

// HasUnnamed reports whether any record's stash is not named yet.
func (ix *Index) HasUnnamed() bool {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	return len(ix.unnamed) > 0
}

// UnnamedCount is how many records' stashes are not named yet.
func (ix *Index) UnnamedCount() int {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	return len(ix.unnamed)
}
