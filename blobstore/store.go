package blobstore

import (
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

	"github.com/zerofs/zerofs/internal/durable"
)

// Errors the caller can test for with errors.Is.
var (
	// ErrCorrupt: a blob's content does not hash to its name.
	ErrCorrupt = errors.New("blobstore: blob content does not match its hash")
	// ErrNotFound: no blob with that ID.
	ErrNotFound = errors.New("blobstore: blob not found")
	// ErrTooLarge: the content is larger than Options.MaxSize.
	ErrTooLarge = errors.New("blobstore: content larger than the configured cap")
)

// Options configure a Store.
type Options struct {
	// Sync makes Put fsync each blob and its directory before returning.
	// Without it, call Sync to make puts durable.
	Sync bool
	// MaxSize, when > 0, refuses content larger than this many bytes with
	// ErrTooLarge. Zero means no cap.
	MaxSize int64
}

// Store is a directory of blobs. It is safe for concurrent use.
type Store struct {
	dir  string
	opts Options

	mu sync.Mutex // guards pending and verified
	// pending holds blobs put without fsync since the last Sync, and the
	// fan-out directories whose entries are not yet durable.
	pending     map[ID]bool
	pendingDirs map[string]bool
	// verified remembers blobs hashed whole by OpenVerified, so a view that
	// reopens a blob does not hash it again.
	verified map[ID]bool
}

// Open opens (creating if needed) the blob store in dir.
func Open(dir string, opts Options) (*Store, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("blobstore: %w", err)
	}
	return &Store{
		dir:         dir,
		opts:        opts,
		pending:     map[ID]bool{},
		pendingDirs: map[string]bool{},
		verified:    map[ID]bool{},
	}, nil
}

// Dir is the store's directory.
func (s *Store) Dir() string { return s.dir }

// Path is where blob id lives (it may not exist).
func (s *Store) Path(id ID) string {
	h := id.String()
	return filepath.Join(s.dir, h[:2], h)
}

// Has reports whether blob id exists (it does not verify it).
func (s *Store) Has(id ID) bool {
	_, err := os.Lstat(s.Path(id))
	return err == nil
}

// Put streams r into the store and returns its ID and size. Content already
// present is not written again. The content never sits whole in memory.
func (s *Store) Put(r io.Reader) (ID, int64, error) {
	tmpDir := filepath.Join(s.dir, "tmp")
	if err := os.MkdirAll(tmpDir, 0o700); err != nil {
		return ID{}, 0, fmt.Errorf("blobstore: %w", err)
	}
	f, err := durable.CreateTemp(tmpDir, "blob", 0o600)
	if err != nil {
		return ID{}, 0, fmt.Errorf("blobstore: %w", err)
	}
	tmp := f.Name()
	h := sha256.New()
	var src io.Reader = r
	if s.opts.MaxSize > 0 {
		src = io.LimitReader(r, s.opts.MaxSize+1)
	}
	n, err := io.Copy(io.MultiWriter(f, h), src)
	if err == nil && s.opts.MaxSize > 0 && n > s.opts.MaxSize {
		err = fmt.Errorf("%w (%d bytes)", ErrTooLarge, s.opts.MaxSize)
	}
	if err != nil {
		f.Close()
		os.Remove(tmp)
		return ID{}, 0, fmt.Errorf("blobstore: put: %w", err)
	}
	var id ID
	h.Sum(id[:0])
	if s.Has(id) {
		f.Close()
		os.Remove(tmp)
		return id, n, nil
	}
	fan := filepath.Dir(s.Path(id))
	if err := s.mkdirFan(fan); err != nil {
		f.Close()
		os.Remove(tmp)
		return ID{}, 0, err
	}
	if err := durable.Commit(f, fan, id.String(), s.opts.Sync); err != nil {
		return ID{}, 0, fmt.Errorf("blobstore: put %s: %w", id.Short(), err)
	}
	if !s.opts.Sync {
		s.mu.Lock()
		s.pending[id] = true
		s.pendingDirs[fan] = true
		s.mu.Unlock()
	}
	return id, n, nil
}

// mkdirFan creates a fan-out directory, making its entry durable.
func (s *Store) mkdirFan(fan string) error {
	if _, err := os.Stat(fan); err == nil {
		return nil
	}
	if err := os.Mkdir(fan, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("blobstore: %w", err)
	}
	if s.opts.Sync {
		return durable.SyncDir(s.dir)
	}
	s.mu.Lock()
	s.pendingDirs[s.dir] = true
	s.mu.Unlock()
	return nil
}

// Sync makes every blob put since the last Sync durable: each file, then each
// directory that gained an entry.
func (s *Store) Sync() error {
	s.mu.Lock()
	ids := s.pending
	dirs := s.pendingDirs
	s.pending = map[ID]bool{}
	s.pendingDirs = map[string]bool{}
	s.mu.Unlock()
	restore := func() {
		s.mu.Lock()
		for id := range ids {
			s.pending[id] = true
		}
		for d := range dirs {
			s.pendingDirs[d] = true
		}
		s.mu.Unlock()
	}
	for id := range ids {
		f, err := os.Open(s.Path(id))
		if err != nil {
			restore()
			return fmt.Errorf("blobstore: sync %s: %w", id.Short(), err)
		}
		err = durable.Fdatasync(f)
		f.Close()
		if err != nil {
			restore()
			return fmt.Errorf("blobstore: sync %s: %w", id.Short(), err)
		}
	}
	// Fan-out directories before the store directory that names them.
	names := make([]string, 0, len(dirs))
	for d := range dirs {
		names = append(names, d)
	}
	sort.Slice(names, func(i, j int) bool { return len(names[i]) > len(names[j]) })
	for _, d := range names {
		if err := durable.SyncDir(d); err != nil {
			restore()
			return fmt.Errorf("blobstore: sync: %w", err)
		}
	}
	return nil
}

// Open returns a reader of blob id that verifies the content as it streams:
// the read that reaches the end fails with ErrCorrupt if the hash differs.
func (s *Store) Open(id ID) (io.ReadCloser, error) {
	f, err := os.Open(s.Path(id))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%w: %s", ErrNotFound, id)
	}
	if err != nil {
		return nil, fmt.Errorf("blobstore: open %s: %w", id.Short(), err)
	}
	return &verifyingReader{f: f, id: id, h: sha256.New()}, nil
}

type verifyingReader struct {
	f  *os.File
	id ID
	h  hash.Hash
}

func (v *verifyingReader) Read(p []byte) (int, error) {
	n, err := v.f.Read(p)
	v.h.Write(p[:n])
	if err == io.EOF {
		var got ID
		v.h.Sum(got[:0])
		if got != v.id {
			return n, fmt.Errorf("%w: %s (content hashes to %s)", ErrCorrupt, v.id, got.Short())
		}
	}
	return n, err
}

func (v *verifyingReader) Close() error { return v.f.Close() }

// Get reads blob id whole, verified. For small blobs only.
func (s *Store) Get(id ID) ([]byte, error) {
	r, err := s.Open(id)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	return io.ReadAll(r)
}

// OpenVerified hashes blob id whole (once per Store) and returns the open file
// for random access. Use it where reads come at offsets (a view served over
// FUSE); use Open for streaming.
func (s *Store) OpenVerified(id ID) (*os.File, error) {
	f, err := os.Open(s.Path(id))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%w: %s", ErrNotFound, id)
	}
	if err != nil {
		return nil, fmt.Errorf("blobstore: open %s: %w", id.Short(), err)
	}
	s.mu.Lock()
	ok := s.verified[id]
	s.mu.Unlock()
	if ok {
		return f, nil
	}
	if err := s.verifyFile(f, id); err != nil {
		f.Close()
		return nil, err
	}
	s.mu.Lock()
	s.verified[id] = true
	s.mu.Unlock()
	return f, nil
}

func (s *Store) verifyFile(f *os.File, id ID) error {
	h := sha256.New()
	if _, err := io.Copy(h, io.NewSectionReader(f, 0, 1<<62)); err != nil {
		return fmt.Errorf("blobstore: read %s: %w", id.Short(), err)
	}
	var got ID
	h.Sum(got[:0])
	if got != id {
		return fmt.Errorf("%w: %s (content hashes to %s)", ErrCorrupt, id, got.Short())
	}
	return nil
}

// Verify hashes blob id whole and reports ErrNotFound or ErrCorrupt.
func (s *Store) Verify(id ID) error {
	f, err := os.Open(s.Path(id))
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("%w: %s", ErrNotFound, id)
	}
	if err != nil {
		return fmt.Errorf("blobstore: open %s: %w", id.Short(), err)
	}
	defer f.Close()
	return s.verifyFile(f, id)
}

// BlobInfo describes one stored blob, for Walk.
type BlobInfo struct {
	ID   ID
	Size int64
}

// Walk calls fn for every blob in the store, in no particular order. Files
// that are not blobs (temporary files, strays) are skipped.
func (s *Store) Walk(fn func(BlobInfo) error) error {
	fans, err := os.ReadDir(s.dir)
	if err != nil {
		return fmt.Errorf("blobstore: walk: %w", err)
	}
	for _, fan := range fans {
		if !fan.IsDir() || len(fan.Name()) != 2 {
			continue
		}
		ents, err := os.ReadDir(filepath.Join(s.dir, fan.Name()))
		if err != nil {
			return fmt.Errorf("blobstore: walk: %w", err)
		}
		for _, e := range ents {
			id, err := ParseID(e.Name())
			if err != nil || e.Name()[:2] != fan.Name() {
				continue
			}
			info, err := e.Info()
			if err != nil {
				continue // removed meanwhile
			}
			if err := fn(BlobInfo{ID: id, Size: info.Size()}); err != nil {
				return err
			}
		}
	}
	return nil
}

// Remove deletes blob id (for gc). A missing blob is not an error.
func (s *Store) Remove(id ID) error {
	p := s.Path(id)
	if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("blobstore: remove %s: %w", id.Short(), err)
	}
	s.mu.Lock()
	delete(s.verified, id)
	delete(s.pending, id)
	s.mu.Unlock()
	return nil
}

// CleanTemp removes temporary files left by a crash in the middle of a Put.
// Call it when no Put can be running (at open, under the store lock).
func (s *Store) CleanTemp() error {
	tmpDir := filepath.Join(s.dir, "tmp")
	ents, err := os.ReadDir(tmpDir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("blobstore: %w", err)
	}
	for _, e := range ents {
		os.Remove(filepath.Join(tmpDir, e.Name()))
	}
	return nil
}
