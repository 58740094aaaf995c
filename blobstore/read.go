package blobstore

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"sync"
)

// Reader reads one blob: sequentially (Read, verifying the whole content
// against the blob's ID when it reaches the end) or at offsets (ReadAt).
type Reader struct {
	s    *Store
	id   ID
	size int64
	ra   io.ReaderAt
	f    *os.File // a loose blob's file, closed by Close

	off    int64     // Read's position
	h      hash.Hash // of what Read returned so far
	failed error     // a verification failure, returned by every later Read
	// trusted: a sparse blob whose list this Store found good (sparse.go);
	// Read checks each chunk, not the whole content again.
	trusted bool
}

// Size is the blob's length.
func (r *Reader) Size() int64 { return r.size }

// ReadAt reads the content at off. For a chunked blob it reads (and
// verifies) only the chunks it touches.
func (r *Reader) ReadAt(p []byte, off int64) (int, error) { return r.ra.ReadAt(p, off) }

// Read reads on from the last Read; the read that reaches the end fails
// with ErrCorrupt if the whole content does not hash to the blob's ID (and
// the one after it returns io.EOF).
func (r *Reader) Read(p []byte) (int, error) {
	if r.failed != nil {
		return 0, r.failed
	}
	if r.off >= r.size {
		return 0, io.EOF
	}
	n, err := r.ra.ReadAt(p, r.off)
	r.off += int64(n)
	if !r.trusted {
		r.h.Write(p[:n])
		wholeHashed.Add(int64(n))
	}
	if err == io.EOF && r.off < r.size {
		err = io.ErrUnexpectedEOF
	}
	if err != nil && err != io.EOF {
		r.failed = err
		return n, err
	}
	if r.off >= r.size {
		if r.f != nil {
			// A loose file may have grown since Open (damage): it must
			// end here.
			var b [1]byte
			if k, _ := r.f.ReadAt(b[:], r.off); k > 0 {
				r.failed = fmt.Errorf("%w: %s (longer than when opened)", ErrCorrupt, r.id)
				return n, r.failed
			}
		}
		var got ID
		r.h.Sum(got[:0])
		if !r.trusted && got != r.id {
			r.failed = fmt.Errorf("%w: %s (content hashes to %s)", ErrCorrupt, r.id, got.Short())
			return n, r.failed
		}
		if c, ok := r.ra.(*chunked); ok && !r.trusted && c.sparse() {
			r.s.trustList(r.id, c.payload)
		}
		// The content is good: io.EOF comes with the next Read, as from
		// a file.
	}
	return n, nil
}

// Close releases the reader.
func (r *Reader) Close() error {
	if r.f != nil {
		return r.f.Close()
	}
	return nil
}

// Open returns a reader of blob id. Its Read verifies the content as it
// streams (the read that reaches the end fails with ErrCorrupt if the hash
// differs); a record damaged on disk fails the read that meets it.
func (s *Store) Open(id ID) (*Reader, error) {
	return s.open(id, false)
}

// OpenVerified returns a reader of blob id for random access, checked
// before it is handed out: a loose blob or a small blob is hashed whole
// (a loose one once per Store); a chunked blob's chunk list is checked
// against the blob's length, and every chunk is verified against its own
// hash when a read first touches it, so no damaged byte is returned. Use it
// where reads come at offsets (a view served over FUSE).
func (s *Store) OpenVerified(id ID) (*Reader, error) {
	return s.open(id, true)
}

func (s *Store) open(id ID, verified bool) (*Reader, error) {
	if l, ok := s.lookup(id); ok {
		if l.kind == kindList {
			payload, err := readPayload(l)
			if err != nil {
				return nil, fmt.Errorf("%w (blob %s)", err, id.Short())
			}
			refs, err := parseList(id, l.raw, payload)
			if err != nil {
				return nil, err
			}
			c := &chunked{s: s, id: id, refs: refs, size: l.raw, payload: payload}
			return &Reader{s: s, id: id, size: l.raw, ra: c, h: sha256.New(), trusted: s.listTrusted(id, payload)}, nil
		}
		data, err := s.readData(id)
		if err != nil {
			return nil, err
		}
		return &Reader{id: id, size: int64(len(data)), ra: bytes.NewReader(data), h: sha256.New()}, nil
	}
	f, err := os.Open(s.keptPath(id))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%w: %s", ErrNotFound, id)
	}
	if err != nil {
		return nil, fmt.Errorf("blobstore: open %s: %w", id.Short(), err)
	}
	fi, err := f.Stat()
	if err != nil || !fi.Mode().IsRegular() {
		f.Close()
		return nil, fmt.Errorf("%w: %s (not a regular file)", ErrCorrupt, id)
	}
	if verified {
		s.mu.RLock()
		ok := s.hashed[id]
		s.mu.RUnlock()
		if !ok {
			if err := verifyFile(f, id); err != nil {
				f.Close()
				return nil, err
			}
			s.mu.Lock()
			s.hashed[id] = true
			s.mu.Unlock()
		}
	}
	return &Reader{id: id, size: fi.Size(), ra: f, f: f, h: sha256.New()}, nil
}

// chunked reads a chunked blob at offsets, a chunk at a time, verified.
type chunked struct {
	s    *Store
	id   ID
	refs []chunkRef
	size int64
	// payload is the list record refs came from.
	payload []byte

	mu    sync.Mutex // guards cache
	cache [2]struct {
		i    int
		data []byte
	}
}

func (c *chunked) ReadAt(p []byte, off int64) (int, error) {
	if off < 0 {
		return 0, fmt.Errorf("blobstore: negative offset %d", off)
	}
	n := 0
	for n < len(p) && off < c.size {
		i := sort.Search(len(c.refs), func(i int) bool { return c.refs[i].off+c.refs[i].n > off })
		if ref := c.refs[i]; ref.isHole() {
			k := int(min(int64(len(p)-n), ref.off+ref.n-off))
			clear(p[n : n+k])
			n += k
			off += int64(k)
			continue
		}
		data, err := c.chunk(i)
		if err != nil {
			return n, err
		}
		k := copy(p[n:], data[off-c.refs[i].off:])
		n += k
		off += int64(k)
	}
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

// chunk is the content of chunk i, verified (the last two are kept).
func (c *chunked) chunk(i int) ([]byte, error) {
	c.mu.Lock()
	for _, e := range c.cache {
		if e.data != nil && e.i == i {
			c.mu.Unlock()
			return e.data, nil
		}
	}
	c.mu.Unlock()
	ref := c.refs[i]
	data, err := c.s.readData(ref.id)
	if err == nil && int64(len(data)) != ref.n {
		err = fmt.Errorf("%w: %s is %d bytes, the list says %d", ErrCorrupt, ref.id.Short(), len(data), ref.n)
	}
	if err != nil {
		return nil, &ChunkError{Blob: c.id, Chunk: ref.id, Err: err}
	}
	c.mu.Lock()
	c.cache[1] = c.cache[0]
	c.cache[0].i, c.cache[0].data = i, data
	c.mu.Unlock()
	return data, nil
}

// Get reads blob id whole, verified. For small blobs only. On error it
// returns no content: damaged bytes are never handed out.
func (s *Store) Get(id ID) ([]byte, error) {
	r, err := s.Open(id)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	b, err := io.ReadAll(r)
	if err != nil {
		return nil, err
	}
	return b, nil
}

func verifyFile(f *os.File, id ID) error {
	got, _, err := HashFile(f)
	if err != nil {
		return fmt.Errorf("blobstore: read %s: %w", id.Short(), err)
	}
	if got != id {
		return fmt.Errorf("%w: %s (content hashes to %s)", ErrCorrupt, id, got.Short())
	}
	return nil
}

// Verify reads blob id whole and reports ErrNotFound or ErrCorrupt; for a
// chunked blob every chunk is checked and the first bad one is named by a
// *ChunkError.
func (s *Store) Verify(id ID) error {
	r, err := s.Open(id)
	if err != nil {
		return err
	}
	defer r.Close()
	if c, ok := r.ra.(*chunked); ok && r.trusted {
		// A sparse blob found good before: its list is unchanged, so
		// checking each data chunk checks the content.
		for i, ref := range c.refs {
			if ref.isHole() {
				continue
			}
			if _, err := c.chunk(i); err != nil {
				return err
			}
		}
		return nil
	}
	_, err = io.Copy(io.Discard, struct{ io.Reader }{r})
	return err
}

// Kind is what a stored record is.
type Kind uint8

const (
	// Whole: a blob stored as one piece (in a pack, or loose).
	Whole Kind = iota
	// List: a chunked blob's list of chunks.
	List
)

// BlobInfo describes one stored record, for Walk.
type BlobInfo struct {
	ID   ID
	Kind Kind
	// Size is the content's length; Stored the bytes it takes on disk
	// (for a list, the list itself).
	Size, Stored int64
	// Loose: a file of its own (the layout before packs, or kept).
	Loose bool
	// Kept: a workspace file's inode linked into the store (Keep).
	Kept bool
}

// Walk calls fn for every record in the store: loose blobs, and in packs
// whole blobs, chunks (Kind Whole: a chunk is content like any other) and
// lists. Files that are not blobs (temporary files, strays) are skipped.
func (s *Store) Walk(fn func(BlobInfo) error) error {
	s.mu.RLock()
	infos := make([]BlobInfo, 0, len(s.index))
	for id, l := range s.index {
		b := BlobInfo{ID: id, Size: l.raw, Stored: headerSize + int64(l.stored) + trailerSize}
		if l.kind == kindList {
			b.Kind = List
		}
		infos = append(infos, b)
	}
	s.mu.RUnlock()
	for _, b := range infos {
		if err := fn(b); err != nil {
			return err
		}
	}
	return s.walkLoose(func(id ID, size int64, path string) error {
		return fn(BlobInfo{ID: id, Size: size, Stored: size, Loose: true, Kept: filepath.Base(filepath.Dir(path)) == keptDirName})
	})
}

// walkLoose calls fn for every blob in a file of its own (every kept
// blob), with its path.
func (s *Store) walkLoose(fn func(id ID, size int64, path string) error) error {
	kept, err := os.ReadDir(filepath.Join(s.dir, keptDirName))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("blobstore: walk: %w", err)
	}
	for _, e := range kept {
		id, err := ParseID(e.Name())
		if err != nil || !e.Type().IsRegular() {
			continue
		}
		info, err := e.Info()
		if err != nil {
			continue // removed meanwhile
		}
		if err := fn(id, info.Size(), s.keptPath(id)); err != nil {
			return err
		}
	}
	return nil
}

// Locate is where blob id's stored bytes are: a file, and the offset and
// length of the bytes in it (for a chunked blob, its list). For tools and
// tests that inspect or damage a store on purpose.
func (s *Store) Locate(id ID) (path string, off, n int64, err error) {
	if l, ok := s.lookup(id); ok {
		return l.p.path(s.packDir), l.off + headerSize, int64(l.stored), nil
	}
	if fi, err := os.Lstat(s.keptPath(id)); err == nil {
		return s.keptPath(id), 0, fi.Size(), nil
	}
	return "", 0, 0, fmt.Errorf("%w: %s", ErrNotFound, id)
}
