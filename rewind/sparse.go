package rewind

import (
	"bytes"
	"io"
	"os"
)

// A rewind never allocates more than the recorded data (SPEC, Trust): a
// file restored from a blob is written with every all-zero block left as
// a hole (the blob store records a sparse file's holes and reads them as
// zeros; a file captured before that, or one with real runs of zeros,
// comes back sparse too). So a user who can make a 10 GiB sparse file
// cannot make a rewind fill the disk, and the rewind writes only the data.

// sparseBlock is the unit of hole detection: a filesystem block.
const sparseBlock = 4096

// zeroBlock is one block of zeros to compare with.
var zeroBlock [sparseBlock]byte

// extentReader is a blob that can say where its data is (a sparse
// blob whose list is known good: blobstore.Reader.DataExtents).
type extentReader interface {
	io.ReaderAt
	Size() int64
	DataExtents() ([][2]int64, bool)
}

// writeSparse copies r into f (empty, at offset 0): blocks that are all
// zeros are skipped, not written, and f is truncated to the full length at
// the end, so they stay holes. It returns the bytes copied. A sparse blob
// is read only where it has data: its recorded holes cost nothing.
func writeSparse(f *os.File, r io.Reader) (int64, error) {
	buf := make([]byte, 1<<20)
	if x, ok := r.(extentReader); ok {
		if exts, ok := x.DataExtents(); ok {
			for _, e := range exts {
				for off := e[0]; off < e[1]; {
					b := buf[:min(int64(len(buf)), e[1]-off)]
					if _, err := x.ReadAt(b, off); err != nil {
						return off, err
					}
					if err := writeNonZero(f, b, off); err != nil {
						return off, err
					}
					off += int64(len(b))
				}
			}
			return x.Size(), f.Truncate(x.Size())
		}
	}
	var off int64
	for {
		n, err := io.ReadFull(r, buf)
		if n > 0 {
			if werr := writeNonZero(f, buf[:n], off); werr != nil {
				return off, werr
			}
			off += int64(n)
		}
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			break
		}
		if err != nil {
			return off, err
		}
	}
	return off, f.Truncate(off)
}

// writeNonZero writes the runs of b (which belongs at off) that are not
// whole blocks of zeros.
func writeNonZero(f *os.File, b []byte, off int64) error {
	start := -1 // where the current run of data blocks began
	for i := 0; i < len(b); i += sparseBlock {
		blk := b[i:min(i+sparseBlock, len(b))]
		zero := bytes.Equal(blk, zeroBlock[:len(blk)])
		switch {
		case !zero && start < 0:
			start = i
		case zero && start >= 0:
			if _, err := f.WriteAt(b[start:i], off+int64(start)); err != nil {
				return err
			}
			start = -1
		}
	}
	if start >= 0 {
		if _, err := f.WriteAt(b[start:], off+int64(start)); err != nil {
			return err
		}
	}
	return nil
}
