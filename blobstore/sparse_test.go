package blobstore

import (
	"bytes"
	"crypto/sha256"
	"io"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// sparseFileT makes a file of size bytes that holds data only at the
// given offsets (one page each) and returns it open, with its logical
// content's sha256.
func sparseFileT(t *testing.T, size int64, at ...int64) (*os.File, ID) {
	t.Helper()
	p := filepath.Join(t.TempDir(), "sparse")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	if err := f.Truncate(size); err != nil {
		t.Fatal(err)
	}
	for i, off := range at {
		if _, err := f.WriteAt(randBytes(uint64(i), 4096), off); err != nil {
			t.Fatal(err)
		}
	}
	h := sha256.New()
	if _, err := io.Copy(h, io.NewSectionReader(f, 0, size)); err != nil {
		t.Fatal(err)
	}
	var id ID
	h.Sum(id[:0])
	if _, sparse := dataExtents(f, size); !sparse {
		t.Skip("the test directory's filesystem does not report holes (SEEK_HOLE)")
	}
	return f, id
}

// TestPutKeepsHoles: issue 14, defect 6. A sparse file's holes were read,
// chunked and stored; its capture cost O(size). Only its data is stored,
// its blob ID stays the sha256 of the whole content, and reads return the
// holes as zeros.
func TestPutKeepsHoles(t *testing.T) {
	const size = 64<<20 + 12345
	defer func(m int64) { maxHoleEntry = m }(maxHoleEntry)
	maxHoleEntry = 16 << 20 // so that a hole takes several entries
	f, want := sparseFileT(t, size, 0, 3<<20, 40<<20+7)
	s := openT(t, Options{})
	id, n, err := s.Put(f)
	if err != nil {
		t.Fatal(err)
	}
	if id != want || n != size {
		t.Fatalf("Put = %s, %d; want %s, %d", id.Short(), n, want.Short(), int64(size))
	}
	if got := s.Size(); got > 1<<20 {
		t.Errorf("store holds %d bytes for 12 KiB of data", got)
	}
	cs, err := s.Chunks(id)
	if err != nil || len(cs) != 3 {
		t.Errorf("Chunks = %d chunks, %v; want the 3 data chunks", len(cs), err)
	}
	for _, c := range cs {
		if c == holeID {
			t.Errorf("Chunks names a hole entry")
		}
	}
	r, err := s.Open(id)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if h := r.Holes(); len(h) != 3 || h[0] != [2]int64{4096, 3 << 20} || h[2][1] != size {
		t.Errorf("Holes = %v", h)
	}
	// Random reads across data and holes match the file.
	for _, off := range []int64{0, 4000, 3<<20 - 10, 40<<20 + 7 - 100, 20 << 20, size - 10} {
		got, wantb := make([]byte, 200), make([]byte, 200)
		k, _ := r.ReadAt(got, off)
		kw, _ := f.ReadAt(wantb, off)
		if k != kw || !bytes.Equal(got[:k], wantb[:kw]) {
			t.Errorf("ReadAt(%d) differs from the file", off)
		}
	}
	if err := s.Verify(id); err != nil {
		t.Errorf("Verify: %v", err)
	}
	// Prune keeps it whole, and a hole entry names no record.
	if _, err := s.Prune(func(x ID) bool { return x == id }); err != nil {
		t.Fatal(err)
	}
	if err := s.Verify(id); err != nil {
		t.Errorf("Verify after prune: %v", err)
	}
	if _, err := s.Stats(); err != nil {
		t.Errorf("Stats: %v", err)
	}
}

// TestHashFileSkipsHoles: Keep and Clone hash a sparse file without
// reading its holes, to the same ID.
func TestHashFileSkipsHoles(t *testing.T) {
	f, want := sparseFileT(t, 256<<20, 1<<20)
	id, n, err := HashFile(f)
	if err != nil || id != want || n != 256<<20 {
		t.Fatalf("hashFile = %s, %d, %v; want %s", id.Short(), n, err, want.Short())
	}
	var st unix.Stat_t
	unix.Fstat(int(f.Fd()), &st)
	if st.Blocks*512 > 1<<20 {
		t.Errorf("hashing allocated the holes: %d blocks", st.Blocks)
	}
}
