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

// fdatasync is the seam (STYLE rule 16) through which Sync flushes a blob;
// tests replace it to fail.
var fdatasync = durable.Fdatasync

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

	mu sync.Mutex // guards pending, pendingDirs, pendingFans, fans and known
	// pending holds blobs put without fsync since the last Sync, and
	// pendingDirs the directories whose entries are not yet durable.
	pending     map[ID]bool
	pendingDirs map[string]bool
	// fans holds the fan-out directories whose own entry in dir is known
	// durable; pendingFans those waiting for a Sync to be.
	fans        map[string]bool
	pendingFans map[string]bool
	// known remembers what this Store knows of a blob's file, so that
	// it hashes a blob at most once.
	known map[ID]knowledge
}

// knowledge is what a Store knows of a blob's file.
type knowledge uint8

const (
	// hashed: the file was hashed whole and matched (by OpenVerified or
	// a Put that found it present). A view that reopens the blob does not
	// hash it again.
	hashed knowledge = 1 << iota
	// wrote: this Store wrote the file, so a Put of the same content can
	// trust it without hashing. (OpenVerified still hashes it once: the
	// disk may have damaged it since.)
	wrote
)

// copyBufSize is Put's copy buffer: large enough that the per-call costs of
// read, write and hashing vanish, small enough to stay out of the way.
const copyBufSize = 256 << 10

// Open opens (creating if needed) the blob store in dir.
func Open(dir string, opts Options) (*Store, error) {
	_, statErr := os.Stat(dir)
	if err := os.MkdirAll(filepath.Join(dir, "tmp"), 0o700); err != nil {
		return nil, fmt.Errorf("blobstore: %w", err)
	}
	if errors.Is(statErr, fs.ErrNotExist) {
		// A new store: its entry in the parent must survive a power
		// loss, or every blob in it goes with it.
		if err := durable.SyncDir(filepath.Dir(filepath.Clean(dir))); err != nil {
			return nil, fmt.Errorf("blobstore: %w", err)
		}
	}
	return &Store{
		dir:         dir,
		opts:        opts,
		pending:     map[ID]bool{},
		pendingDirs: map[string]bool{},
		fans:        map[string]bool{},
		pendingFans: map[string]bool{},
		known:       map[ID]knowledge{},
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
// present is not written again. The content never sits whole in memory: it
// streams into a temporary file in DIR/tmp/, hashed on the way, which is
// then renamed to its name.
//
// With Options.Sync, when Put returns the blob is durable, including when it
// was already present (it may have been put by a batch-mode writer that
// crashed before its Sync).
func (s *Store) Put(r io.Reader) (ID, int64, error) {
	f, err := durable.CreateTemp(filepath.Join(s.dir, "tmp"), "blob", 0o600)
	if errors.Is(err, fs.ErrNotExist) { // tmp/ removed behind our back
		if err = os.MkdirAll(filepath.Join(s.dir, "tmp"), 0o700); err == nil {
			f, err = durable.CreateTemp(filepath.Join(s.dir, "tmp"), "blob", 0o600)
		}
	}
	if err != nil {
		return ID{}, 0, fmt.Errorf("blobstore: put: %w", err)
	}
	id, n, err := s.write(f, r)
	if err != nil {
		f.Close()
		os.Remove(f.Name())
		return ID{}, 0, err
	}
	fan := filepath.Dir(s.Path(id))
	if err := s.mkdirFan(fan); err != nil {
		f.Close()
		os.Remove(f.Name())
		return ID{}, 0, err
	}
	if s.keepPresent(id, n) {
		f.Close()
		os.Remove(f.Name())
		return id, n, nil
	}
	if err := durable.Commit(f, fan, id.String(), s.opts.Sync); err != nil {
		return ID{}, 0, fmt.Errorf("blobstore: put %s: %w", id.Short(), err)
	}
	s.mu.Lock()
	s.known[id] |= wrote
	if !s.opts.Sync {
		s.pending[id] = true
		s.pendingDirs[fan] = true
	}
	s.mu.Unlock()
	return id, n, nil
}

// write copies r into the temporary file f, hashing it, within MaxSize.
func (s *Store) write(f *os.File, r io.Reader) (ID, int64, error) {
	h := sha256.New()
	src := r
	if s.opts.MaxSize > 0 {
		src = io.LimitReader(r, s.opts.MaxSize+1)
	}
	// Not io.Copy: a reader with WriteTo would bypass the buffer size,
	// and f's ReadFrom the hash.
	buf := make([]byte, copyBufSize)
	var n int64
	for {
		k, rerr := src.Read(buf)
		if k > 0 {
			h.Write(buf[:k])
			if _, err := f.Write(buf[:k]); err != nil {
				return ID{}, 0, fmt.Errorf("blobstore: put: %w", err)
			}
			n += int64(k)
			if s.opts.MaxSize > 0 && n > s.opts.MaxSize {
				return ID{}, 0, fmt.Errorf("blobstore: put: %w (%d bytes)", ErrTooLarge, s.opts.MaxSize)
			}
		}
		if rerr == io.EOF {
			break
		}
		if rerr != nil {
			return ID{}, 0, fmt.Errorf("blobstore: put: read: %w", rerr)
		}
	}
	var id ID
	h.Sum(id[:0])
	return id, n, nil
}

// keepPresent reports whether blob id, n bytes, is already in the store and
// can stand for the copy Put just wrote: the file holds the content (known,
// or hashed now, once per Store) and is durable (with Options.Sync) or
// pending for the next Sync. Otherwise (absent, damaged, or an fsync that
// failed) Put renames its fresh copy over it.
func (s *Store) keepPresent(id ID, n int64) bool {
	path := s.Path(id)
	fi, err := os.Lstat(path)
	if err != nil || !fi.Mode().IsRegular() || fi.Size() != n {
		return false
	}
	s.mu.Lock()
	k := s.known[id]
	s.mu.Unlock()
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	if k == 0 {
		if s.verifyFile(f, id) != nil {
			return false
		}
		k = hashed
	}
	if s.opts.Sync && k&wrote == 0 {
		// Not written by this Store (which made what it wrote durable):
		// it may come from a batch-mode writer that crashed before its
		// Sync. Cheap when it is durable already: nothing to write.
		if durable.Fdatasync(f) != nil || durable.SyncDir(filepath.Dir(path)) != nil {
			return false
		}
	}
	s.mu.Lock()
	s.known[id] |= k
	if !s.opts.Sync {
		s.pending[id] = true
		s.pendingDirs[filepath.Dir(path)] = true
	}
	s.mu.Unlock()
	return true
}

// mkdirFan creates a fan-out directory if needed and makes sure its entry in
// the store directory is durable (with Options.Sync) or pending: checked
// once per fan-out directory and Store, whoever created it. (Another Put may
// have just created it without having synced the store directory yet.)
func (s *Store) mkdirFan(fan string) error {
	s.mu.Lock()
	known := s.fans[fan]
	s.mu.Unlock()
	if known {
		return nil
	}
	if err := os.Mkdir(fan, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("blobstore: %w", err)
	}
	if s.opts.Sync {
		if err := durable.SyncDir(s.dir); err != nil {
			return fmt.Errorf("blobstore: %w", err)
		}
		s.mu.Lock()
		s.fans[fan] = true
		s.mu.Unlock()
		return nil
	}
	s.mu.Lock()
	s.pendingDirs[s.dir] = true
	s.pendingFans[fan] = true
	s.mu.Unlock()
	return nil
}

// Sync makes every blob put since the last Sync durable: each file, then each
// directory that gained an entry. On error what is not yet durable stays
// pending for the next Sync.
//
// A blob whose fdatasync fails is not fdatasynced again: after a writeback
// error Linux may drop the pages it could not write and report success next
// time. Sync rewrites it instead, from its own content (verified against its
// name) into a fresh file that it fsyncs and renames over it.
func (s *Store) Sync() error {
	s.mu.Lock()
	ids := s.pending
	dirs := s.pendingDirs
	fans := s.pendingFans
	s.pending = map[ID]bool{}
	s.pendingDirs = map[string]bool{}
	s.pendingFans = map[string]bool{}
	s.mu.Unlock()
	restore := func() {
		s.mu.Lock()
		for id := range ids {
			s.pending[id] = true
		}
		for d := range dirs {
			s.pendingDirs[d] = true
		}
		for d := range fans {
			s.pendingFans[d] = true
		}
		s.mu.Unlock()
	}
	for id := range ids {
		if err := s.syncBlob(id); err != nil {
			restore()
			return err
		}
		delete(ids, id)
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
	s.mu.Lock()
	for d := range fans {
		s.fans[d] = true
	}
	s.mu.Unlock()
	return nil
}

// syncBlob makes blob id's content durable (see Sync). A blob removed since
// it was put needs nothing.
func (s *Store) syncBlob(id ID) error {
	f, err := os.Open(s.Path(id))
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("blobstore: sync %s: %w", id.Short(), err)
	}
	err = fdatasync(f)
	if err == nil {
		f.Close()
		return nil
	}
	defer f.Close()
	tmp, terr := durable.CreateTemp(filepath.Join(s.dir, "tmp"), "blob", 0o600)
	if terr != nil {
		return fmt.Errorf("blobstore: sync %s: %w (and cannot rewrite it: %w)", id.Short(), err, terr)
	}
	got, _, werr := s.write(tmp, io.NewSectionReader(f, 0, 1<<62))
	if werr == nil && got != id {
		werr = fmt.Errorf("%w: %s (content hashes to %s)", ErrCorrupt, id, got.Short())
	}
	if werr != nil {
		tmp.Close()
		os.Remove(tmp.Name())
		return fmt.Errorf("blobstore: sync %s: %w (and cannot rewrite it: %w)", id.Short(), err, werr)
	}
	if cerr := durable.Commit(tmp, filepath.Dir(s.Path(id)), id.String(), true); cerr != nil {
		return fmt.Errorf("blobstore: sync %s: %w (and cannot rewrite it: %w)", id.Short(), err, cerr)
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
	ok := s.known[id]&hashed != 0
	s.mu.Unlock()
	if ok {
		return f, nil
	}
	if err := s.verifyFile(f, id); err != nil {
		f.Close()
		return nil, err
	}
	s.mu.Lock()
	s.known[id] |= hashed
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
			if err != nil || e.Name()[:2] != fan.Name() || !e.Type().IsRegular() {
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
	delete(s.known, id)
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
	var first error
	for _, e := range ents {
		if err := os.Remove(filepath.Join(tmpDir, e.Name())); err != nil && !errors.Is(err, fs.ErrNotExist) && first == nil {
			first = fmt.Errorf("blobstore: clean: %w", err)
		}
	}
	return first
}
