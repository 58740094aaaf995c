package blobstore

import (
	"errors"
	"fmt"
	"os"
	"sync"

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
// one syncfs rather than an fdatasync each (an open, an fcntl, an
// fdatasync and a close a file, and an fsync of kept/: a journal commit
// each): two already cost more than one syncfs. A single file is still
// synced alone: a syncfs writes every other writer's dirty pages
// (docs/performance.md, Code written for speed).
var syncfsFrom = 2

// syncfsRingFrom is syncfsFrom where the store syncs kept files through
// io_uring (syncring.go): one system call a window either way, and up to
// about 32 small files their fdatasyncs, run at once, take no longer than
// a syncfs (2026-12-05, load 6: 8 files 1.3 ms against 2.0, 32 files 4.1
// against 4.2; 128 files 39 against 9.5 ms).
var syncfsRingFrom = 32

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

	// ringState is the io_uring the namer's small stashes are read
	// through (hashbatch.go).
	ringState
	// syncRingState is the io_uring a batch-mode Sync makes kept files
	// durable through (syncring.go).
	syncRingState

	wmu sync.Mutex // serialises appends; guards active, retired and pack sizes
	// active is the pack being appended to (nil until the first Put);
	// retired holds packs this Store wrote to and has not sealed yet.
	active  *pack
	retired []*pack

	mu sync.RWMutex // guards index, packs, hashed, goodLists, fileIDs, damaged
	// index says where each record is. A kept blob (a file of its own)
	// is not in it; see keptPath.
	index map[ID]loc
	packs map[string]*pack
	// hashed holds loose blobs this Store hashed whole and found good.
	hashed map[ID]bool
	// goodLists holds, for sparse blobs (lists with holes) this Store
	// wrote or read whole and found good, the sha256 of the list record:
	// a list that still hashes to it needs no whole-content hash again
	// (sparse.go).
	goodLists map[ID][32]byte
	// fileIDs remembers what sparse workspace files hashed to (sparse.go).
	fileIDs map[fileKey]ID
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

// lookup finds id's record.
func (s *Store) lookup(id ID) (loc, bool) {
	s.mu.RLock()
	l, ok := s.index[id]
	s.mu.RUnlock()
	return l, ok
}

// BlobSize is blob id's length as the store records it (it neither reads
// nor verifies the content): what a progress counts before the work.
func (s *Store) BlobSize(id ID) (int64, error) {
	if l, ok := s.lookup(id); ok {
		return l.raw, nil
	}
	fi, err := os.Lstat(s.keptPath(id))
	if errors.Is(err, os.ErrNotExist) {
		return 0, fmt.Errorf("%w: %s", ErrNotFound, id)
	}
	if err != nil {
		return 0, fmt.Errorf("blobstore: size of %s: %w", id.Short(), err)
	}
	return fi.Size(), nil
}

// Has reports whether blob id exists (it does not verify it).
func (s *Store) Has(id ID) bool {
	if _, ok := s.lookup(id); ok {
		return true
	}
	_, err := os.Lstat(s.keptPath(id))
	return err == nil
}
