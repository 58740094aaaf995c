package blobstore

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"

	"github.com/zerofs/zerofs/internal/durable"
)

// PruneResult is what Prune removed.
type PruneResult struct {
	// Removed lists the blobs removed (whole and chunked; the chunks only
	// they used go with them), sorted.
	Removed []ID
	// Chunks is how many chunks went with them.
	Chunks int
	// BytesFreed is how much smaller the store is on disk.
	BytesFreed int64
	// Repacked is how many packs were rewritten to drop what they held.
	Repacked int
	// Absorbed is how many kept blobs were copied into packs (chunked and
	// compressed like any other) and their links removed.
	Absorbed int
}

// Progress hears how far a Prune has come, phase by phase: Begin says
// what a phase is and how much it has to do (items and bytes), Add what of
// it got done. rewind.Progress is one (the same methods), so a gc's bar
// shows the store's work.
type Progress interface {
	Begin(what string, items, bytes int64)
	Add(items, bytes int64)
}

// beginCounting begins a phase of pr whose items are nouns ("blobs",
// "records", "packs"), when pr can be told (rewind.Counting); else it
// begins it as a count of files.
func beginCounting(pr Progress, what, noun string, items, bytes int64) {
	if c, ok := pr.(interface {
		BeginCounting(what, noun string, items, bytes int64)
	}); ok {
		c.BeginCounting(what, noun, items, bytes)
		return
	}
	pr.Begin(what, items, bytes)
}

type noProgress struct{}

func (noProgress) Begin(string, int64, int64) {}
func (noProgress) Add(int64, int64)           {}

// Prune removes every blob for which keep is false, with the chunks no kept
// blob uses. A pack left with nothing kept is deleted; one that is holding anything
// else is rewritten: what is kept is copied into a new pack, which is
// made durable and indexed before the old one is deleted (a crash in
// between leaves two copies, never none). No Put may run meanwhile (the
// caller holds the workspace lock).
func (s *Store) Prune(keep func(ID) bool) (PruneResult, error) {
	return s.PruneWith(keep, nil)
}

// PruneWith is Prune telling pr (nil: nobody) how far it has come: the
// loose blobs it removes, the records it copies out of packs it rewrites,
// the packs it deletes (those left with nothing kept, and those it
// rewrote), and the kept blobs it absorbs, each a phase with its count
// and bytes.
func (s *Store) PruneWith(keep func(ID) bool, pr Progress) (PruneResult, error) {
	if pr == nil {
		pr = noProgress{}
	}
	var res PruneResult
	if s.opts.ReadOnly {
		return res, ErrReadOnly
	}
	before, err := s.diskBytes()
	if err != nil {
		return res, err
	}
	if err := s.Sync(); err != nil {
		return res, err
	}
	if err := s.seal(true); err != nil {
		return res, err
	}
	live, index, err := s.liveSet(keep, &res)
	if err != nil {
		return res, err
	}
	// Loose and kept blobs.
	type file struct {
		id   ID
		size int64
		path string
	}
	var loose []file
	var looseBytes int64
	if err := s.walkLoose(func(id ID, n int64, path string) error {
		if !keep(id) {
			loose = append(loose, file{id, n, path})
			looseBytes += n
		}
		return nil
	}); err != nil {
		return res, err
	}
	if len(loose) > 0 {
		beginCounting(pr, "gc: remove blobs", "blobs", int64(len(loose)), looseBytes)
	}
	gone := map[ID]bool{}
	for _, lf := range loose {
		id := lf.id
		fi, _ := os.Lstat(lf.path)
		if err := os.Remove(lf.path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return res, fmt.Errorf("blobstore: prune %s: %w", id.Short(), err)
		}
		if fi != nil {
			s.mu.Lock()
			s.looseBytes -= fi.Size()
			s.mu.Unlock()
		}
		if _, inPack := index[id]; !inPack && !gone[id] {
			res.Removed = append(res.Removed, id)
		}
		gone[id] = true
		hook("prune:removed-loose", lf.path)
		pr.Add(1, lf.size)
	}
	s.forgetKept(gone)
	// Packs: per pack, the bytes still live.
	byPack := map[*pack][]scanned{}
	s.mu.RLock()
	packs := make([]*pack, 0, len(s.packs))
	for _, p := range s.packs {
		packs = append(packs, p)
	}
	s.mu.RUnlock()
	for id, l := range index {
		if live[id] {
			byPack[l.p] = append(byPack[l.p], scanned{id: id, l: l})
		}
	}
	var drop []*pack
	type rewrite struct {
		recs []scanned
		live int64
	}
	var rewrites []rewrite
	var copyRecs, copyBytes int64
	for _, p := range packs {
		recs := byPack[p]
		var liveBytes int64
		for _, r := range recs {
			liveBytes += r.l.end() - r.l.off
		}
		switch {
		case len(recs) == 0:
			drop = append(drop, p)
		case liveBytes < p.size:
			// Anything dead in a pack is rewritten away, so that what
			// Prune reports removed is gone (an index rebuilt from the
			// pack would bring it back).
			rewrites = append(rewrites, rewrite{recs, liveBytes})
			copyRecs += int64(len(recs))
			copyBytes += liveBytes
			drop = append(drop, p)
		}
	}
	if len(rewrites) > 0 {
		beginCounting(pr, "gc: repack", "records", copyRecs, copyBytes)
	}
	for _, w := range rewrites {
		if err := s.repack(w.recs); err != nil {
			return res, err
		}
		res.Repacked++
		pr.Add(int64(len(w.recs)), w.live)
	}
	if err := s.Sync(); err != nil {
		return res, err
	}
	if err := s.seal(true); err != nil {
		return res, err
	}
	// Only now, with every kept record durable elsewhere, the old packs go.
	s.mu.Lock()
	for id, l := range s.index {
		if !live[id] {
			delete(s.index, id)
			continue
		}
		for _, p := range drop {
			if l.p == p {
				// repack moved it; a record still here was not copied
				s.mu.Unlock()
				return res, fmt.Errorf("blobstore: prune: %s was not copied out of pack %s", id.Short(), p.name)
			}
		}
	}
	for _, p := range drop {
		delete(s.packs, p.name)
	}
	s.mu.Unlock()
	if len(drop) > 0 {
		var dropBytes int64
		for _, p := range drop {
			dropBytes += p.size
		}
		beginCounting(pr, "gc: delete packs", "packs", int64(len(drop)), dropBytes)
	}
	for i, p := range drop {
		p.f.Close()
		for _, ext := range []string{".idx", ".pack"} {
			if err := os.Remove(filepath.Join(s.packDir, p.name+ext)); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return res, fmt.Errorf("blobstore: prune: %w", err)
			}
		}
		if i == 0 {
			hook("prune:removing", p.path(s.packDir))
		}
		pr.Add(1, p.size)
	}
	if len(drop) > 0 || len(loose) > 0 {
		if err := durable.SyncDir(s.packDir); err != nil {
			return res, fmt.Errorf("blobstore: prune: %w", err)
		}
	}
	sort.Slice(res.Removed, func(i, j int) bool { return res.Removed[i].String() < res.Removed[j].String() })
	n, err := s.absorbKept(keep, pr)
	if err != nil {
		return res, err
	}
	res.Absorbed = n
	after, err := s.diskBytes()
	if err != nil {
		return res, err
	}
	res.BytesFreed = before - after
	return res, nil
}

// absorbKept copies every kept blob that keep keeps into the packs and,
// once they are durable, removes its link: the copy, compression and
// chunking a capture skipped happen here, off the hot path. A kept blob
// whose content does not hash to its name is left for verify to report.
func (s *Store) absorbKept(keep func(ID) bool, pr Progress) (int, error) {
	// Where clones work, a large kept blob may share its extents with
	// the workspace or other clones: copying it would only cost space.
	s.kmu.Lock()
	shares := s.clone.works
	s.kmu.Unlock()
	var ids []ID
	sizes := map[ID]int64{}
	var total int64
	if err := s.walkLoose(func(id ID, n int64, path string) error {
		if filepath.Base(filepath.Dir(path)) == keptDirName && keep(id) && !(shares && n > s.opts.ChunkAbove) {
			ids = append(ids, id)
			sizes[id] = n
			total += n
		}
		return nil
	}); err != nil {
		return 0, err
	}
	if len(ids) > 0 {
		beginCounting(pr, "gc: absorb kept blobs", "blobs", int64(len(ids)), total)
	}
	var done []ID
	for _, id := range ids {
		ok, err := s.absorbOne(id)
		if err != nil {
			return 0, err
		}
		if ok {
			done = append(done, id)
		}
		pr.Add(1, sizes[id])
	}
	if len(done) == 0 {
		return 0, nil
	}
	if err := s.Sync(); err != nil {
		return 0, err
	}
	if err := s.seal(true); err != nil {
		return 0, err
	}
	gone := map[ID]bool{}
	for _, id := range done {
		fi, err := os.Lstat(s.keptPath(id))
		if err != nil {
			continue
		}
		if err := os.Remove(s.keptPath(id)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return 0, fmt.Errorf("blobstore: absorb kept %s: %w", id.Short(), err)
		}
		s.mu.Lock()
		s.looseBytes -= fi.Size()
		s.mu.Unlock()
		gone[id] = true
	}
	s.forgetKept(gone)
	return len(gone), nil
}

// absorbOne copies kept blob id into the packs unless it is there
// already; ok is false when it could not be read or did not hash to id
// (damaged: verify reports it; the pack keeps the copy of what was read,
// which gc drops).
func (s *Store) absorbOne(id ID) (ok bool, err error) {
	if _, inPack := s.lookup(id); inPack {
		return true, nil
	}
	f, err := os.Open(s.keptPath(id))
	if err != nil {
		return false, nil
	}
	got, _, err := s.Put(f)
	f.Close()
	if err != nil {
		return false, fmt.Errorf("blobstore: absorb kept %s: %w", id.Short(), err)
	}
	return got == id, nil
}

// liveSet is what is live (kept blobs and the chunks of kept lists) in a
// copy of the index; it adds the dead blobs and chunk count to res.
func (s *Store) liveSet(keep func(ID) bool, res *PruneResult) (map[ID]bool, map[ID]loc, error) {
	s.mu.RLock()
	index := make(map[ID]loc, len(s.index))
	for id, l := range s.index {
		index[id] = l
	}
	s.mu.RUnlock()
	live := map[ID]bool{}
	chunks := map[ID]bool{}
	for id, l := range index {
		if l.kind != kindList {
			continue
		}
		refs, err := s.list(id, l)
		if err != nil {
			if keep(id) {
				return nil, nil, fmt.Errorf("blobstore: prune: kept blob %s: %w", id.Short(), err)
			}
			continue
		}
		for _, r := range refs {
			if r.isHole() {
				continue
			}
			chunks[r.id] = true
			if keep(id) {
				live[r.id] = true
			}
		}
	}
	for id, l := range index {
		if keep(id) {
			live[id] = true
			continue
		}
		if live[id] {
			continue
		}
		if l.kind == kindList || !chunks[id] {
			res.Removed = append(res.Removed, id)
		} else {
			res.Chunks++
		}
	}
	return live, index, nil
}

// Reclaimable is what Prune(keep) would remove, changing nothing:
// BytesFreed counts the stored bytes of the records and loose files that
// would go (the packs' own small overhead aside).
func (s *Store) Reclaimable(keep func(ID) bool) (PruneResult, error) {
	var res PruneResult
	live, index, err := s.liveSet(keep, &res)
	if err != nil {
		return res, err
	}
	for id, l := range index {
		if !live[id] {
			res.BytesFreed += l.end() - l.off
		}
	}
	counted := map[ID]bool{}
	err = s.walkLoose(func(id ID, n int64, _ string) error {
		if !keep(id) {
			res.BytesFreed += n
			if _, inPack := index[id]; !inPack && !counted[id] {
				res.Removed = append(res.Removed, id)
			}
			counted[id] = true
		}
		return nil
	})
	sort.Slice(res.Removed, func(i, j int) bool { return res.Removed[i].String() < res.Removed[j].String() })
	return res, err
}

// repack copies records (their stored bytes as they are, checksum
// checked) into the active pack.
func (s *Store) repack(recs []scanned) error {
	sort.Slice(recs, func(i, j int) bool { return recs[i].l.off < recs[j].l.off })
	for _, r := range recs {
		payload, err := readPayload(r.l)
		if err != nil {
			return fmt.Errorf("blobstore: prune: cannot copy %s out of pack %s: %w", r.id.Short(), r.l.p.name, err)
		}
		s.mu.Lock()
		delete(s.index, r.id)
		s.mu.Unlock()
		if err := s.appendRecord(r.id, r.l.kind, r.l.comp, r.l.raw, payload); err != nil {
			s.mu.Lock()
			if _, ok := s.index[r.id]; !ok {
				s.index[r.id] = r.l
			}
			s.mu.Unlock()
			return err
		}
	}
	return nil
}

// diskBytes is the size of every file of the store.
func (s *Store) diskBytes() (int64, error) {
	var n int64
	err := filepath.WalkDir(s.dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		if d.Type().IsRegular() {
			if fi, err := d.Info(); err == nil {
				n += fi.Size()
			}
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("blobstore: %w", err)
	}
	return n, nil
}

// Stats describe what a store holds.
type Stats struct {
	// Blobs counts whole and chunked blobs (loose ones included); Chunks
	// the chunks of chunked blobs; Loose the blobs in files of their own,
	// Kept those of them that are kept workspace inodes (Keep).
	Blobs, Chunks, Loose, Kept, Packs int
	// ContentBytes is the length of every blob's content, chunked ones
	// whole; UniqueBytes the content actually kept, each chunk once.
	// StoredBytes is what that takes in packs and loose files
	// (compressed), DiskBytes everything under the store directory.
	ContentBytes, UniqueBytes, StoredBytes, DiskBytes int64
	// Damaged lists damaged ranges of packs.
	Damaged []Damage
}

// Stats reads the store's figures (it reads every chunk list).
func (s *Store) Stats() (Stats, error) {
	var st Stats
	s.mu.RLock()
	index := make(map[ID]loc, len(s.index))
	for id, l := range s.index {
		index[id] = l
	}
	st.Packs = len(s.packs)
	st.Damaged = append(st.Damaged, s.damaged...)
	s.mu.RUnlock()
	chunks := map[ID]bool{}
	for id, l := range index {
		if l.kind != kindList {
			continue
		}
		st.Blobs++
		st.ContentBytes += l.raw
		st.StoredBytes += int64(l.stored) + headerSize + trailerSize
		refs, err := s.list(id, l)
		if err != nil {
			continue
		}
		for _, r := range refs {
			if !r.isHole() {
				chunks[r.id] = true
			}
		}
	}
	for id, l := range index {
		if l.kind == kindList {
			continue
		}
		st.UniqueBytes += l.raw
		st.StoredBytes += int64(l.stored) + headerSize + trailerSize
		if chunks[id] {
			st.Chunks++
		} else {
			st.Blobs++
			st.ContentBytes += l.raw
		}
	}
	seen := map[ID]bool{}
	if err := s.walkLoose(func(id ID, n int64, path string) error {
		if _, ok := index[id]; ok || seen[id] {
			return nil
		}
		seen[id] = true
		if filepath.Base(filepath.Dir(path)) == keptDirName {
			st.Kept++
		}
		st.Blobs++
		st.Loose++
		st.ContentBytes += n
		st.UniqueBytes += n
		st.StoredBytes += n
		return nil
	}); err != nil {
		return st, err
	}
	var err error
	st.DiskBytes, err = s.diskBytes()
	return st, err
}
