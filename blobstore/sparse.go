package blobstore

import (
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"io"
	"os"

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
// Reads of a hole entry are zeros, never a record read; prune, verify and
// Chunks skip hole entries (they name no record).
//
// Restoring sparsely is the writer's part (rewind writes zero blocks as
// holes); Reader.Holes tells it where the recorded holes are.

// holeID marks a hole entry in a chunk list.
var holeID ID

// maxHoleEntry is the longest hole one list entry names (its length is a
// uint32); a variable so tests can split holes without making 4 GiB files.
var maxHoleEntry int64 = 1<<32 - 1

// isHole reports whether r is a hole entry.
func (r chunkRef) isHole() bool { return r.id == holeID }

// zeros is a page of zeros to hash holes from.
var zeros = make([]byte, 1<<20)

// hashZeros writes n zero bytes to h.
func hashZeros(h hash.Hash, n int64) {
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

// putSparse stores a sparse file: each data extent cut into chunks, each
// hole a hole entry. It returns what Put must make durable.
func (s *Store) putSparse(f *os.File, size int64, exts []extent) (ID, int64, []ID, error) {
	if s.opts.MaxSize > 0 && size > s.opts.MaxSize {
		return ID{}, 0, nil, fmt.Errorf("blobstore: put: %w (%d bytes)", ErrTooLarge, s.opts.MaxSize)
	}
	h := sha256.New()
	buf := make([]byte, maxChunk)
	var list []byte
	var ids []ID
	var pos int64
	hole := func(n int64) {
		hashZeros(h, n)
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
	h.Sum(id[:0])
	if _, ok := s.lookup(id); !ok {
		if err := s.appendRecord(id, kindList, compNone, size, list); err != nil {
			return ID{}, 0, nil, err
		}
	}
	return id, size, append(ids, id), nil
}

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
