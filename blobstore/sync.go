package blobstore

import (
	"errors"
	"fmt"
	"sort"

	"github.com/zerofs/zerofs/internal/durable"
)

// errMoved: a pack's fdatasync failed and its records were rewritten
// elsewhere; look them up again.
var errMoved = errors.New("blobstore: records moved to another pack")

// settle makes the records of ids durable (Options.Sync).
func (s *Store) settle(ids []ID) error {
	for _, id := range ids {
		for try := 0; ; try++ {
			l, ok := s.lookup(id)
			if !ok {
				return fmt.Errorf("%w: %s (lost while being made durable)", ErrNotFound, id.Short())
			}
			err := s.syncPack(l.p, l.end())
			if errors.Is(err, errMoved) && try < 3 {
				continue
			}
			if err != nil {
				return err
			}
			break
		}
	}
	return nil
}

// syncPack makes p durable up to at least end. If its fdatasync fails, the
// pack is never synced or appended to again: its records that were not yet
// durable are copied, verified, into a fresh pack that is synced instead
// (after a writeback error Linux may drop the pages it could not write and
// report success the next time).
func (s *Store) syncPack(p *pack, end int64) error {
	p.syncMu.Lock()
	defer p.syncMu.Unlock()
	if p.durable >= end && p.entryDurable {
		return nil
	}
	if p.failed {
		return errMoved
	}
	s.wmu.Lock()
	size := p.size
	s.wmu.Unlock()
	if err := fdatasync(p.f); err != nil {
		return s.rescueLocked(p, err)
	}
	if !p.entryDurable {
		if err := durable.SyncDir(s.packDir); err != nil {
			return fmt.Errorf("blobstore: sync: %w", err)
		}
		p.entryDurable = true
	}
	s.wmu.Lock()
	p.durable = max(p.durable, size)
	s.wmu.Unlock()
	return nil
}

// rescueLocked copies p's records that are not durable into the active
// pack after p's fdatasync failed with cause, and syncs that; the caller
// holds p.syncMu. p is marked failed: never synced or appended to again.
func (s *Store) rescueLocked(p *pack, cause error) error {
	s.wmu.Lock()
	if s.active == p {
		s.retireLocked()
	}
	p.failed = true
	s.wmu.Unlock()
	var recs []scanned
	s.mu.RLock()
	for id, l := range s.index {
		if l.p == p && l.end() > p.durable {
			recs = append(recs, scanned{id: id, l: l})
		}
	}
	s.mu.RUnlock()
	fail := func(err error) error {
		s.mu.Lock()
		for _, r := range recs {
			if s.index[r.id].p == p {
				delete(s.index, r.id)
			}
		}
		s.mu.Unlock()
		return fmt.Errorf("blobstore: sync pack %s: %w (and cannot rewrite it: %w)", p.name, cause, err)
	}
	// In the order they were written: chunks before their lists.
	sort.Slice(recs, func(i, j int) bool { return recs[i].l.off < recs[j].l.off })
	for _, r := range recs {
		payload, err := readPayload(r.l)
		if err == nil {
			err = s.checkContent(r.id, r.l, payload)
		}
		if err != nil {
			return fail(err)
		}
		s.mu.Lock()
		delete(s.index, r.id) // so that appendRecord writes it again
		s.mu.Unlock()
		if err := s.appendRecord(r.id, r.l.kind, r.l.comp, r.l.raw, payload); err != nil {
			return fail(err)
		}
	}
	s.wmu.Lock()
	np := s.active
	var end int64
	if np != nil {
		end = np.size
	}
	s.wmu.Unlock()
	if np == nil {
		return nil
	}
	if err := s.syncPack(np, end); err != nil {
		return fail(err)
	}
	return nil
}

// checkContent verifies a record's payload against id.
func (s *Store) checkContent(id ID, l loc, payload []byte) error {
	if l.kind == kindList {
		_, err := parseList(id, l.raw, payload)
		return err
	}
	_, err := s.decode(id, l, payload)
	return err
}

// Sync makes every blob put since the last Sync durable, and seals the
// packs this Store has stopped appending to (writing their index).
func (s *Store) Sync() error {
	if s.opts.ReadOnly {
		return ErrReadOnly
	}
	s.wmu.Lock()
	packs := append([]*pack(nil), s.retired...)
	sizes := make([]int64, len(packs))
	for i, p := range packs {
		sizes[i] = p.size
	}
	s.wmu.Unlock()
	for i, p := range packs {
		if err := s.syncPack(p, sizes[i]); err != nil {
			return err
		}
	}
	if err := s.seal(false); err != nil {
		return err
	}
	// After the packs: a detached kept blob's link goes only once its
	// packed copy is durable.
	return s.syncKept()
}

// seal writes the index of every retired pack that is durable (all of them
// when all is true, retiring the active one first) and drops it from
// retired. The indexes are written without wmu: a Put, which appends
// under it, never waits for an index's fsync, rename and directory fsync.
// A retired pack's records no longer change (only the active pack is
// appended to), so its index can be encoded outside the lock.
func (s *Store) seal(all bool) error {
	s.wmu.Lock()
	if all {
		s.retireLocked()
	}
	var ready []*pack
	for _, p := range s.retired {
		if !p.failed && p != s.active && p.durable >= p.size {
			ready = append(ready, p)
		}
	}
	s.wmu.Unlock()
	sealed := map[*pack]bool{}
	var err error
	for _, p := range ready {
		var recs []scanned
		s.mu.RLock()
		for id, l := range s.index {
			if l.p == p {
				recs = append(recs, scanned{id: id, l: l})
			}
		}
		s.mu.RUnlock()
		sort.Slice(recs, func(i, j int) bool { return recs[i].l.off < recs[j].l.off })
		if werr := durable.WriteFileAtomic(s.packDir, p.name+".idx", encodeIndex(p.size, recs), 0o600); werr != nil {
			err = fmt.Errorf("blobstore: index pack %s: %w", p.name, werr)
			break
		}
		sealed[p] = true
	}
	s.wmu.Lock()
	defer s.wmu.Unlock()
	var keep []*pack
	for _, p := range s.retired {
		// A failed pack is scanned and repaired by the next open.
		if !p.failed && !sealed[p] {
			keep = append(keep, p)
		}
	}
	s.retired = keep
	return err
}

// Close makes everything durable, seals the active pack and closes the
// store's files.
func (s *Store) Close() error {
	var err error
	if !s.opts.ReadOnly {
		if err = s.Sync(); err == nil {
			err = s.seal(true)
		}
	}
	s.closeFiles()
	s.ringMu.Lock()
	if s.ring != nil {
		s.ring.close()
		s.ring, s.ringDead = nil, true
	}
	s.ringMu.Unlock()
	s.closeSyncRing()
	return err
}

func (s *Store) closeFiles() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, p := range s.packs {
		p.f.Close()
	}
	s.kmu.Lock()
	if s.kept.dir != nil {
		s.kept.dir.Close()
		s.kept.dir = nil
	}
	s.kmu.Unlock()
}
