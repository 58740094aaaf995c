package index

import (
	"path"
	"sort"
	"sync"
)

// Record is one checkpoint's before-state of one path.
type Record struct {
	Seq   Seq
	State FileState
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
	// ids maps a workspace path to its entry in paths.
	ids map[string]uint32
	// paths holds every path ever recorded, with its records.
	paths []pathRecords
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
}

// pathRecords are one path's records, sorted by sequence.
type pathRecords struct {
	path string
	recs []rec
}

// rec is one record: the sequence of the checkpoint naming the path, and
// where that checkpoint's state of it is in the arena.
type rec struct {
	seq Seq
	off uint64
}

// search is the index of pr's first record with seq > after (len(pr.recs)
// if none).
func (pr *pathRecords) search(after Seq) int {
	return sort.Search(len(pr.recs), func(i int) bool { return pr.recs[i].seq > after })
}

// seqs is a copy of pr's sequences.
func (pr *pathRecords) seqs() []Seq {
	out := make([]Seq, len(pr.recs))
	for i, r := range pr.recs {
		out[i] = r.seq
	}
	return out
}

// slabBlock is how many records a slab block holds; a path with more than
// slabBlock/8 records at once gets a slice of its own.
const slabBlock = 4096

// newRecs returns a slice of n records (n > 0) whose capacity is n, so an
// append to it copies and never writes into a neighbour's. Most paths have
// one record or a few: taking them from shared blocks saves an allocation
// per path (a million paths are a million small objects for the GC).
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
	if cap(pr.recs) == 0 {
		pr.recs = ix.newRecs(1)
		pr.recs[0] = r
		return
	}
	pr.recs = append(pr.recs, r)
}

// NewIndex returns an empty index.
func NewIndex() *Index {
	return &Index{ids: map[string]uint32{}}
}

// Add records a checkpoint. seq must be above every seq added before. Every
// record is checked first (the log is untrusted input, and the index is what
// views and rewinds act on): if one is not a record zerofs could have
// written, add records nothing and returns a *DamageError naming seq and the
// path, for the caller to name the file.
func (ix *Index) Add(seq Seq, files []FileState) error {
	if err := checkFiles(seq, files); err != nil {
		return err
	}
	ix.mu.Lock()
	defer ix.mu.Unlock()
	for _, f := range files {
		pr := ix.entryLocked(f.Path)
		ix.appendRec(pr, rec{seq: seq, off: ix.arena.add(f)})
		ix.addMoveLocked(seq, f)
		if f.Kept != "" && f.Blob == "" && !f.Absent && !f.Skipped {
			if ix.unnamed == nil {
				ix.unnamed = map[string]unnamedRec{}
			}
			ix.unnamed[f.Kept] = unnamedRec{id: ix.ids[f.Path], seq: seq}
		}
	}
	return nil
}

// entryLocked returns p's records, adding p when it is new.
func (ix *Index) entryLocked(p string) *pathRecords {
	if id, ok := ix.ids[p]; ok {
		return &ix.paths[id]
	}
	pr, _ := ix.newEntryLocked(p)
	return pr
}

// newEntryLocked adds p (and its name under its directory, once children
// is built) with no records, in one map access; if p was there already it
// returns false, with ids no longer to be trusted (a snapshot that names a
// path twice is dropped whole).
func (ix *Index) newEntryLocked(p string) (*pathRecords, bool) {
	n, id := len(ix.ids), uint32(len(ix.paths))
	ix.ids[p] = id
	if len(ix.ids) == n {
		return nil, false
	}
	ix.paths = append(ix.paths, pathRecords{path: p})
	if p != "" && ix.children != nil {
		dir, _ := SplitPath(p)
		ix.children[dir] = append(ix.children[dir], id)
	}
	return &ix.paths[id], true
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
		for i := range ix.paths {
			if p := ix.paths[i].path; p != "" {
				dir, _ := SplitPath(p)
				ch[dir] = append(ch[dir], uint32(i))
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
func (ix *Index) At(p string, after, limit Seq) (Record, bool) {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	return ix.atLocked(p, after, limit)
}

func (ix *Index) atLocked(p string, after, limit Seq) (Record, bool) {
	id, ok := ix.ids[p]
	if !ok {
		return Record{}, false
	}
	pr := &ix.paths[id]
	i := pr.search(after)
	if i == len(pr.recs) || pr.recs[i].seq >= limit {
		return Record{}, false
	}
	st := ix.arena.get(pr.recs[i].off)
	st.Path = pr.path
	return Record{Seq: pr.recs[i].seq, State: st}, true
}

// Names returns the names ever recorded directly under dir.
func (ix *Index) Names(dir string) []string {
	ix.childrenRLock()
	defer ix.mu.RUnlock()
	out := make([]string, 0, len(ix.children[dir]))
	for _, id := range ix.children[dir] {
		_, n := SplitPath(ix.paths[id].path)
		out = append(out, n)
	}
	return out
}

// ChangedBetween returns every path named by a checkpoint with
// after < seq < limit.
func (ix *Index) ChangedBetween(after, limit Seq) []string {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	var out []string
	for i := range ix.paths {
		pr := &ix.paths[i]
		j := pr.search(after)
		if j < len(pr.recs) && pr.recs[j].seq < limit {
			out = append(out, pr.path)
		}
	}
	return out
}

// Prune drops records with seq <= before: no state at or after before can
// use them. Their bytes stay in the arena until the index is next written
// out and read back (a snapshot holds only live records).
func (ix *Index) Prune(before Seq) {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	for i := range ix.paths {
		pr := &ix.paths[i]
		j := pr.search(before)
		if j == 0 {
			continue
		}
		pr.recs = append([]rec(nil), pr.recs[j:]...)
	}
	ix.pruneMovesLocked(before)
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
	id, ok := ix.ids[p]
	if !ok || len(ix.paths[id].recs) == 0 {
		return Record{}, false
	}
	pr := &ix.paths[id]
	r := pr.recs[len(pr.recs)-1]
	st := ix.arena.get(r.off)
	st.Path = pr.path
	return Record{Seq: r.seq, State: st}, true
}

// Each calls fn for every path with its live records, in the order the
// paths were first recorded (for tests comparing two indexes); fn must not
// keep the slices.
func (ix *Index) Each(fn func(p string, seqs []Seq, states func(i int) FileState)) {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	for i := range ix.paths {
		pr := &ix.paths[i]
		fn(pr.path, pr.seqs(), func(j int) FileState { return ix.arena.get(pr.recs[j].off) })
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
			_, n := SplitPath(ix.paths[id].path)
			out[d] = append(out[d], n)
		}
		sort.Strings(out[d])
	}
	return out
}
