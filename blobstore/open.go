package blobstore

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/zerofs/zerofs/internal/durable"
)

// Open opens (creating if needed, unless Options.ReadOnly) the blob store
// in dir. A writer recovers what a crash left: a torn tail of a pack is
// copied aside and cut off, packs without an index are made durable and
// indexed.
func Open(dir string, opts Options) (*Store, error) {
	if opts.ChunkAbove == 0 {
		opts.ChunkAbove = DefaultChunkAbove
	}
	if opts.PackSize <= 0 {
		opts.PackSize = DefaultPackSize
	}
	s := &Store{
		dir:     dir,
		packDir: filepath.Join(dir, packDirName),
		opts:    opts,
		index:   map[ID]loc{},
		packs:   map[string]*pack{},
		hashed:  map[ID]bool{},

		goodLists: map[ID][32]byte{},
		fileIDs:   map[fileKey]ID{},
	}
	if !opts.ReadOnly {
		_, statErr := os.Stat(dir)
		_, packErr := os.Stat(s.packDir)
		for _, d := range []string{filepath.Join(dir, tmpDirName), s.packDir} {
			if err := os.MkdirAll(d, 0o700); err != nil {
				return nil, fmt.Errorf("blobstore: %w", err)
			}
		}
		if errors.Is(statErr, fs.ErrNotExist) {
			// A new store: its entry in the parent must survive a power
			// loss, or every blob in it goes with it.
			if err := durable.SyncDir(filepath.Dir(filepath.Clean(dir))); err != nil {
				return nil, fmt.Errorf("blobstore: %w", err)
			}
		}
		if errors.Is(packErr, fs.ErrNotExist) {
			if err := durable.SyncDir(dir); err != nil {
				return nil, fmt.Errorf("blobstore: %w", err)
			}
		}
	}
	if err := s.loadPacks(); err != nil {
		s.closeFiles()
		return nil, err
	}
	if err := s.openKept(); err != nil {
		s.closeFiles()
		return nil, err
	}
	if err := checkBaseline(dir); err != nil {
		s.closeFiles()
		return nil, err
	}
	if err := s.walkLoose(func(_ ID, n int64, _ string) error { s.looseBytes += n; return nil }); err != nil {
		s.closeFiles()
		return nil, err
	}
	return s, nil
}

// loadPacks indexes every pack: from its index file when that is valid and
// of the pack's length, else by scanning it (and, for a writer, repairing
// and indexing it).
func (s *Store) loadPacks() error {
	ents, err := os.ReadDir(s.packDir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("blobstore: %w", err)
	}
	repaired := false
	for _, e := range ents {
		name, ok := strings.CutSuffix(e.Name(), ".pack")
		if !ok || !e.Type().IsRegular() || strings.HasPrefix(name, ".") {
			continue
		}
		flag := os.O_RDWR
		if s.opts.ReadOnly {
			flag = os.O_RDONLY
		}
		f, err := os.OpenFile(filepath.Join(s.packDir, e.Name()), flag, 0)
		if errors.Is(err, fs.ErrNotExist) {
			continue // removed by a gc meanwhile
		}
		if err != nil {
			return fmt.Errorf("blobstore: open pack: %w", err)
		}
		p := &pack{name: name, f: f, entryDurable: true}
		s.packs[name] = p
		fi, err := f.Stat()
		if err != nil {
			return fmt.Errorf("blobstore: pack %s: %w", name, err)
		}
		p.size = fi.Size()
		if b, err := os.ReadFile(filepath.Join(s.packDir, name+".idx")); err == nil {
			if recs, ok := decodeIndex(b, p, p.size); ok {
				p.durable = p.size
				s.addRecords(recs)
				continue
			}
		}
		recs, bad, validEnd, err := scanPack(p)
		if err != nil {
			return err
		}
		s.addRecords(recs)
		for _, d := range bad {
			s.damaged = append(s.damaged, Damage{Pack: name, Off: d.off, End: d.end})
		}
		if s.opts.ReadOnly {
			p.size = validEnd
			continue
		}
		if err := s.repairPack(p, validEnd, recs, len(bad) > 0); err != nil {
			return err
		}
		repaired = true
	}
	if repaired {
		if err := durable.SyncDir(s.packDir); err != nil {
			return fmt.Errorf("blobstore: %w", err)
		}
	}
	return nil
}

// addRecords puts scanned records in the index (the first copy of an ID
// found wins; copies are equal).
func (s *Store) addRecords(recs []scanned) {
	for _, r := range recs {
		if _, ok := s.index[r.id]; !ok {
			s.index[r.id] = r.l
		}
	}
}

// repairPack finishes a pack a writer left unsealed (it crashed, or its
// fdatasync failed): the torn tail after validEnd is copied aside and cut
// off, the rest made durable (a batch writer may have died before its
// Sync) and indexed. A pack with damage inside keeps no index, so every
// open reports the damage.
func (s *Store) repairPack(p *pack, validEnd int64, recs []scanned, damaged bool) error {
	if validEnd < p.size {
		if err := s.cutTail(p, validEnd); err != nil {
			return err
		}
	}
	if err := fdatasync(p.f); err != nil {
		return fmt.Errorf("blobstore: recover pack %s: %w", p.name, err)
	}
	p.durable = p.size
	if damaged {
		return nil
	}
	if err := durable.WriteFileAtomic(s.packDir, p.name+".idx", encodeIndex(p.size, recs), 0o600); err != nil {
		return fmt.Errorf("blobstore: index pack %s: %w", p.name, err)
	}
	return nil
}

// cutTail copies the bytes of p after off to packs/<name>.pack.torn-<time>
// and truncates p to off. The tail was never acknowledged: no Put that
// wrote it returned.
func (s *Store) cutTail(p *pack, off int64) error {
	tail := make([]byte, p.size-off)
	if _, err := p.f.ReadAt(tail, off); err != nil && !errors.Is(err, io.EOF) {
		return fmt.Errorf("blobstore: read torn tail of pack %s: %w", p.name, err)
	}
	aside := fmt.Sprintf("%s.pack.torn-%d", p.name, time.Now().UnixNano())
	if err := durable.WriteFileAtomic(s.packDir, aside, tail, 0o600); err != nil {
		return fmt.Errorf("blobstore: keep torn tail of pack %s: %w", p.name, err)
	}
	if err := p.f.Truncate(off); err != nil {
		return fmt.Errorf("blobstore: cut torn tail of pack %s: %w", p.name, err)
	}
	p.size = off
	return nil
}

// CleanTemp removes temporary files left by a crash (in tmp/, and
// temporary files of packs/). Call it when no Put can be running (at open,
// under the store lock).
func (s *Store) CleanTemp() error {
	var first error
	for _, dir := range []string{filepath.Join(s.dir, tmpDirName), s.packDir} {
		ents, err := os.ReadDir(dir)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return fmt.Errorf("blobstore: %w", err)
		}
		for _, e := range ents {
			if dir == s.packDir && !strings.HasPrefix(e.Name(), ".tmp-") {
				continue
			}
			if err := os.Remove(filepath.Join(dir, e.Name())); err != nil && !errors.Is(err, fs.ErrNotExist) && first == nil {
				first = fmt.Errorf("blobstore: clean: %w", err)
			}
		}
	}
	return first
}

// Damaged lists the damaged ranges of packs found at Open.
func (s *Store) Damaged() []Damage {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return append([]Damage(nil), s.damaged...)
}
