package index

import (
	"path"
	"sort"
	"sync"
	"unsafe"

	"github.com/zerofs/zerofs/record"
)

// Record is one checkpoint's before-state of one path.
type Record struct {
	Seq   record.Seq
	State record.FileState
}

// Index answers "what was at P at T" from the checkpoints. Per path it keeps
// the sequences of the checkpoints that name it, in increasing order (events
// arrive in order, so appending keeps them sorted), beside where each
// record's state is kept; per directory, the names ever recorded under it.
// Lookups are a map access and a binary search over a packed slice of
// sequences.
//
// It is compact, so that a history of millions of events fits in tens of
// megabytes: each path's name is held once (the records do not repeat it),
// and a record's state is packed into an append-only arena (stateCodec)
// instead of living as a FileState with its strings. A lookup decodes the
// one record it returns.
type Index struct {
	mu sync.RWMutex // guards ids, paths, children, slab, arena
	// ids maps a workspace path to its entry in paths (pathtable.go).
	ids pathTable
	// paths holds every path ever recorded, with its records.
	paths pathList
	// children maps a directory path ("" is the root) to the entries in
	// paths of every path ever recorded directly under it. It is built on
	// first use (childrenRLock), not when the index is loaded: a mount
	// needs it only to list a directory of the past, and at a million
	// paths building it is a large part of the load. nil until then.
	children map[string][]uint32
	// slab is the unused rest of the block that paths with few records
	// take their records from (newRecs).
	slab  []rec
	arena arena
	// moves holds the rename sides recorded per path, sorted by sequence
	// (renames.go); nil while there are none.
	moves map[string][]move
	// unnamed holds the records whose stash is not named yet, by stash
	// name (named.go).
	unnamed map[string]unnamedRec
	// rewrites counts the changes that dropped records in place (Prune,
	// Thin): a snapshot encoded without the engine's lock (SnapshotCut)
	// is stale when it changed meanwhile. Every other change appends.
	rewrites uint64
}

// pathRecords are one path's records, sorted by sequence (list). Most
// paths have one record: it is kept in the entry itself, so such a path
// costs no slice (a header and an allocation) besides its entry.
type pathRecords struct {
	path string
	// one is the only record when more is nil; its off is noRec when
	// there is none.
	one rec
	// more holds every record (one unused) when there are two or more.
	more *[]rec
}

// noRec is one.off of a path without records: no arena holds 2^32 chunks.
const noRec = ^uint64(0)

// rec is one record: the sequence of the checkpoint naming the path, and
// where that checkpoint's state of it is in the arena.
type rec struct {
	seq record.Seq
	off uint64
}

// list is pr's records. Setting an element's off changes pr's record;
// appending to it does not add one (appendRec and setRecs do). It is not
// to be kept past a change of pr's records.
func (pr *pathRecords) list() []rec {
	switch {
	case pr.more != nil:
		return *pr.more
	case pr.one.off == noRec:
		return nil
	}
	return unsafe.Slice(&pr.one, 1) // no copy: a change of off is pr's
}

// setRecs makes recs pr's records (pr keeps the slice).
func (pr *pathRecords) setRecs(recs []rec) {
	switch len(recs) {
	case 0:
		pr.one, pr.more = rec{off: noRec}, nil
	case 1:
		pr.one, pr.more = recs[0], nil
	default:
		pr.one, pr.more = rec{off: noRec}, &recs
	}
}

// search is the index of pr's first record with seq > after (len(list)
// if none).
func (pr *pathRecords) search(after record.Seq) int {
	recs := pr.list()
	return sort.Search(len(recs), func(i int) bool { return recs[i].seq > after })
}

// seqs is a copy of pr's sequences.
func (pr *pathRecords) seqs() []record.Seq {
	recs := pr.list()
	out := make([]record.Seq, len(recs))
	for i, r := range recs {
		out[i] = r.seq
	}
	return out
}

// slabBlock is how many records a slab block holds; a path with more than
// slabBlock/8 records at once gets a slice of its own.
const slabBlock = 4096

// newRecs returns a slice of n records (n > 0) whose capacity is n, so an
// append to it copies and never writes into a neighbour's. Paths with a
// few records take them from shared blocks: an allocation per path saved.
func (ix *Index) newRecs(n int) []rec {
	if n > slabBlock/8 {
		return make([]rec, n)
	}
	if len(ix.slab) < n {
		ix.slab = make([]rec, slabBlock)
	}
	out := ix.slab[:n:n]
	ix.slab = ix.slab[n:]
	return out
}

// appendRec appends r to pr's records.
func (ix *Index) appendRec(pr *pathRecords, r rec) {
	switch {
	case pr.more != nil:
		*pr.more = append(*pr.more, r)
	case pr.one.off == noRec:
		pr.one = r
	default:
		more := []rec{pr.one, r}
		pr.one, pr.more = rec{off: noRec}, &more
	}
}

// NewIndex returns an empty index.
func NewIndex() *Index {
	return &Index{ids: newPathTable(0)}
}

// Add records a checkpoint. seq must be above every seq added before. Every
// record is checked first (the log is untrusted input, and the index is what
// views and rewinds act on): if one is not a record zerofs could have
// written, add records nothing and returns a *DamageError naming seq and the
// path, for the caller to name the file.
func (ix *Index) Add(seq record.Seq, files []record.FileState) error {
	if err := record.CheckFiles(seq, files); err != nil {
		return err
	}
	ix.mu.Lock()
	defer ix.mu.Unlock()
	for _, f := range files {
		id := ix.entryLocked(f.Path)
		pr := ix.paths.at(id)
		ix.appendRec(pr, rec{seq: seq, off: ix.arena.add(f)})
		ix.addMoveLocked(seq, f)
		if f.Kept != "" && f.Blob == "" && !f.Absent && !f.Skipped {
			if ix.unnamed == nil {
				ix.unnamed = map[string]unnamedRec{}
			}
			ix.unnamed[f.Kept] = unnamedRec{id: id, seq: seq}
		}
	}
	return nil
}

// entryLocked returns p's entry in paths, adding p when it is new.
func (ix *Index) entryLocked(p string) uint32 {
	if id, ok := ix.ids.find(&ix.paths, p); ok {
		return id
	}
	id, _ := ix.newEntryLocked(p)
	return id
}

// newEntryLocked adds p (and its name under its directory, once children
// is built) with no records; if p was there already it adds nothing and
// returns false.
func (ix *Index) newEntryLocked(p string) (id uint32, added bool) {
	id = ix.paths.n
	if !ix.ids.add(&ix.paths, p, id) {
		return 0, false
	}
	ix.paths.add(pathRecords{path: p, one: rec{off: noRec}})
	if p != "" && ix.children != nil {
		dir, _ := SplitPath(p)
		ix.children[dir] = append(ix.children[dir], id)
	}
	return id, true
}

// childrenRLock takes the read lock with children built: the first caller
// builds it under the write lock. children is never unset, so it is still
// there when the read lock is taken again.
func (ix *Index) childrenRLock() {
	ix.mu.RLock()
	if ix.children != nil {
		return
	}
	ix.mu.RUnlock()
	ix.mu.Lock()
	if ix.children == nil {
		ch := map[string][]uint32{}
		for i := range ix.paths.n {
			if p := ix.paths.at(i).path; p != "" {
				dir, _ := SplitPath(p)
				ch[dir] = append(ch[dir], i)
			}
		}
		ix.children = ch
	}
	ix.mu.Unlock()
	ix.mu.RLock()
}

// At returns the before-state recorded by the first checkpoint with
// after < seq < limit that names p. It does not look through renames of
// p's ancestors: Resolve does.
func (ix *Index) At(p string, after, limit record.Seq) (Record, bool) {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	return ix.atLocked(p, after, limit)
}

func (ix *Index) atLocked(p string, after, limit record.Seq) (Record, bool) {
	id, ok := ix.ids.find(&ix.paths, p)
	if !ok {
		return Record{}, false
	}
	pr := ix.paths.at(id)
	recs := pr.list()
	i := pr.search(after)
	if i == len(recs) || recs[i].seq >= limit {
		return Record{}, false
	}
	st := ix.arena.get(recs[i].off)
	st.Path = pr.path
	return Record{Seq: recs[i].seq, State: st}, true
}

// ChangedBetween returns every path named by a checkpoint with
// after < seq < limit.
func (ix *Index) ChangedBetween(after, limit record.Seq) []string {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	var out []string
	for i := range ix.paths.n {
		pr := ix.paths.at(i)
		recs := pr.list()
		j := pr.search(after)
		if j < len(recs) && recs[j].seq < limit {
			out = append(out, pr.path)
		}
	}
	return out
}

// Prune drops records with seq <= before: no state at or after before can
// use them. Their bytes stay in the arena until the index is next written
// out and read back (a snapshot holds only live records).
func (ix *Index) Prune(before record.Seq) {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	for i := range ix.paths.n {
		pr := ix.paths.at(i)
		j := pr.search(before)
		if j == 0 {
			continue
		}
		pr.setRecs(append([]rec(nil), pr.list()[j:]...))
	}
	ix.pruneMovesLocked(before)
	ix.rewrites++
}

// SplitPath splits a workspace path into its directory ("" for the root)
// and final name.
func SplitPath(p string) (dir, name string) {
	d, n := path.Split(p)
	if d != "" {
		d = d[:len(d)-1]
	}
	return d, n
}

// JoinPath joins a directory path and a name.
func JoinPath(dir, name string) string {
	if dir == "" {
		return name
	}
	return dir + "/" + name
}

// Last returns the newest record of p.
func (ix *Index) Last(p string) (Record, bool) {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	id, ok := ix.ids.find(&ix.paths, p)
	if !ok {
		return Record{}, false
	}
	pr := ix.paths.at(id)
	recs := pr.list()
	if len(recs) == 0 {
		return Record{}, false
	}
	r := recs[len(recs)-1]
	st := ix.arena.get(r.off)
	st.Path = pr.path
	return Record{Seq: r.seq, State: st}, true
}

// Each calls fn for every path with its live records, in the order the
// paths were first recorded (for tests comparing two indexes); fn must not
// keep the slices.
func (ix *Index) Each(fn func(p string, seqs []record.Seq, states func(i int) record.FileState)) {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	for i := range ix.paths.n {
		pr := ix.paths.at(i)
		fn(pr.path, pr.seqs(), func(j int) record.FileState { return ix.arena.get(pr.list()[j].off) })
	}
}

// Children is a copy of every directory's names ever recorded (for tests
// comparing two indexes).
func (ix *Index) Children() map[string][]string {
	ix.childrenRLock()
	defer ix.mu.RUnlock()
	out := make(map[string][]string, len(ix.children))
	for d, ids := range ix.children {
		for _, id := range ids {
			_, n := SplitPath(ix.paths.at(id).path)
			out[d] = append(out[d], n)
		}
		sort.Strings(out[d])
	}
	return out
}
