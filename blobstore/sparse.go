package blobstore

import (
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"io"
	"os"
	"sync/atomic"
	"time"

	"github.com/restic/chunker"
	"golang.org/x/sys/unix"
)

// Sparse files. A file's holes (ranges the filesystem allocated nothing
// for, found with SEEK_DATA/SEEK_HOLE) are never read, chunked, compressed
// or stored: a chunk list names a hole as an entry with the all-zero ID
// (holeID, no sha256 of real content is all zeros) and the hole's length,
// which may be up to 4 GiB-1; a larger hole takes several entries. Only the
// data extents are read and cut into chunks. A blob's ID is still the
// sha256 of its whole logical content: the holes are hashed as zeros from
// memory, so capturing a 10 GiB file with one byte of data reads one page
// and hashes 10 GiB at CPU speed, and stores one small chunk and a list.
// A writer need not wait for that hash: StashCopy (stash.go) copies a
// large file that is mostly holes by its data alone, and Name stores the
// copy as such a list after the request.
// Reads of a hole entry are zeros, never a record read; prune, verify and
// Chunks skip hole entries (they name no record).
//
// Restoring sparsely is the writer's part (rewind writes zero blocks as
// holes); Reader.Holes tells it where the recorded holes are.
//
// Hashing the holes is the one cost that grows with the logical size, so
// it is paid once per content, not once per use:
//   - goodLists: a sparse blob's list that this Store wrote, or read whole
//     and found to hash to the blob's ID, is remembered by the sha256 of
//     its record. Opening the blob again finds the record unchanged in
//     O(list), and then a Reader checks only the chunks it reads (each
//     against its own hash): Verify and a restore cost O(data).
//   - fileIDs: what a sparse workspace file hashed to, under its device,
//     inode, size, mtime and ctime. Any change of its content changes its
//     ctime (and a write through the mount is a pwrite by the daemon), so
//     while those five are unchanged the ID is still the file's; an entry
//     is kept only when the ctime is older than the hash's start by more
//     than the kernel's timestamp granularity (racyMargin), so a write
//     during the hash cannot leave the ctime it saw. A rewind's
//     compare-before-write and its capture of the same file then hash it
//     once, and a capture whose ID is known reads only the data.

// holeID marks a hole entry in a chunk list.
var holeID ID

// maxHoleEntry is the longest hole one list entry names (its length is a
// uint32); a variable so tests can split holes without making 4 GiB files.
var maxHoleEntry int64 = 1<<32 - 1

// isHole reports whether r is a hole entry.
func (r chunkRef) isHole() bool { return r.id == holeID }

// zeros is a page of zeros to hash holes from.
var zeros = make([]byte, 1<<20)

// wholeHashed counts the bytes hashed as holes (hashZeros) or to check a
// whole blob as Read streams it: the costs that grow with a sparse file's
// logical size, not its data (tests read it).
var wholeHashed atomic.Int64

// hashZeros writes n zero bytes to h.
func hashZeros(h hash.Hash, n int64) {
	wholeHashed.Add(n)
	for n > 0 {
		k := min(n, int64(len(zeros)))
		h.Write(zeros[:k])
		n -= k
	}
}

// extent is a range [off, off+n) of a file that holds data.
type extent struct{ off, n int64 }

// dataExtents lists f's data extents up to size, and whether f has any
// hole below size. Where the filesystem does not answer SEEK_DATA, the
// whole file is one extent.
// The file's offset is left where it was.
func dataExtents(f *os.File, size int64) ([]extent, bool) {
	fd := int(f.Fd())
	if at, err := unix.Seek(fd, 0, io.SeekCurrent); err == nil {
		defer unix.Seek(fd, at, io.SeekStart)
	}
	var exts []extent
	for off := int64(0); off < size; {
		d, err := unix.Seek(fd, off, unix.SEEK_DATA)
		if errors.Is(err, unix.ENXIO) {
			break // only a hole from off to the end
		}
		if err != nil {
			return []extent{{0, size}}, false
		}
		if d >= size {
			break
		}
		h, err := unix.Seek(fd, d, unix.SEEK_HOLE)
		if err != nil {
			return []extent{{0, size}}, false
		}
		h = min(h, size)
		exts = append(exts, extent{d, h - d})
		off = h
	}
	var data int64
	for _, e := range exts {
		data += e.n
	}
	return exts, data < size
}

// HashFile is the sha256 and length of f's content (from its start),
// reading only its data extents and hashing its holes as zeros.
func HashFile(f *os.File) (ID, int64, error) {
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		return ID{}, 0, err
	}
	return hashFileStat(f, &st)
}

// hashSmall is the size up to which hashFileStat reads a file whole, in
// one pread, rather than looking for holes first: holes read as zeros,
// which is what they hash as, so only the count of system calls changes
// (two lseeks, a pread and a pread at the end, to one pread, for each file
// of an rm -rf the namer hashes).
const hashSmall = 64 << 10

// hashSmallFd hashes the file open at fd, of st.Size <= hashSmall bytes,
// read whole; grew says it was longer than st.Size (nothing is hashed
// then: the caller reads it as a large one).
func hashSmallFd(fd int, st *unix.Stat_t) (id ID, n64 int64, grew bool, err error) {
	buf := make([]byte, st.Size+1)
	n := 0
	for n < len(buf) {
		k, err := unix.Pread(fd, buf[n:], int64(n))
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return ID{}, 0, false, err
		}
		n += k
		if k == 0 || (k < len(buf)-(n-k) && n >= int(st.Size)) {
			break // a short read of a regular file is its end
		}
	}
	if n > int(st.Size) {
		return ID{}, 0, true, nil
	}
	return sha256.Sum256(buf[:n]), int64(n), false, nil
}

// hashFileStat is HashFile of f, whose fstat is st.
func hashFileStat(f *os.File, st *unix.Stat_t) (ID, int64, error) {
	if st.Size <= hashSmall {
		id, n, grew, err := hashSmallFd(int(f.Fd()), st)
		if err != nil || !grew {
			return id, n, err
		}
		// It grew since its fstat: read it as a large one.
	}
	h := sha256.New()
	exts, sparse := dataExtents(f, st.Size)
	if !sparse {
		n, err := io.Copy(h, io.NewSectionReader(f, 0, 1<<62))
		var id ID
		h.Sum(id[:0])
		return id, n, err
	}
	var pos int64
	for _, e := range exts {
		hashZeros(h, e.off-pos)
		if _, err := io.Copy(h, io.NewSectionReader(f, e.off, e.n)); err != nil {
			return ID{}, 0, err
		}
		pos = e.off + e.n
	}
	hashZeros(h, st.Size-pos)
	// The file must not have grown meanwhile: what was hashed is its
	// content only if nothing follows.
	var b [1]byte
	if k, _ := f.ReadAt(b[:], st.Size); k > 0 {
		return ID{}, 0, fmt.Errorf("blobstore: %s grew while it was hashed", f.Name())
	}
	var id ID
	h.Sum(id[:0])
	return id, st.Size, nil
}

// sparseFile reports whether r is a file over limit bytes with holes, and
// if so its size and data extents.
func sparseFile(r io.Reader, limit int64) (*os.File, int64, []extent, bool) {
	f, ok := r.(*os.File)
	if !ok {
		return nil, 0, nil, false
	}
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFREG || st.Size <= limit {
		return nil, 0, nil, false
	}
	// Put reads from the file's current offset; only a file read from its
	// start is captured by extents.
	if off, err := f.Seek(0, io.SeekCurrent); err != nil || off != 0 {
		return nil, 0, nil, false
	}
	exts, sparse := dataExtents(f, st.Size)
	if !sparse {
		return nil, 0, nil, false
	}
	return f, st.Size, exts, true
}

// errChangedUnderPut says a file whose ID was known changed while Put
// read it: Put stores it again, hashing what it reads.
var errChangedUnderPut = errors.New("blobstore: file changed while it was stored")

// putFile is Put of a sparse file: when fileIDs knows what it hashes to and
// the store holds that blob, nothing is read; when it knows only the ID,
// only the data is read (and the file must be unchanged at the end);
// otherwise the data is read and the holes hashed as zeros.
func (s *Store) putFile(f *os.File, size int64, exts []extent) (ID, int64, []ID, error) {
	k, err := statKey(f)
	if err != nil {
		return ID{}, 0, nil, fmt.Errorf("blobstore: put: %w", err)
	}
	unchanged := func() bool {
		k2, err := statKey(f)
		return err == nil && k2 == k
	}
	if id, ok := s.knownFile(k); ok && k.size == size {
		if _, in := s.lookup(id); in {
			return id, size, []ID{id}, nil
		}
		got, n, settle, err := s.putSparse(f, size, exts, &id, unchanged)
		if !errors.Is(err, errChangedUnderPut) {
			return got, n, settle, err
		}
		exts, _ = dataExtents(f, size) // changed meanwhile: its extents too, maybe
	}
	start := time.Now()
	id, n, settle, err := s.putSparse(f, size, exts, nil, nil)
	if err == nil && unchanged() {
		s.rememberFile(k, id, start)
	}
	return id, n, settle, err
}

// putSparse stores a sparse file: each data extent cut into chunks, each
// hole a hole entry. It returns what Put must make durable. With known,
// the file's ID is known and nothing is hashed: the list is stored under
// it only if unchanged reports the file unchanged once its data is read.
func (s *Store) putSparse(f *os.File, size int64, exts []extent, known *ID, unchanged func() bool) (ID, int64, []ID, error) {
	if s.opts.MaxSize > 0 && size > s.opts.MaxSize {
		return ID{}, 0, nil, fmt.Errorf("blobstore: put: %w (%d bytes)", ErrTooLarge, s.opts.MaxSize)
	}
	h := sha256.New()
	if known != nil {
		h = discardHash{}
	}
	buf := make([]byte, maxChunk)
	var list []byte
	var ids []ID
	var pos int64
	hole := func(n int64) {
		if known == nil {
			hashZeros(h, n)
		}
		for n > 0 {
			k := min(n, maxHoleEntry)
			list = append(list, holeID[:]...)
			list = binary.LittleEndian.AppendUint32(list, uint32(k))
			n -= k
		}
	}
	for _, e := range exts {
		hole(e.off - pos)
		ch := chunker.NewWithBoundaries(io.TeeReader(io.NewSectionReader(f, e.off, e.n), h), chunkPol, minChunk, maxChunk)
		ch.SetAverageBits(averageBits)
		var got int64
		var err error
		if list, ids, got, err = s.putChunks(ch, buf, list, ids, 0); err != nil {
			return ID{}, 0, nil, err
		}
		if got != e.n {
			return ID{}, 0, nil, fmt.Errorf("blobstore: put: %s: read %d bytes of a %d-byte extent (the file shrank)", f.Name(), got, e.n)
		}
		pos = e.off + e.n
	}
	hole(size - pos)
	var id ID
	if known != nil {
		if !unchanged() {
			return ID{}, 0, nil, errChangedUnderPut
		}
		id = *known
	} else {
		h.Sum(id[:0])
	}
	if _, ok := s.lookup(id); !ok {
		if err := s.appendRecord(id, kindList, compNone, size, list); err != nil {
			return ID{}, 0, nil, err
		}
		s.trustList(id, list)
	}
	return id, size, append(ids, id), nil
}

// discardHash stands in for the hash when the ID is known.
type discardHash struct{}

func (discardHash) Write(p []byte) (int, error) { return len(p), nil }
func (discardHash) Sum(b []byte) []byte         { return b }
func (discardHash) Reset()                      {}
func (discardHash) Size() int                   { return sha256.Size }
func (discardHash) BlockSize() int              { return sha256.BlockSize }

// Holes lists the ranges of the blob that its chunk list records as holes
// (none for a blob stored whole); a writer restoring the blob may leave
// them unallocated.
func (r *Reader) Holes() [][2]int64 {
	c, ok := r.ra.(*chunked)
	if !ok {
		return nil
	}
	var out [][2]int64
	for _, ref := range c.refs {
		if ref.isHole() {
			if k := len(out); k > 0 && out[k-1][1] == ref.off {
				out[k-1][1] = ref.off + ref.n
				continue
			}
			out = append(out, [2]int64{ref.off, ref.off + ref.n})
		}
	}
	return out
}

// racyMargin is how much older than the start of a hash a file's ctime
// must be for fileIDs to keep what it hashed to: more than a kernel tick
// (the coarse clock timestamps come from).
const racyMargin = 50 * time.Millisecond

// maxFileIDs bounds fileIDs; past it the map starts over.
const maxFileIDs = 4096

// fileKey is what identifies a file's content without reading it.
type fileKey struct {
	dev, ino     uint64
	size         int64
	mtime, ctime unix.Timespec
}

func keyOf(st *unix.Stat_t) fileKey {
	return fileKey{dev: st.Dev, ino: st.Ino, size: st.Size, mtime: st.Mtim, ctime: st.Ctim}
}

// statKey is f's fileKey.
func statKey(f *os.File) (fileKey, error) {
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		return fileKey{}, err
	}
	return keyOf(&st), nil
}

// knownFile is what the file at k hashed to, if fileIDs holds it.
func (s *Store) knownFile(k fileKey) (ID, bool) {
	s.mu.RLock()
	id, ok := s.fileIDs[k]
	s.mu.RUnlock()
	return id, ok
}

// rememberFile keeps id for the file at k (whose hash began at start) if
// its ctime is safely older than start.
func (s *Store) rememberFile(k fileKey, id ID, start time.Time) {
	if time.Unix(k.ctime.Unix()).After(start.Add(-racyMargin)) {
		return
	}
	s.mu.Lock()
	if len(s.fileIDs) >= maxFileIDs {
		clear(s.fileIDs)
	}
	s.fileIDs[k] = id
	s.mu.Unlock()
}

// HashFile is HashFile(f) for a workspace file, remembered for a sparse
// one (see fileIDs above): hashing the same unchanged sparse file again,
// or storing it with Put, reads only its data.
func (s *Store) HashFile(f *os.File) (ID, int64, error) {
	k, err := statKey(f)
	if err != nil {
		return ID{}, 0, err
	}
	if id, ok := s.knownFile(k); ok {
		return id, k.size, nil
	}
	start := time.Now()
	id, n, err := HashFile(f)
	if err != nil {
		return ID{}, 0, err
	}
	if _, sparse := dataExtents(f, n); sparse {
		if k2, err := statKey(f); err == nil && k2 == k && n == k.size {
			s.rememberFile(k, id, start)
		}
	}
	return id, n, nil
}

// trustList remembers that the list record payload names blob id's
// content correctly.
func (s *Store) trustList(id ID, payload []byte) {
	sum := sha256.Sum256(payload)
	s.mu.Lock()
	s.goodLists[id] = sum
	s.mu.Unlock()
}

// listTrusted reports whether payload is the list record of id that this
// Store found good.
func (s *Store) listTrusted(id ID, payload []byte) bool {
	s.mu.RLock()
	sum, ok := s.goodLists[id]
	s.mu.RUnlock()
	return ok && sum == sha256.Sum256(payload)
}

// DataExtents lists the ranges of the blob that are not recorded holes,
// when the blob is sparse and its list is known good (so that reading
// just those ranges with ReadAt, each chunk checked against its own hash,
// reads the blob's content); ok is false otherwise, and the caller reads
// the whole blob with Read.
func (r *Reader) DataExtents() (exts [][2]int64, ok bool) {
	c, isList := r.ra.(*chunked)
	if !isList || !r.trusted {
		return nil, false
	}
	for _, ref := range c.refs {
		if ref.isHole() {
			continue
		}
		if k := len(exts); k > 0 && exts[k-1][1] == ref.off {
			exts[k-1][1] = ref.off + ref.n
			continue
		}
		exts = append(exts, [2]int64{ref.off, ref.off + ref.n})
	}
	return exts, true
}

// sparse reports whether the list has a hole entry.
func (c *chunked) sparse() bool {
	for _, ref := range c.refs {
		if ref.isHole() {
			return true
		}
	}
	return false
}
