package blobstore

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/zerofs/zerofs/record"
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

// TestSparseHolesHashedOnce: issue 14, defect 6. A rewind of a 10 GiB
// sparse file with a 1-byte change took 172 s: its holes were hashed as
// zeros by every step that touched the file (compare, verify, restore,
// capture), five or six times. They are hashed once per content: a blob
// this Store wrote or checked whole is verified and read by its data
// chunks, an unchanged file is not hashed again, and storing a file whose
// ID is known reads only its data. Any change is still seen.
func TestSparseHolesHashedOnce(t *testing.T) {
	const size = 64 << 20
	f, want := sparseFileT(t, size, 0, 40<<20)
	time.Sleep(2 * racyMargin) // a ctime older than any hash's start by the margin
	s := openT(t, Options{})
	hashed := func(what string, want int64) {
		t.Helper()
		if got := wholeHashed.Swap(0); (want == 0) != (got == 0) {
			t.Errorf("%s hashed %d bytes of holes, want %d", what, got, want)
		}
	}
	wholeHashed.Store(0)
	id, _, err := s.Put(f)
	if err != nil || id != want {
		t.Fatalf("Put = %s, %v; want %s", id.Short(), err, want.Short())
	}
	hashed("Put", size)
	if got, _, err := s.HashFile(f); err != nil || got != want {
		t.Fatalf("HashFile = %s, %v", got.Short(), err)
	}
	hashed("HashFile of the unchanged file", 0)
	if err := s.Verify(id); err != nil {
		t.Fatal(err)
	}
	hashed("Verify of a blob the Store wrote", 0)
	r, err := s.Open(id)
	if err != nil {
		t.Fatal(err)
	}
	exts, ok := r.DataExtents()
	if !ok || len(exts) != 2 || exts[0] != [2]int64{0, 4096} || exts[1] != [2]int64{40 << 20, 40<<20 + 4096} {
		t.Errorf("DataExtents = %v, %v", exts, ok)
	}
	all, err := io.ReadAll(r)
	r.Close()
	if err != nil || Sum(all) != want {
		t.Fatalf("Read: %v", err)
	}
	hashed("Read of a blob the Store wrote", 0)

	// A change is seen, and hashed.
	if _, err := f.WriteAt([]byte("y"), 20<<20); err != nil {
		t.Fatal(err)
	}
	all[20<<20] = 'y'
	if got, _, err := s.HashFile(f); err != nil || got != Sum(all) {
		t.Fatalf("HashFile after a write = %s, %v; want %s", got.Short(), err, Sum(all).Short())
	}
	hashed("HashFile of the changed file", size)
	// Remembered only once its ctime is old enough.
	time.Sleep(2 * racyMargin)
	s.HashFile(f)
	hashed("HashFile of a file changed just before", size)
	// Stored without hashing: its ID is known.
	id2, _, err := s.Put(f)
	if err != nil || id2 != Sum(all) {
		t.Fatalf("Put = %s, %v; want %s", id2.Short(), err, Sum(all).Short())
	}
	hashed("Put of a file with a known ID", 0)
	if b, err := s.Get(id2); err != nil || !bytes.Equal(b, all) {
		t.Fatalf("Get of the blob stored by its known ID: %v", err)
	}

	// Another Store (the next mount) checks the whole content once.
	s2, err := Open(s.dir, Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s2.closeFiles()
	for i, want := range []int64{size, 0} {
		if err := s2.Verify(id); err != nil {
			t.Fatal(err)
		}
		hashed(fmt.Sprintf("Verify %d by another Store", i+1), want)
	}
}

// TestSparseListTamperedAfterCheck: a sparse blob's list found good is
// trusted only while the record is byte for byte what was checked: a list
// rewritten afterwards (entries swapped, checksums fixed, as a tamperer
// would) is hashed whole again and fails.
func TestSparseListTamperedAfterCheck(t *testing.T) {
	f, want := sparseFileT(t, 16<<20, 0, 8<<20)
	s := openT(t, Options{})
	id, _, err := s.Put(f)
	if err != nil || id != want {
		t.Fatalf("Put = %s, %v", id.Short(), err)
	}
	if err := s.Verify(id); err != nil {
		t.Fatal(err)
	}
	l, _ := s.lookup(id)
	payload, err := readPayload(l)
	if err != nil {
		t.Fatal(err)
	}
	// The first two entries: data then a hole; swapped, the list still
	// adds up, and names other content.
	bad := append([]byte(nil), payload...)
	copy(bad[:listEntry], payload[listEntry:2*listEntry])
	copy(bad[listEntry:2*listEntry], payload[:listEntry])
	pf, err := os.OpenFile(l.p.path(s.packDir), os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	crc := binary.LittleEndian.AppendUint32(nil, crc32.Checksum(bad, castagnoli))
	if _, err := pf.WriteAt(append(bad, crc...), l.off+headerSize); err != nil {
		t.Fatal(err)
	}
	pf.Close()
	if err := s.Verify(id); !errors.Is(err, ErrCorrupt) {
		t.Errorf("Verify of a tampered list = %v, want ErrCorrupt", err)
	}
	r, err := s.Open(id)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if _, ok := r.DataExtents(); ok {
		t.Errorf("DataExtents trusts a tampered list")
	}
	if _, err := io.Copy(io.Discard, r); !errors.Is(err, ErrCorrupt) {
		t.Errorf("Read of a tampered list = %v, want ErrCorrupt", err)
	}
}

// TestStashCopySparse: issue 14, defect 6. A 1-byte write into a 10 GiB
// sparse file waited, in the writer's open, for a capture that hashed its
// whole logical length (its holes as zeros). A large file mostly holes is
// stashed by a copy of its data instead: nothing hashed, only the data
// copied, the copy as sparse as the file; Name then stores it as a list
// with its holes (read and verified by its data), and the stash goes.
func TestStashCopySparse(t *testing.T) {
	const size = 256 << 20
	for _, sync := range []bool{false, true} {
		t.Run(map[bool]string{false: "batch", true: "always"}[sync], func(t *testing.T) {
			f, want := sparseFileT(t, size, 0, 100<<20, size-4096)
			dir := filepath.Join(t.TempDir(), "blobs")
			s, err := Open(dir, Options{Sync: sync})
			if err != nil {
				t.Fatal(err)
			}
			defer s.closeFiles()
			wholeHashed.Store(0)
			stashCopied.Store(0)
			before := s.Size()
			name, n, ok, err := s.StashCopy(f)
			if err != nil || !ok || n != size || !record.IsStashName(name) {
				t.Fatalf("StashCopy: %q, %d bytes, ok %v, err %v", name, n, ok, err)
			}
			if got := wholeHashed.Swap(0); got != 0 {
				t.Errorf("StashCopy hashed %d bytes of holes, want none", got)
			}
			if got := stashCopied.Swap(0); got != 3*4096 {
				t.Errorf("StashCopy copied %d bytes, want the data's %d", got, 3*4096)
			}
			if grew := s.Size() - before; grew > 64<<10 {
				t.Errorf("the store's size grew by %d bytes for a copy of 12 KiB of data", grew)
			}
			p := filepath.Join(dir, keptDirName, name)
			var st unix.Stat_t
			if err := unix.Lstat(p, &st); err != nil {
				t.Fatal(err)
			}
			if st.Size != size || st.Blocks*512 > 64<<10 || st.Mode&0o777 != 0o600 {
				t.Errorf("stash copy: %d bytes, %d allocated, mode %o; want %d bytes, at most 64 KiB allocated, 0600", st.Size, st.Blocks*512, st.Mode&0o777, size)
			}
			g, err := os.Open(p)
			if err != nil {
				t.Fatal(err)
			}
			got, _, err := HashFile(g)
			g.Close()
			if err != nil || got != want {
				t.Fatalf("stash copy hashes to %s, %v; want %s", got.Short(), err, want.Short())
			}
			wholeHashed.Store(0)
			if _, err := s.Get(want); !errors.Is(err, ErrNotFound) {
				t.Fatalf("Get before Name: %v, want ErrNotFound", err)
			}
			id, n, err := s.Name(name)
			if err != nil || id != want || n != size {
				t.Fatalf("Name: %s, %d, %v; want %s", id.Short(), n, err, want.Short())
			}
			if got := wholeHashed.Swap(0); got == 0 {
				t.Errorf("Name hashed no holes: it must compute the sha256")
			}
			if err := s.Sync(); err != nil {
				t.Fatal(err)
			}
			if err := s.Unstash([]string{name}); err != nil {
				t.Fatal(err)
			}
			if _, err := os.Lstat(p); !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("stash after Unstash: %v", err)
			}
			r, err := s.Open(id)
			if err != nil {
				t.Fatal(err)
			}
			exts, ok := r.DataExtents()
			r.Close()
			if !ok || len(exts) != 3 {
				t.Errorf("named blob's DataExtents = %v, %v; want its 3 data ranges, known good", exts, ok)
			}
			if err := s.Verify(id); err != nil {
				t.Fatal(err)
			}
			if got := wholeHashed.Swap(0); got != 0 {
				t.Errorf("Verify of the named blob hashed %d bytes of holes", got)
			}

			// Named after a reopen (a crash before the namer ran): the
			// same blob, read from the store.
			name2, _, ok, err := s.StashCopy(f)
			if err != nil || !ok {
				t.Fatalf("StashCopy: ok %v, %v", ok, err)
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			s2, err := Open(dir, Options{Sync: sync})
			if err != nil {
				t.Fatal(err)
			}
			defer s2.closeFiles()
			if id2, _, err := s2.Name(name2); err != nil || id2 != want {
				t.Fatalf("Name after a reopen: %s, %v", id2.Short(), err)
			}

			// Not sparse enough, or too small: not copied.
			dense := wsFile(t, filepath.Join(t.TempDir(), "ws"), randBytes(3, 1<<20))
			defer dense.Close()
			if _, _, ok, err := s2.StashCopy(dense); ok || err != nil {
				t.Errorf("StashCopy of a small dense file: ok %v, %v; want not copied", ok, err)
			}
		})
	}
}
