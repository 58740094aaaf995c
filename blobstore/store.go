package blobstore

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/klauspost/compress/zstd"
	"github.com/restic/chunker"

	"github.com/zerofs/zerofs/internal/durable"
)

// fdatasync is the seam (STYLE rule 16) through which the store flushes a
// pack; tests replace it to fail.
var fdatasync = durable.Fdatasync

// syncDirFile is the seam through which the store fsyncs the kept/
// directory; tests record it.
var syncDirFile = durable.SyncDirFile

// syncFS is the seam through which the store syncs its whole filesystem
// (a batch of at least syncfsFrom kept files); tests record it.
var syncFS = durable.SyncFS

// syncfsFrom is how many kept files a batch-mode Sync makes durable with
// one syncfs rather than an fdatasync each.
var syncfsFrom = 64

// hook calls durable.TestHook at a crash point of this package (see
// doc.go for the points).
func hook(point, path string) {
	if durable.TestHook != nil {
		durable.TestHook(point, path)
	}
}

// Errors the caller can test for with errors.Is.
var (
	// ErrCorrupt: a blob's content does not hash to its name, or a
	// record of it is damaged.
	ErrCorrupt = errors.New("blobstore: blob content does not match its hash")
	// ErrNotFound: no blob with that ID.
	ErrNotFound = errors.New("blobstore: blob not found")
	// ErrTooLarge: the content is larger than Options.MaxSize.
	ErrTooLarge = errors.New("blobstore: content larger than the configured cap")
	// ErrReadOnly: a write to a store opened with Options.ReadOnly.
	ErrReadOnly = errors.New("blobstore: store is open read-only")
)

// ChunkError is a damaged or missing chunk of a chunked blob. It wraps
// ErrCorrupt or ErrNotFound.
type ChunkError struct {
	Blob  ID
	Chunk ID
	Err   error
}

func (e *ChunkError) Error() string {
	return fmt.Sprintf("blobstore: blob %s: chunk %s: %v", e.Blob.Short(), e.Chunk.Short(), e.Err)
}

func (e *ChunkError) Unwrap() error { return e.Err }

// Chunking parameters. They are part of the format only in that changing
// them stops new chunks from matching old ones; any store reads any chunks.
const (
	// DefaultChunkAbove: content larger than this is chunked.
	DefaultChunkAbove = 1 << 20
	// DefaultPackSize: a pack this long is sealed and a new one begun.
	DefaultPackSize = 32 << 20

	minChunk    = 256 << 10
	maxChunk    = 4 << 20
	averageBits = 19 // chunks of 512 KiB on average
	// chunkPol is the chunker's irreducible polynomial. It is fixed, so
	// that the same content chunks the same way in every store.
	chunkPol = chunker.Pol(0x3DA3358B4DC173)
)

// Options configure a Store.
type Options struct {
	// Sync makes Put fdatasync what it wrote before returning. Without
	// it, call Sync to make puts durable.
	Sync bool
	// MaxSize, when > 0, refuses content larger than this many bytes with
	// ErrTooLarge. Zero means no cap.
	MaxSize int64
	// ReadOnly opens the store next to a running writer: nothing is
	// created, repaired or removed, and a pack's partly written tail is
	// left alone. Put, Sync and Prune fail with ErrReadOnly.
	ReadOnly bool
	// NoCompress stores content as it is (for measurements).
	NoCompress bool
	// ChunkAbove is the size above which content is chunked (default
	// DefaultChunkAbove; negative: never).
	ChunkAbove int64
	// PackSize is the length at which a pack is sealed (default
	// DefaultPackSize).
	PackSize int64
}

// Store is a directory of blobs. It is safe for concurrent use.
type Store struct {
	dir     string
	packDir string
	opts    Options

	wmu sync.Mutex // serialises appends; guards active, retired and pack sizes
	// active is the pack being appended to (nil until the first Put);
	// retired holds packs this Store wrote to and has not sealed yet.
	active  *pack
	retired []*pack

	mu sync.RWMutex // guards index, packs, hashed, damaged
	// index says where each record is. A loose blob (the layout before
	// packs) is not in it; see loosePath.
	index map[ID]loc
	packs map[string]*pack
	// hashed holds loose blobs this Store hashed whole and found good.
	hashed map[ID]bool
	// damaged lists the ranges of packs, found at Open, that hold no
	// valid record.
	damaged []Damage
	// looseBytes is the size of the loose and kept blobs (found at Open,
	// then kept and pruned).
	looseBytes int64

	kmu   sync.Mutex // guards kept, clone (taken after a keptInode's mu, never before)
	kept  keptState
	clone cloneState
}

// Damage is a range of a pack file that holds no valid record (found when
// the pack was scanned). The blobs that were there are missing.
type Damage struct {
	Pack     string
	Off, End int64
}

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
		packDir: filepath.Join(dir, "packs"),
		opts:    opts,
		index:   map[ID]loc{},
		packs:   map[string]*pack{},
		hashed:  map[ID]bool{},
	}
	if !opts.ReadOnly {
		_, statErr := os.Stat(dir)
		_, packErr := os.Stat(s.packDir)
		for _, d := range []string{filepath.Join(dir, "tmp"), s.packDir} {
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

// Size is the bytes the store's packs and loose blobs take (the loose ones
// as counted at Open, less what Prune removed).
func (s *Store) Size() int64 {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	s.mu.RLock()
	defer s.mu.RUnlock()
	n := s.looseBytes
	for _, p := range s.packs {
		n += p.size
	}
	return n
}

// Dir is the store's directory.
func (s *Store) Dir() string { return s.dir }

// loosePath is where a loose blob (one file per blob, the layout before
// packs) lives. Loose blobs are read, verified and pruned, never written.
func (s *Store) loosePath(id ID) string {
	h := id.String()
	return filepath.Join(s.dir, h[:2], h)
}

// lookup finds id's record.
func (s *Store) lookup(id ID) (loc, bool) {
	s.mu.RLock()
	l, ok := s.index[id]
	s.mu.RUnlock()
	return l, ok
}

// Has reports whether blob id exists (it does not verify it).
func (s *Store) Has(id ID) bool {
	if _, ok := s.lookup(id); ok {
		return true
	}
	if _, err := os.Lstat(s.keptPath(id)); err == nil {
		return true
	}
	_, err := os.Lstat(s.loosePath(id))
	return err == nil
}

// Put streams r into the store and returns its ID (the sha256 of all of
// it) and size. Content of at most Options.ChunkAbove bytes is one record;
// larger content is cut into content-defined chunks, each stored once by
// its own sha256, and a list record names them. Records already present are
// not written again.
//
// With Options.Sync, when Put returns the blob is durable.
func (s *Store) Put(r io.Reader) (ID, int64, error) {
	if s.opts.ReadOnly {
		return ID{}, 0, ErrReadOnly
	}
	src := r
	if s.opts.MaxSize > 0 {
		src = io.LimitReader(r, s.opts.MaxSize+1)
	}
	limit := s.opts.ChunkAbove
	if limit < 0 {
		limit = maxDataRaw
	}
	var head bytes.Buffer
	if _, err := head.ReadFrom(io.LimitReader(src, limit+1)); err != nil {
		return ID{}, 0, fmt.Errorf("blobstore: put: read: %w", err)
	}
	var settle []ID
	var id ID
	var n int64
	if int64(head.Len()) <= limit {
		data := head.Bytes()
		n = int64(len(data))
		if s.opts.MaxSize > 0 && n > s.opts.MaxSize {
			return ID{}, 0, fmt.Errorf("blobstore: put: %w (%d bytes)", ErrTooLarge, s.opts.MaxSize)
		}
		id = Sum(data)
		if err := s.putData(id, data); err != nil {
			return ID{}, 0, err
		}
		settle = append(settle, id)
	} else {
		var err error
		id, n, settle, err = s.putChunked(io.MultiReader(&head, src))
		if err != nil {
			return ID{}, 0, err
		}
	}
	if s.opts.Sync {
		if err := s.settle(settle); err != nil {
			return ID{}, 0, err
		}
	}
	return id, n, nil
}

// putChunked stores r as chunks and a list; it returns what Put must make
// durable (every chunk and the list).
func (s *Store) putChunked(r io.Reader) (ID, int64, []ID, error) {
	h := sha256.New()
	ch := chunker.NewWithBoundaries(io.TeeReader(r, h), chunkPol, minChunk, maxChunk)
	ch.SetAverageBits(averageBits)
	buf := make([]byte, maxChunk)
	var list []byte
	var ids []ID
	var n int64
	for {
		c, err := ch.Next(buf)
		if err == io.EOF {
			break
		}
		if err != nil {
			return ID{}, 0, nil, fmt.Errorf("blobstore: put: read: %w", err)
		}
		n += int64(c.Length)
		if s.opts.MaxSize > 0 && n > s.opts.MaxSize {
			return ID{}, 0, nil, fmt.Errorf("blobstore: put: %w (%d bytes)", ErrTooLarge, s.opts.MaxSize)
		}
		cid := Sum(c.Data)
		if err := s.putData(cid, c.Data); err != nil {
			return ID{}, 0, nil, err
		}
		ids = append(ids, cid)
		list = append(list, cid[:]...)
		list = binary.LittleEndian.AppendUint32(list, uint32(c.Length))
	}
	var id ID
	h.Sum(id[:0])
	if _, ok := s.lookup(id); !ok {
		if err := s.appendRecord(id, kindList, compNone, n, list); err != nil {
			return ID{}, 0, nil, err
		}
	}
	return id, n, append(ids, id), nil
}

// putData stores one data record unless it is present.
func (s *Store) putData(id ID, data []byte) error {
	if _, ok := s.lookup(id); ok {
		return nil
	}
	payload, comp := s.compress(data)
	return s.appendRecord(id, kindData, comp, int64(len(data)), payload)
}

// appendRecord appends a record to the active pack (unless another Put
// added the same ID meanwhile).
func (s *Store) appendRecord(id ID, kind, comp byte, raw int64, payload []byte) error {
	rec := encodeRecord(kind, comp, id, raw, payload)
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if _, ok := s.lookup(id); ok {
		return nil
	}
	p, err := s.activeLocked()
	if err != nil {
		return err
	}
	off := p.size
	if _, err := p.f.WriteAt(rec, off); err != nil {
		// Cut back so the pack ends on a record; if even that fails,
		// leave the pack for recovery and go on in a new one.
		if p.f.Truncate(off) != nil {
			s.retireLocked()
		}
		return fmt.Errorf("blobstore: put %s: %w", id.Short(), err)
	}
	p.size += int64(len(rec))
	hook("pack:appended", p.path(s.packDir))
	s.mu.Lock()
	s.index[id] = loc{p: p, off: off, kind: kind, comp: comp, raw: raw, stored: uint32(len(payload))}
	s.mu.Unlock()
	if p.size >= s.opts.PackSize {
		s.retireLocked()
	}
	return nil
}

// activeLocked returns the pack to append to, creating one if needed.
func (s *Store) activeLocked() (*pack, error) {
	if s.active != nil {
		return s.active, nil
	}
	for range 10 {
		sum := sha256.Sum256([]byte(durable.TempName("pack")))
		n := fmt.Sprintf("%x", sum[:8])
		f, err := os.OpenFile(filepath.Join(s.packDir, n+".pack"), os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
		if errors.Is(err, fs.ErrExist) {
			continue
		}
		if errors.Is(err, fs.ErrNotExist) { // packs/ removed behind our back
			if err = os.MkdirAll(s.packDir, 0o700); err == nil {
				continue
			}
		}
		if err != nil {
			return nil, fmt.Errorf("blobstore: new pack: %w", err)
		}
		p := &pack{name: n, f: f}
		s.mu.Lock()
		s.packs[n] = p
		s.mu.Unlock()
		s.active = p
		s.retired = append(s.retired, p)
		return p, nil
	}
	return nil, errors.New("blobstore: could not name a new pack")
}

// retireLocked stops appending to the active pack; the next Sync seals it.
func (s *Store) retireLocked() { s.active = nil }

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
// retired.
func (s *Store) seal(all bool) error {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if all {
		s.retireLocked()
	}
	var keep []*pack
	for i, p := range s.retired {
		switch {
		case p.failed:
			continue // scanned and repaired by the next open
		case p == s.active || p.durable < p.size:
			keep = append(keep, p)
			continue
		}
		var recs []scanned
		s.mu.RLock()
		for id, l := range s.index {
			if l.p == p {
				recs = append(recs, scanned{id: id, l: l})
			}
		}
		s.mu.RUnlock()
		sort.Slice(recs, func(i, j int) bool { return recs[i].l.off < recs[j].l.off })
		if err := durable.WriteFileAtomic(s.packDir, p.name+".idx", encodeIndex(p.size, recs), 0o600); err != nil {
			s.retired = append(keep, s.retired[i:]...)
			return fmt.Errorf("blobstore: index pack %s: %w", p.name, err)
		}
	}
	s.retired = keep
	return nil
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

// CleanTemp removes temporary files left by a crash (in tmp/, and
// temporary files of packs/). Call it when no Put can be running (at open,
// under the store lock).
func (s *Store) CleanTemp() error {
	var first error
	for _, dir := range []string{filepath.Join(s.dir, "tmp"), s.packDir} {
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

var (
	zenc = sync.OnceValue(func() *zstd.Encoder {
		e, err := zstd.NewWriter(nil, zstd.WithEncoderConcurrency(1), zstd.WithEncoderLevel(zstd.SpeedDefault))
		if err != nil {
			panic(err) // only bad options fail
		}
		return e
	})
	zdec = sync.OnceValue(func() *zstd.Decoder {
		d, err := zstd.NewReader(nil, zstd.WithDecoderConcurrency(0), zstd.WithDecoderMaxMemory(maxDataRaw))
		if err != nil {
			panic(err)
		}
		return d
	})
)

// compressMin: content shorter than this is stored as it is.
const compressMin = 128

// compress returns the payload for data: zstd when it saves at least an
// eighth, else data itself.
func (s *Store) compress(data []byte) ([]byte, byte) {
	if s.opts.NoCompress || len(data) < compressMin {
		return data, compNone
	}
	out := zenc().EncodeAll(data, make([]byte, 0, len(data)))
	if len(out) > len(data)-len(data)/8 {
		return data, compNone
	}
	return out, compZstd
}

// decode turns a data record's payload into its content and verifies it.
func (s *Store) decode(id ID, l loc, payload []byte) ([]byte, error) {
	data := payload
	if l.comp == compZstd {
		var err error
		data, err = zdec().DecodeAll(payload, make([]byte, 0, l.raw))
		if err != nil {
			return nil, fmt.Errorf("%w: %s: cannot decompress: %v", ErrCorrupt, id.Short(), err)
		}
	}
	if int64(len(data)) != l.raw {
		return nil, fmt.Errorf("%w: %s: %d bytes, want %d", ErrCorrupt, id.Short(), len(data), l.raw)
	}
	if got := Sum(data); got != id {
		return nil, fmt.Errorf("%w: %s (content hashes to %s)", ErrCorrupt, id, got.Short())
	}
	return data, nil
}

// readData reads and verifies data record id.
func (s *Store) readData(id ID) ([]byte, error) {
	l, ok := s.lookup(id)
	if !ok {
		return nil, fmt.Errorf("%w: %s", ErrNotFound, id)
	}
	if l.kind != kindData {
		return nil, fmt.Errorf("%w: %s is a list where a chunk was expected", ErrCorrupt, id.Short())
	}
	payload, err := readPayload(l)
	if err != nil {
		return nil, fmt.Errorf("%w (blob %s)", err, id.Short())
	}
	return s.decode(id, l, payload)
}

// chunkRef is one chunk of a list.
type chunkRef struct {
	id  ID
	off int64 // where it starts in the blob
	n   int64
}

// parseList decodes a list payload; the chunks must add up to raw bytes.
func parseList(id ID, raw int64, payload []byte) ([]chunkRef, error) {
	refs := make([]chunkRef, 0, len(payload)/listEntry)
	var off int64
	for b := payload; len(b) >= listEntry; b = b[listEntry:] {
		var c chunkRef
		copy(c.id[:], b[:32])
		c.off, c.n = off, int64(binary.LittleEndian.Uint32(b[32:36]))
		if c.n == 0 || c.n > maxDataRaw {
			return nil, fmt.Errorf("%w: %s: chunk list names a chunk of %d bytes", ErrCorrupt, id.Short(), c.n)
		}
		off += c.n
		refs = append(refs, c)
	}
	if off != raw {
		return nil, fmt.Errorf("%w: %s: chunks add up to %d bytes, want %d", ErrCorrupt, id.Short(), off, raw)
	}
	return refs, nil
}

// Chunks lists the chunks of blob id in order, or nil when it is not
// chunked.
func (s *Store) Chunks(id ID) ([]ID, error) {
	l, ok := s.lookup(id)
	if !ok || l.kind != kindList {
		if !ok && !s.Has(id) {
			return nil, fmt.Errorf("%w: %s", ErrNotFound, id)
		}
		return nil, nil
	}
	refs, err := s.list(id, l)
	if err != nil {
		return nil, err
	}
	out := make([]ID, len(refs))
	for i, r := range refs {
		out[i] = r.id
	}
	return out, nil
}

func (s *Store) list(id ID, l loc) ([]chunkRef, error) {
	payload, err := readPayload(l)
	if err != nil {
		return nil, fmt.Errorf("%w (blob %s)", err, id.Short())
	}
	return parseList(id, l.raw, payload)
}
