package blobstore

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
)

// openT opens a store in a new directory.
func openT(t testing.TB, opts Options) *Store {
	t.Helper()
	s, err := Open(filepath.Join(t.TempDir(), "blobs"), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.closeFiles() })
	return s
}

// randBytes returns n pseudo-random bytes from seed.
func randBytes(seed uint64, n int) []byte {
	var key [32]byte
	binary.LittleEndian.PutUint64(key[:], seed)
	b := make([]byte, n)
	rand.NewChaCha8(key).Read(b)
	return b
}

// textBytes returns n bytes of compressible text from seed.
func textBytes(seed uint64, n int) []byte {
	r := rand.New(rand.NewPCG(seed, seed))
	words := []string{"func ", "return ", "err ", "nil", "{\n", "}\n", "\t", "if ", "x := ", "s.mu.Lock()\n", "for ", "range "}
	var b bytes.Buffer
	for b.Len() < n {
		b.WriteString(words[r.IntN(len(words))])
	}
	return b.Bytes()[:n]
}

func putT(t testing.TB, s *Store, data []byte) ID {
	t.Helper()
	id, n, err := s.Put(bytes.NewReader(data))
	if err != nil {
		t.Fatalf("Put: %v", err)
	}
	if n != int64(len(data)) {
		t.Fatalf("Put: got size %d, want %d", n, len(data))
	}
	return id
}

// walkAll lists the records Walk reports, sorted.
func walkAll(t *testing.T, s *Store) []BlobInfo {
	t.Helper()
	var got []BlobInfo
	if err := s.Walk(func(b BlobInfo) error { got = append(got, b); return nil }); err != nil {
		t.Fatal(err)
	}
	slices.SortFunc(got, func(a, b BlobInfo) int { return bytes.Compare(a.ID[:], b.ID[:]) })
	return got
}

// tmpFiles lists what is in the store's tmp/.
func tmpFiles(t *testing.T, s *Store) []string {
	t.Helper()
	ents, err := os.ReadDir(filepath.Join(s.Dir(), "tmp"))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	return names
}

// putLoose writes a blob as the store before packs did (one file
// DIR/ab/<hex>), for the tests of stores written by that code.
func putLoose(t testing.TB, dir string, data []byte) ID {
	t.Helper()
	id := Sum(data)
	fan := filepath.Join(dir, id.String()[:2])
	if err := os.MkdirAll(fan, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(fan, id.String()), data, 0o600); err != nil {
		t.Fatal(err)
	}
	return id
}

// impl is one way of storing blobs: the conformance suite (STYLE rule 16)
// runs against each. put stores content the way that implementation does;
// damage spoils one byte of what stores id's content (for a chunked blob,
// of its chunk at index chunk).
type impl struct {
	name string
	opts Options
	// kept: blobs are workspace files kept by Keep (their inode linked
	// into the store), whose workspace name then goes.
	kept bool
}

var impls = []impl{
	{name: "packed", opts: Options{}},
	{name: "packed-sync", opts: Options{Sync: true}},
	{name: "uncompressed", opts: Options{NoCompress: true}},
	{name: "unchunked", opts: Options{ChunkAbove: -1}},
	{name: "small-packs", opts: Options{PackSize: 64 << 10}},
	{name: "kept", kept: true},
	{name: "kept-sync", opts: Options{Sync: true}, kept: true},
}

// fixture is a store under test with its implementation's put.
type fixture struct {
	t   *testing.T
	im  impl
	dir string
	s   *Store
}

func newFixture(t *testing.T, im impl) *fixture {
	f := &fixture{t: t, im: im, dir: filepath.Join(t.TempDir(), "blobs")}
	f.reopen()
	return f
}

// reopen closes the store and opens it again, as the next mount would.
func (f *fixture) reopen() {
	f.t.Helper()
	if f.s != nil {
		if err := f.s.Close(); err != nil {
			f.t.Fatal(err)
		}
	}
	s, err := Open(f.dir, f.im.opts)
	if err != nil {
		f.t.Fatal(err)
	}
	f.s = s
	f.t.Cleanup(func() { s.closeFiles() })
}

func (f *fixture) put(data []byte) ID {
	f.t.Helper()
	if f.im.kept {
		id := keepT(f.t, f.s, filepath.Join(filepath.Dir(f.dir), "ws"), data)
		if !f.im.opts.Sync {
			if err := f.s.Sync(); err != nil {
				f.t.Fatal(err)
			}
		}
		return id
	}
	id := putT(f.t, f.s, data)
	if !f.im.opts.Sync {
		if err := f.s.Sync(); err != nil {
			f.t.Fatal(err)
		}
	}
	return id
}

// damage flips one byte of the stored bytes of id's content (of chunk i of
// it when it is chunked), and reopens.
func (f *fixture) damage(id ID, chunk int) ID {
	f.t.Helper()
	target := id
	if cs, err := f.s.Chunks(id); err != nil {
		f.t.Fatal(err)
	} else if cs != nil {
		target = cs[chunk]
	}
	if l, ok := f.s.lookup(target); ok {
		if err := flipByte(l.p.path(f.s.packDir), l.off+headerSize+int64(l.stored)/2); err != nil {
			f.t.Fatal(err)
		}
	} else if path, _, n, err := f.s.Locate(target); err != nil {
		f.t.Fatal(err)
	} else if err := flipByte(path, n/2); err != nil {
		f.t.Fatal(err)
	}
	return target
}

func flipByte(path string, off int64) error {
	fl, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	defer fl.Close()
	b := make([]byte, 1)
	if _, err := fl.ReadAt(b, off); err != nil {
		return err
	}
	b[0] ^= 0xff
	_, err = fl.WriteAt(b, off)
	return err
}

// suite is the conformance suite.
var suite = map[string]func(t *testing.T, f *fixture){
	"PutGet":         testPutGet,
	"RandomReads":    testRandomReads,
	"Reopen":         testReopen,
	"Dedup":          testDedup,
	"Corrupt":        testCorrupt,
	"NotFound":       testNotFound,
	"Prune":          testPrune,
	"ConcurrentPuts": testConcurrentPuts,
}

func TestConformance(t *testing.T) {
	names := make([]string, 0, len(suite))
	for n := range suite {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, im := range impls {
		for _, n := range names {
			t.Run(im.name+"/"+n, func(t *testing.T) { suite[n](t, newFixture(t, im)) })
		}
	}
}

var sizes = []struct {
	name string
	data []byte
}{
	{"empty", nil},
	{"one byte", []byte("x")},
	{"text", []byte("package main\n\nfunc main() {}\n")},
	{"compressible 200KiB", textBytes(1, 200<<10)},
	{"1MiB", randBytes(2, 1<<20)},
	{"1MiB and a byte", randBytes(3, 1<<20+1)},
	{"compressible 3MiB", textBytes(4, bigOr(3<<20, 3<<19))},
	{"5MiB", randBytes(5, bigOr(5<<20, 2<<20))},
}

// bigOr is big, or small under the race detector.
func bigOr(big, small int) int {
	if raceOn {
		return small
	}
	return big
}

func testPutGet(t *testing.T, f *fixture) {
	for _, tt := range sizes {
		id := f.put(tt.data)
		if want := ID(sha256.Sum256(tt.data)); id != want {
			t.Fatalf("%s: got id %s, want %s", tt.name, id, want)
		}
		got, err := f.s.Get(id)
		if err != nil || !bytes.Equal(got, tt.data) {
			t.Errorf("%s: Get: got %d bytes, %v; want the %d put", tt.name, len(got), err, len(tt.data))
		}
		r, err := f.s.Open(id)
		if err != nil {
			t.Fatal(err)
		}
		streamed, err := io.ReadAll(r)
		r.Close()
		if err != nil || !bytes.Equal(streamed, tt.data) {
			t.Errorf("%s: Open: got %d bytes, %v; want the %d put", tt.name, len(streamed), err, len(tt.data))
		}
		v, err := f.s.OpenVerified(id)
		if err != nil {
			t.Fatal(err)
		}
		if v.Size() != int64(len(tt.data)) {
			t.Errorf("%s: Size: got %d, want %d", tt.name, v.Size(), len(tt.data))
		}
		v.Close()
		if err := f.s.Verify(id); err != nil {
			t.Errorf("%s: Verify: %v", tt.name, err)
		}
		if !f.s.Has(id) {
			t.Errorf("%s: Has: got false, want true", tt.name)
		}
	}
}

func testRandomReads(t *testing.T, f *fixture) {
	data := randBytes(9, bigOr(5<<20, 2<<20))
	id := f.put(data)
	r, err := f.s.OpenVerified(id)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	rnd := rand.New(rand.NewPCG(1, 2))
	for range 50 {
		off := rnd.Int64N(int64(len(data)) + 10)
		n := rnd.IntN(1 << 20)
		buf := make([]byte, n)
		k, err := r.ReadAt(buf, off)
		want := data[min(off, int64(len(data))):min(off+int64(n), int64(len(data)))]
		if !bytes.Equal(buf[:k], want) {
			t.Fatalf("ReadAt(%d, %d): got %d bytes that differ, want %d", n, off, k, len(want))
		}
		if k < n && err != io.EOF {
			t.Fatalf("ReadAt(%d, %d) short: got %v, want io.EOF", n, off, err)
		}
		if k == n && err != nil {
			t.Fatalf("ReadAt(%d, %d): %v", n, off, err)
		}
	}
}

func testReopen(t *testing.T, f *fixture) {
	var ids []ID
	for _, tt := range sizes {
		ids = append(ids, f.put(tt.data))
	}
	check := func(when string) {
		for i, id := range ids {
			got, err := f.s.Get(id)
			if err != nil || !bytes.Equal(got, sizes[i].data) {
				t.Errorf("%s: %s: got %d bytes, %v", when, sizes[i].name, len(got), err)
			}
		}
	}
	f.reopen()
	check("after reopen")
	// Without the pack indexes, the packs are scanned.
	idx, _ := filepath.Glob(filepath.Join(f.dir, "packs", "*.idx"))
	for _, p := range idx {
		os.Remove(p)
	}
	f.reopen()
	check("after reopen without indexes")
	// A damaged index is not trusted either.
	idx, _ = filepath.Glob(filepath.Join(f.dir, "packs", "*.idx"))
	for _, p := range idx {
		if err := flipByte(p, 30); err != nil {
			t.Fatal(err)
		}
	}
	f.reopen()
	check("after reopen with damaged indexes")
}

func testDedup(t *testing.T, f *fixture) {
	for _, tt := range sizes {
		f.put(tt.data)
	}
	before, err := f.s.Stats()
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range sizes {
		f.put(tt.data)
	}
	after, err := f.s.Stats()
	if err != nil {
		t.Fatal(err)
	}
	if after.StoredBytes != before.StoredBytes || after.Blobs != before.Blobs {
		t.Errorf("putting everything again: got %d blobs in %d bytes, want the %d in %d from before",
			after.Blobs, after.StoredBytes, before.Blobs, before.StoredBytes)
	}
	if want := len(sizes); before.Blobs != want {
		t.Errorf("got %d blobs, want %d", before.Blobs, want)
	}
}

func testCorrupt(t *testing.T, f *fixture) {
	for _, tt := range sizes[1:] {
		id := f.put(tt.data)
		chunks, _ := f.s.Chunks(id)
		bad := f.damage(id, len(chunks)/2)
		f.reopen()
		if got, err := f.s.Get(id); !errors.Is(err, ErrCorrupt) || got != nil {
			t.Errorf("%s: Get of a damaged blob: got %d bytes, %v; want nothing and ErrCorrupt", tt.name, len(got), err)
		}
		err := f.s.Verify(id)
		if !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: Verify: got %v, want ErrCorrupt", tt.name, err)
		}
		if r, err := f.s.Open(id); err == nil {
			_, err = io.ReadAll(r)
			r.Close()
			if !errors.Is(err, ErrCorrupt) {
				t.Errorf("%s: reading a damaged blob: got %v, want ErrCorrupt", tt.name, err)
			}
		} else if !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: Open: got %v, want ErrCorrupt", tt.name, err)
		}
		if chunks == nil {
			continue
		}
		var ce *ChunkError
		if !errors.As(err, &ce) || ce.Chunk != bad || ce.Blob != id {
			t.Errorf("%s: Verify: got %v, want a ChunkError naming chunk %s", tt.name, err, bad.Short())
		}
		// Random reads of the good chunks still work; of the bad one,
		// they fail.
		r, err := f.s.OpenVerified(id)
		if err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, 100)
		if _, err := r.ReadAt(buf, 0); (err != nil) != (len(chunks)/2 == 0) {
			t.Errorf("%s: ReadAt of the first chunk: %v", tt.name, err)
		}
		if _, err := r.ReadAt(buf, r.Size()-100); (err != nil) != (len(chunks)/2 == len(chunks)-1) {
			t.Errorf("%s: ReadAt of the last chunk: %v", tt.name, err)
		}
		r.Close()
	}
}

func testNotFound(t *testing.T, f *fixture) {
	id := Sum([]byte("never stored"))
	if f.s.Has(id) {
		t.Error("Has: got true, want false")
	}
	if _, err := f.s.Get(id); !errors.Is(err, ErrNotFound) {
		t.Errorf("Get: got %v, want ErrNotFound", err)
	}
	if _, err := f.s.Open(id); !errors.Is(err, ErrNotFound) {
		t.Errorf("Open: got %v, want ErrNotFound", err)
	}
	if _, err := f.s.OpenVerified(id); !errors.Is(err, ErrNotFound) {
		t.Errorf("OpenVerified: got %v, want ErrNotFound", err)
	}
	if err := f.s.Verify(id); !errors.Is(err, ErrNotFound) {
		t.Errorf("Verify: got %v, want ErrNotFound", err)
	}
}

func testPrune(t *testing.T, f *fixture) {
	var keep, drop []ID
	data := map[ID][]byte{}
	for i, tt := range sizes {
		id := f.put(tt.data)
		data[id] = tt.data
		if i%2 == 0 {
			keep = append(keep, id)
		} else {
			drop = append(drop, id)
		}
	}
	// A big blob that shares most chunks with a dropped one stays whole.
	shared := bytes.Clone(sizes[len(sizes)-1].data)
	copy(shared[len(shared)*2/3:], "changed")
	sid := f.put(shared)
	data[sid] = shared
	keep = append(keep, sid)
	before, err := f.s.Stats()
	if err != nil {
		t.Fatal(err)
	}
	kept := map[ID]bool{}
	for _, id := range keep {
		kept[id] = true
	}
	slices.SortFunc(drop, func(a, b ID) int { return bytes.Compare(a[:], b[:]) })
	would, err := f.s.Reclaimable(func(id ID) bool { return kept[id] })
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(would.Removed, drop) || would.BytesFreed <= 0 {
		t.Errorf("Reclaimable: got %d blobs, %d bytes; want the %d dropped and some bytes", len(would.Removed), would.BytesFreed, len(drop))
	}
	res, err := f.s.Prune(func(id ID) bool { return kept[id] })
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(res.Removed, drop) {
		t.Errorf("Prune removed %d blobs, want the %d dropped", len(res.Removed), len(drop))
	}
	if res.BytesFreed <= 0 {
		t.Errorf("Prune freed %d bytes, want some", res.BytesFreed)
	}
	check := func(when string) {
		for _, id := range drop {
			if f.s.Has(id) {
				t.Errorf("%s: dropped blob %s is still there", when, id.Short())
			}
		}
		for _, id := range keep {
			got, err := f.s.Get(id)
			if err != nil || !bytes.Equal(got, data[id]) {
				t.Errorf("%s: kept blob %s: got %d bytes, %v", when, id.Short(), len(got), err)
			}
		}
	}
	check("after Prune")
	f.reopen()
	check("after reopen")
	after, err := f.s.Stats()
	if err != nil {
		t.Fatal(err)
	}
	if after.Blobs != len(keep) || before.DiskBytes-after.DiskBytes != res.BytesFreed {
		t.Errorf("after Prune: %d blobs, %d bytes freed; want %d blobs, %d bytes freed",
			after.Blobs, before.DiskBytes-after.DiskBytes, len(keep), res.BytesFreed)
	}
}

func testConcurrentPuts(t *testing.T, f *fixture) {
	contents := bigOr(20, 8)
	all := make([][]byte, contents)
	for k := range all {
		all[k] = randBytes(uint64(k), 1000+k*bigOr(60<<10, 20<<10))
	}
	all[contents-1] = randBytes(99, 1<<20+bigOr(1<<20, 100<<10)) // chunked
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range contents {
				data := all[(i+g)%contents]
				id, _, err := f.s.Put(bytes.NewReader(data))
				if err != nil || id != Sum(data) {
					t.Errorf("Put: got %s, %v; want %s", id.Short(), err, Sum(data).Short())
				}
			}
		})
	}
	wg.Wait()
	if err := f.s.Sync(); err != nil {
		t.Fatal(err)
	}
	st, err := f.s.Stats()
	if err != nil {
		t.Fatal(err)
	}
	if st.Blobs != contents {
		t.Errorf("got %d blobs, want %d", st.Blobs, contents)
	}
	for _, b := range walkAll(t, f.s) {
		if err := f.s.Verify(b.ID); err != nil {
			t.Error(err)
		}
	}
}

// TestPackOneSync: 100 small blobs put in batch mode go into one pack and
// take one fdatasync at Sync (not one file and two fsyncs each).
func TestPackOneSync(t *testing.T) {
	s := openT(t, Options{})
	var mu sync.Mutex
	synced := map[string]int{}
	real := fdatasync
	fdatasync = func(f *os.File) error {
		mu.Lock()
		synced[filepath.Base(f.Name())]++
		mu.Unlock()
		return real(f)
	}
	t.Cleanup(func() { fdatasync = real })
	for i := range 100 {
		putT(t, s, textBytes(uint64(i), 3000))
	}
	if len(synced) != 0 {
		t.Fatalf("got fdatasyncs %v before Sync, want none", synced)
	}
	if err := s.Sync(); err != nil {
		t.Fatal(err)
	}
	packs, _ := filepath.Glob(filepath.Join(s.Dir(), "packs", "*.pack"))
	if len(packs) != 1 || len(synced) != 1 || synced[filepath.Base(packs[0])] != 1 {
		t.Errorf("got packs %v and fdatasyncs %v, want one pack synced once", packs, synced)
	}
	clear(synced)
	if err := s.Sync(); err != nil || len(synced) != 0 {
		t.Errorf("a second Sync: got %v and fdatasyncs %v, want nothing to do", err, synced)
	}
	// In sync mode each Put syncs what it wrote.
	s2 := openT(t, Options{Sync: true})
	clear(synced)
	putT(t, s2, []byte("one"))
	if len(synced) != 1 {
		t.Errorf("a Put with Options.Sync: got fdatasyncs %v, want one", synced)
	}
}

// TestSyncFailureRescues: records of a pack whose fdatasync fails are
// rewritten into a fresh pack, and that one is synced; the failed pack is
// never synced again.
func TestSyncFailureRescues(t *testing.T) {
	real := fdatasync
	t.Cleanup(func() { fdatasync = real })
	var failed string
	calls := map[string]int{}
	fdatasync = func(f *os.File) error {
		calls[filepath.Base(f.Name())]++
		if failed == "" {
			failed = filepath.Base(f.Name())
			return syscall.EIO
		}
		return real(f)
	}
	s := openT(t, Options{})
	a := putT(t, s, randBytes(12, 50<<10))
	b := putT(t, s, randBytes(13, 3<<20))
	if err := s.Sync(); err != nil {
		t.Fatalf("Sync: %v, want the records rescued", err)
	}
	for _, id := range []ID{a, b} {
		l, _ := s.lookup(id)
		if l.p.name+".pack" == failed {
			t.Errorf("blob %s is still in the pack whose fdatasync failed", id.Short())
		}
		if err := s.Verify(id); err != nil {
			t.Error(err)
		}
	}
	putT(t, s, []byte("later"))
	if err := s.Sync(); err != nil {
		t.Fatal(err)
	}
	if calls[failed] != 1 {
		t.Errorf("the failed pack was fdatasynced %d times, want once", calls[failed])
	}
	// Sync mode: the Put itself rescues.
	failed = ""
	s2 := openT(t, Options{Sync: true})
	c := putT(t, s2, []byte("sync mode"))
	if err := s2.Verify(c); err != nil {
		t.Error(err)
	}
}

// TestTornTail: bytes after the last whole record of a pack (a Put killed
// mid-write) are copied aside and cut off at the next open; damage with
// good records after it is reported, and the records after it still read.
func TestTornTail(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "blobs")
	s, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	a := putT(t, s, textBytes(1, 5000))
	b := putT(t, s, textBytes(2, 5000))
	if err := s.Sync(); err != nil {
		t.Fatal(err)
	}
	la, _ := s.lookup(a)
	path := la.p.path(s.packDir)
	s.closeFiles()
	// A torn third record: a header and half a payload.
	rec := encodeRecord(kindData, compNone, Sum([]byte("torn")), 4000, make([]byte, 4000))
	fl, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	fl.Write(rec[:2000])
	fl.Close()
	before, _ := os.Stat(path)
	s, err = Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	after, _ := os.Stat(path)
	if after.Size() != before.Size()-2000 {
		t.Errorf("pack is %d bytes after recovery, want %d", after.Size(), before.Size()-2000)
	}
	torn, _ := filepath.Glob(path + ".torn-*")
	if len(torn) != 1 {
		t.Errorf("got torn copies %v, want one", torn)
	}
	for _, id := range []ID{a, b} {
		if err := s.Verify(id); err != nil {
			t.Error(err)
		}
	}
	if len(s.Damaged()) != 0 {
		t.Errorf("got damage %v, want none", s.Damaged())
	}
	// Damage in the middle: the first record's header.
	s.closeFiles()
	os.Remove(filepath.Join(dir, "packs", la.p.name+".idx"))
	if err := flipByte(path, 10); err != nil {
		t.Fatal(err)
	}
	s, err = Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.closeFiles()
	if d := s.Damaged(); len(d) != 1 || d[0].Off != 0 {
		t.Errorf("got damage %v, want one range at 0", d)
	}
	if err := s.Verify(a); !errors.Is(err, ErrNotFound) {
		t.Errorf("the damaged record: got %v, want ErrNotFound", err)
	}
	if err := s.Verify(b); err != nil {
		t.Errorf("the record after the damage: %v", err)
	}
}

// TestCompression: text is stored compressed; random bytes are stored as
// they are (compression does not pay); NoCompress stores everything as is.
func TestCompression(t *testing.T) {
	text, noise := textBytes(1, 1<<20), randBytes(1, 1<<20)
	for _, noCompress := range []bool{false, true} {
		s := openT(t, Options{NoCompress: noCompress})
		lt, _ := s.lookup(putT(t, s, text))
		ln, _ := s.lookup(putT(t, s, noise))
		if ln.comp != compNone || int64(ln.stored) != ln.raw {
			t.Errorf("NoCompress=%v: random bytes stored with compression %d in %d bytes", noCompress, ln.comp, ln.stored)
		}
		if noCompress && lt.comp != compNone {
			t.Errorf("NoCompress: text stored compressed")
		}
		if !noCompress && (lt.comp != compZstd || int64(lt.stored) > lt.raw/2) {
			t.Errorf("text: got compression %d, %d bytes of %d; want zstd, at most half", lt.comp, lt.stored, lt.raw)
		}
	}
}

// TestChunkDedup: a large blob with 4 KiB changed in its middle stores only
// the chunks around the change again.
func TestChunkDedup(t *testing.T) {
	s := openT(t, Options{NoCompress: true})
	data := randBytes(7, bigOr(16<<20, 6<<20))
	putT(t, s, data)
	st0, _ := s.Stats()
	copy(data[len(data)*5/8:], randBytes(8, 4096))
	putT(t, s, data)
	st1, _ := s.Stats()
	grew := st1.StoredBytes - st0.StoredBytes
	if grew > 2*maxChunk {
		t.Errorf("a 4 KiB change to 16 MiB grew the store by %d bytes, want at most %d", grew, 2*maxChunk)
	}
	if st1.Blobs != 2 || st1.ContentBytes != 2*int64(len(data)) {
		t.Errorf("got %d blobs of %d bytes, want 2 of %d", st1.Blobs, st1.ContentBytes, 2*len(data))
	}
	t.Logf("%d MiB: %d chunks; the second version added %d KiB", len(data)>>20, st0.Chunks, grew>>10)
}

func TestMaxSize(t *testing.T) {
	for _, size := range []int{100, 3 << 20} {
		s := openT(t, Options{MaxSize: int64(size)})
		putT(t, s, randBytes(1, size))
		if _, _, err := s.Put(bytes.NewReader(randBytes(2, size+1))); !errors.Is(err, ErrTooLarge) {
			t.Errorf("cap %d: Put of one byte more: got %v, want ErrTooLarge", size, err)
		}
	}
}

type errReader struct{ n int }

func (r *errReader) Read(p []byte) (int, error) {
	if r.n <= 0 {
		return 0, syscall.EIO
	}
	k := min(len(p), r.n)
	clear(p[:k])
	r.n -= k
	return k, nil
}

func TestPutReadError(t *testing.T) {
	for _, n := range []int{10, 3 << 20} {
		s := openT(t, Options{})
		if _, _, err := s.Put(&errReader{n: n}); !errors.Is(err, syscall.EIO) {
			t.Errorf("Put from a failing reader: got %v, want EIO", err)
		}
	}
}

// TestReadOnly: a read-only Store next to a writer sees what the writer
// has put (even in its unsealed pack), changes nothing, and refuses writes.
func TestReadOnly(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "blobs")
	w, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.closeFiles()
	id := putT(t, w, textBytes(3, 10000))
	big := putT(t, w, randBytes(3, 3<<20))
	r, err := Open(dir, Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer r.closeFiles()
	for _, x := range []ID{id, big} {
		if err := r.Verify(x); err != nil {
			t.Error(err)
		}
	}
	if _, _, err := r.Put(bytes.NewReader(nil)); !errors.Is(err, ErrReadOnly) {
		t.Errorf("Put: got %v, want ErrReadOnly", err)
	}
	if _, err := r.Prune(func(ID) bool { return false }); !errors.Is(err, ErrReadOnly) {
		t.Errorf("Prune: got %v, want ErrReadOnly", err)
	}
	if idx, _ := filepath.Glob(filepath.Join(dir, "packs", "*.idx")); len(idx) != 0 {
		t.Errorf("a read-only open wrote %v", idx)
	}
}

func TestCleanTemp(t *testing.T) {
	s := openT(t, Options{})
	id := putT(t, s, []byte("keep me"))
	for _, p := range []string{"tmp/.tmp-blob-1", "tmp/whatever", "packs/.tmp-x.idx-1"} {
		if err := os.WriteFile(filepath.Join(s.Dir(), p), []byte("partial"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.CleanTemp(); err != nil {
		t.Fatal(err)
	}
	if tmp := tmpFiles(t, s); len(tmp) != 0 {
		t.Errorf("got %v in tmp/ after CleanTemp, want nothing", tmp)
	}
	if m, _ := filepath.Glob(filepath.Join(s.Dir(), "packs", ".tmp-*")); len(m) != 0 {
		t.Errorf("got %v in packs/ after CleanTemp", m)
	}
	if err := s.Verify(id); err != nil {
		t.Errorf("CleanTemp touched a blob: %v", err)
	}
}

func TestOpenCreatesStore(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "a", "b")
	s, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	if s.Dir() != dir {
		t.Errorf("got dir %s, want %s", s.Dir(), dir)
	}
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(filepath.Join(file, "x"), Options{}); !errors.Is(err, syscall.ENOTDIR) {
		t.Errorf("Open under a file: got %v, want ENOTDIR", err)
	}
}

// TestLooseLayoutRefused: a store holding a blob in the layout from
// before packs (one file each, DIR/ab/<hex>) is older than the baseline:
// Open refuses it, naming the file, and removes nothing. The baseline
// (packs and kept blobs) opens, and so does one with an empty fan
// directory left after its loose blobs were pruned.
func TestLooseLayoutRefused(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "blobs")
	s, err := Open(dir, Options{})
	if err != nil {
		t.Fatalf("the baseline: %v", err)
	}
	packed := putT(t, s, []byte("written in a pack\n"))
	kept := keepT(t, s, filepath.Join(filepath.Dir(dir), "ws"), []byte("kept\n"))
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, "ab"), 0o700); err != nil {
		t.Fatal(err)
	}
	s, err = Open(dir, Options{})
	if err != nil {
		t.Fatalf("the baseline with an empty fan directory: %v", err)
	}
	for _, id := range []ID{packed, kept} {
		if err := s.Verify(id); err != nil {
			t.Errorf("the baseline's %s: %v", id.Short(), err)
		}
	}
	s.Close()
	old := putLoose(t, dir, []byte("written before packs\n"))
	oldPath := filepath.Join(dir, old.String()[:2], old.String())
	for _, opts := range []Options{{}, {ReadOnly: true}} {
		s, err = Open(dir, opts)
		if err == nil {
			s.Close()
			t.Fatalf("Open %+v of a store with a loose blob succeeded", opts)
		}
		if !errors.Is(err, ErrBeforeBaseline) || !strings.Contains(err.Error(), oldPath) || !strings.Contains(err.Error(), "older than the store format") {
			t.Errorf("Open %+v: got %v, want ErrBeforeBaseline naming %s", opts, err, oldPath)
		}
	}
	if _, err := os.Stat(oldPath); err != nil {
		t.Errorf("the refused store's loose blob: %v", err)
	}
}
