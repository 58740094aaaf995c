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
	mu sync.RWMutex // guards ids, paths, children, arena
	// ids maps a workspace path to its entry in paths.
	ids map[string]uint32
	// paths holds every path ever recorded, with its records.
	paths []pathRecords
	// children maps a directory path ("" is the root) to every name ever
	// recorded directly under it.
	children map[string]map[string]struct{}
	arena    arena
	// moves holds the rename sides recorded per path, sorted by sequence
	// (renames.go); nil while there are none.
	moves map[string][]move
	// unnamed holds the records whose stash is not named yet, by stash
	// name (named.go).
	unnamed map[string]unnamedRec
}

// pathRecords are one path's records: seqs[i] is the sequence of the i-th
// checkpoint naming it and offs[i] where that checkpoint's state of it is in
// the arena. Both are sorted by sequence.
type pathRecords struct {
	path string
	seqs []Seq
	offs []uint64
}

// NewIndex returns an empty index.
func NewIndex() *Index {
	return &Index{ids: map[string]uint32{}, children: map[string]map[string]struct{}{}}
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
		pr.seqs = append(pr.seqs, seq)
		pr.offs = append(pr.offs, ix.arena.add(f))
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

// entryLocked returns p's records, adding p (and its name under its
// directory) when it is new.
func (ix *Index) entryLocked(p string) *pathRecords {
	if id, ok := ix.ids[p]; ok {
		return &ix.paths[id]
	}
	ix.ids[p] = uint32(len(ix.paths))
	ix.paths = append(ix.paths, pathRecords{path: p})
	if p != "" {
		dir, name := SplitPath(p)
		names := ix.children[dir]
		if names == nil {
			names = map[string]struct{}{}
			ix.children[dir] = names
		}
		names[name] = struct{}{}
	}
	return &ix.paths[len(ix.paths)-1]
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
	i := sort.Search(len(pr.seqs), func(i int) bool { return pr.seqs[i] > after })
	if i == len(pr.seqs) || pr.seqs[i] >= limit {
		return Record{}, false
	}
	st := ix.arena.get(pr.offs[i])
	st.Path = pr.path
	return Record{Seq: pr.seqs[i], State: st}, true
}

// Names returns the names ever recorded directly under dir.
func (ix *Index) Names(dir string) []string {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	out := make([]string, 0, len(ix.children[dir]))
	for n := range ix.children[dir] {
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
		seqs := ix.paths[i].seqs
		j := sort.Search(len(seqs), func(j int) bool { return seqs[j] > after })
		if j < len(seqs) && seqs[j] < limit {
			out = append(out, ix.paths[i].path)
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
		j := sort.Search(len(pr.seqs), func(j int) bool { return pr.seqs[j] > before })
		if j == 0 {
			continue
		}
		pr.seqs = append([]Seq(nil), pr.seqs[j:]...)
		pr.offs = append([]uint64(nil), pr.offs[j:]...)
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
	if !ok || len(ix.paths[id].seqs) == 0 {
		return Record{}, false
	}
	pr := &ix.paths[id]
	n := len(pr.seqs) - 1
	st := ix.arena.get(pr.offs[n])
	st.Path = pr.path
	return Record{Seq: pr.seqs[n], State: st}, true
}

// Each calls fn for every path with its live records, in the order the
// paths were first recorded (for tests comparing two indexes); fn must not
// keep the slices.
func (ix *Index) Each(fn func(p string, seqs []Seq, states func(i int) FileState)) {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	for i := range ix.paths {
		pr := &ix.paths[i]
		fn(pr.path, pr.seqs, func(j int) FileState { return ix.arena.get(pr.offs[j]) })
	}
}

// Children is a copy of every directory's names ever recorded (for tests
// comparing two indexes).
func (ix *Index) Children() map[string][]string {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	out := make(map[string][]string, len(ix.children))
	for d, names := range ix.children {
		for n := range names {
			out[d] = append(out[d], n)
		}
		sort.Strings(out[d])
	}
	return out
}
