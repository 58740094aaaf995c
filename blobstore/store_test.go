package blobstore

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// openT opens a store in a new directory.
func openT(t testing.TB, opts Options) *Store {
	t.Helper()
	s, err := Open(filepath.Join(t.TempDir(), "blobs"), opts)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// randBytes returns n pseudo-random bytes from seed.
func randBytes(seed uint64, n int) []byte {
	r := rand.New(rand.NewPCG(seed, seed))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
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

// walkAll lists the blobs Walk reports, sorted.
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

func TestPutGet(t *testing.T) {
	tests := []struct {
		name string
		data []byte
	}{
		{"empty", nil},
		{"one byte", []byte("x")},
		{"text", []byte("package main\n\nfunc main() {}\n")},
		{"exactly one copy buffer", randBytes(1, copyBufSize)},
		{"one copy buffer and a byte", randBytes(2, copyBufSize+1)},
		{"3 MiB", randBytes(3, 3<<20)},
	}
	for _, syncOn := range []bool{true, false} {
		s := openT(t, Options{Sync: syncOn})
		for _, tt := range tests {
			t.Run(fmt.Sprintf("%s/sync=%v", tt.name, syncOn), func(t *testing.T) {
				id := putT(t, s, tt.data)
				if want := ID(sha256.Sum256(tt.data)); id != want {
					t.Fatalf("got id %s, want %s", id, want)
				}
				if id != Sum(tt.data) {
					t.Errorf("Sum disagrees with Put")
				}
				got, err := s.Get(id)
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(got, tt.data) {
					t.Errorf("Get: got %d bytes, want the %d put", len(got), len(tt.data))
				}
				r, err := s.Open(id)
				if err != nil {
					t.Fatal(err)
				}
				streamed, err := io.ReadAll(r)
				r.Close()
				if err != nil || !bytes.Equal(streamed, tt.data) {
					t.Errorf("Open: got %d bytes, %v; want the %d put", len(streamed), err, len(tt.data))
				}
				f, err := s.OpenVerified(id)
				if err != nil {
					t.Fatal(err)
				}
				f.Close()
				if err := s.Verify(id); err != nil {
					t.Errorf("Verify: %v", err)
				}
				if !s.Has(id) {
					t.Error("Has: got false, want true")
				}
			})
		}
	}
}

func TestLayout(t *testing.T) {
	s := openT(t, Options{Sync: true})
	id := putT(t, s, []byte("layout"))
	h := id.String()
	want := filepath.Join(s.Dir(), h[:2], h)
	if s.Path(id) != want {
		t.Errorf("got path %s, want %s", s.Path(id), want)
	}
	for _, c := range []struct {
		path string
		mode fs.FileMode
	}{
		{s.Dir(), fs.ModeDir | 0o700},
		{filepath.Join(s.Dir(), h[:2]), fs.ModeDir | 0o700},
		{filepath.Join(s.Dir(), "tmp"), fs.ModeDir | 0o700},
		{want, 0o600},
	} {
		fi, err := os.Lstat(c.path)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode() != c.mode {
			t.Errorf("%s: got mode %v, want %v", c.path, fi.Mode(), c.mode)
		}
	}
	if tmp := tmpFiles(t, s); len(tmp) != 0 {
		t.Errorf("got %v in tmp/ after Put, want nothing", tmp)
	}
}

// TestDedup: identical content is stored once, and the stored file is not
// rewritten by a second Put.
func TestDedup(t *testing.T) {
	for _, syncOn := range []bool{true, false} {
		t.Run(fmt.Sprintf("sync=%v", syncOn), func(t *testing.T) {
			s := openT(t, Options{Sync: syncOn})
			data := randBytes(7, 100<<10)
			id := putT(t, s, data)
			before, err := os.Stat(s.Path(id))
			if err != nil {
				t.Fatal(err)
			}
			for range 3 {
				if again := putT(t, s, data); again != id {
					t.Fatalf("got id %s, want %s", again, id)
				}
			}
			after, err := os.Stat(s.Path(id))
			if err != nil {
				t.Fatal(err)
			}
			if !os.SameFile(before, after) {
				t.Error("the blob was rewritten by an identical Put")
			}
			if got := walkAll(t, s); len(got) != 1 || got[0].ID != id || got[0].Size != int64(len(data)) {
				t.Errorf("Walk: got %v, want just %s", got, id.Short())
			}
			if tmp := tmpFiles(t, s); len(tmp) != 0 {
				t.Errorf("got %v in tmp/, want nothing", tmp)
			}
			if err := s.Sync(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestDedupReplacesDamagedCopy: a Put that finds its blob present but
// damaged (another size, or content hashed by a Store that did not write
// it) renames its good copy over it rather than trusting the name.
func TestDedupReplacesDamagedCopy(t *testing.T) {
	data := randBytes(8, 10<<10)
	tests := []struct {
		name   string
		damage func(path string) error
	}{
		{"truncated", func(p string) error { return os.Truncate(p, 100) }},
		{"empty", func(p string) error { return os.Truncate(p, 0) }},
		{"a byte flipped", func(p string) error { return flipByte(p, 5000) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "blobs")
			s, err := Open(dir, Options{Sync: true})
			if err != nil {
				t.Fatal(err)
			}
			id := putT(t, s, data)
			if err := tt.damage(s.Path(id)); err != nil {
				t.Fatal(err)
			}
			s2, err := Open(dir, Options{Sync: true}) // as after a restart
			if err != nil {
				t.Fatal(err)
			}
			putT(t, s2, data)
			if err := s2.Verify(id); err != nil {
				t.Errorf("after the second Put: %v, want the blob repaired", err)
			}
		})
	}
}

// flipByte inverts the byte at off in the file at path.
func flipByte(path string, off int64) error {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	var b [1]byte
	if _, err := f.ReadAt(b[:], off); err != nil {
		return err
	}
	b[0] ^= 0xff
	_, err = f.WriteAt(b[:], off)
	return err
}

// TestCorrupt: damaged content is caught by every read path, and never
// returned as if it were good.
func TestCorrupt(t *testing.T) {
	data := randBytes(9, 200<<10)
	damages := []struct {
		name   string
		damage func(path string) error
	}{
		{"first byte flipped", func(p string) error { return flipByte(p, 0) }},
		{"middle byte flipped", func(p string) error { return flipByte(p, 100<<10) }},
		{"last byte flipped", func(p string) error { return flipByte(p, 200<<10-1) }},
		{"truncated", func(p string) error { return os.Truncate(p, 1000) }},
		{"extended", func(p string) error { return os.Truncate(p, 300<<10) }},
		{"emptied", func(p string) error { return os.Truncate(p, 0) }},
	}
	reads := []struct {
		name string
		read func(s *Store, id ID) error
	}{
		{"Get", func(s *Store, id ID) error {
			b, err := s.Get(id)
			if b != nil {
				return fmt.Errorf("got %d bytes with the error %v, want none", len(b), err)
			}
			return err
		}},
		{"Open", func(s *Store, id ID) error {
			r, err := s.Open(id)
			if err != nil {
				return err
			}
			defer r.Close()
			_, err = io.Copy(io.Discard, r)
			return err
		}},
		{"OpenVerified", func(s *Store, id ID) error {
			f, err := s.OpenVerified(id)
			if err == nil {
				f.Close()
			}
			return err
		}},
		{"Verify", func(s *Store, id ID) error { return s.Verify(id) }},
	}
	for _, d := range damages {
		for _, r := range reads {
			t.Run(d.name+"/"+r.name, func(t *testing.T) {
				s := openT(t, Options{})
				id := putT(t, s, data)
				if err := d.damage(s.Path(id)); err != nil {
					t.Fatal(err)
				}
				err := r.read(s, id)
				if !errors.Is(err, ErrCorrupt) {
					t.Fatalf("got %v, want ErrCorrupt", err)
				}
				if !strings.Contains(err.Error(), id.String()) {
					t.Errorf("got %q, want the error to name the blob", err)
				}
			})
		}
	}
}

// TestOpenFailsAtEOF: the streaming reader hands out bytes as it reads and
// reports the damage with the read that reaches the end.
func TestOpenFailsAtEOF(t *testing.T) {
	s := openT(t, Options{})
	data := randBytes(10, 10000)
	id := putT(t, s, data)
	if err := flipByte(s.Path(id), 10); err != nil {
		t.Fatal(err)
	}
	r, err := s.Open(id)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	buf := make([]byte, 1000)
	total := 0
	for {
		n, err := r.Read(buf)
		total += n
		if err == nil {
			continue
		}
		if !errors.Is(err, ErrCorrupt) {
			t.Fatalf("after %d bytes: got %v, want ErrCorrupt", total, err)
		}
		break
	}
	if total != len(data) {
		t.Errorf("got ErrCorrupt after %d bytes, want it at the end (%d)", total, len(data))
	}
}

func TestNotFound(t *testing.T) {
	s := openT(t, Options{})
	id := Sum([]byte("never put"))
	if s.Has(id) {
		t.Error("Has: got true, want false")
	}
	if _, err := s.Get(id); !errors.Is(err, ErrNotFound) {
		t.Errorf("Get: got %v, want ErrNotFound", err)
	}
	if _, err := s.Open(id); !errors.Is(err, ErrNotFound) {
		t.Errorf("Open: got %v, want ErrNotFound", err)
	}
	if _, err := s.OpenVerified(id); !errors.Is(err, ErrNotFound) {
		t.Errorf("OpenVerified: got %v, want ErrNotFound", err)
	}
	if err := s.Verify(id); !errors.Is(err, ErrNotFound) {
		t.Errorf("Verify: got %v, want ErrNotFound", err)
	}
	if err := s.Remove(id); err != nil {
		t.Errorf("Remove of a missing blob: got %v, want nil", err)
	}
	got := putT(t, s, []byte("x"))
	if err := s.Remove(got); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get(got); !errors.Is(err, ErrNotFound) {
		t.Errorf("Get after Remove: got %v, want ErrNotFound", err)
	}
	// A removed blob needs no Sync.
	if err := s.Sync(); err != nil {
		t.Errorf("Sync after Remove: %v", err)
	}
}

// TestMaxSize: content over the cap is refused and leaves nothing behind.
func TestMaxSize(t *testing.T) {
	const limit = 100 << 10
	tests := []struct {
		size    int
		tooBig  bool
		comment string
	}{
		{0, false, "empty"},
		{limit - 1, false, "just under"},
		{limit, false, "exactly the cap"},
		{limit + 1, true, "one byte over"},
		{10 * limit, true, "far over"},
	}
	for _, tt := range tests {
		t.Run(tt.comment, func(t *testing.T) {
			s := openT(t, Options{Sync: true, MaxSize: limit})
			id, n, err := s.Put(bytes.NewReader(randBytes(11, tt.size)))
			if tt.tooBig {
				if !errors.Is(err, ErrTooLarge) {
					t.Fatalf("got %v, want ErrTooLarge", err)
				}
				if !id.IsZero() || n != 0 {
					t.Errorf("got id %s, size %d with the error, want zero", id.Short(), n)
				}
				if got := walkAll(t, s); len(got) != 0 {
					t.Errorf("got blobs %v, want none", got)
				}
			} else if err != nil || n != int64(tt.size) {
				t.Fatalf("got %d, %v; want %d, nil", n, err, tt.size)
			}
			if tmp := tmpFiles(t, s); len(tmp) != 0 {
				t.Errorf("got %v in tmp/, want nothing", tmp)
			}
		})
	}
}

// errReader fails after n bytes.
type errReader struct{ n int }

func (r *errReader) Read(p []byte) (int, error) {
	if r.n == 0 {
		return 0, syscall.EIO
	}
	k := min(len(p), r.n)
	clear(p[:k])
	r.n -= k
	return k, nil
}

func TestPutReadError(t *testing.T) {
	s := openT(t, Options{Sync: true})
	_, _, err := s.Put(&errReader{n: 1 << 20})
	if !errors.Is(err, syscall.EIO) {
		t.Fatalf("got %v, want the reader's EIO", err)
	}
	if tmp := tmpFiles(t, s); len(tmp) != 0 {
		t.Errorf("got %v in tmp/, want nothing", tmp)
	}
	if got := walkAll(t, s); len(got) != 0 {
		t.Errorf("got blobs %v, want none", got)
	}
}

// TestWalk lists exactly the blobs, skipping tmp/ and every kind of stray.
func TestWalk(t *testing.T) {
	s := openT(t, Options{})
	var want []BlobInfo
	for i := range 20 {
		data := randBytes(uint64(i), i*100)
		want = append(want, BlobInfo{ID: putT(t, s, data), Size: int64(len(data))})
	}
	slices.SortFunc(want, func(a, b BlobInfo) int { return bytes.Compare(a.ID[:], b.ID[:]) })
	other := Sum([]byte("stray")).String()
	wrongFan := "00"
	if other[:2] == wrongFan {
		wrongFan = "01"
	}
	strays := map[string]string{ // path -> "file" or "dir"
		"stray-file":                                        "file",
		"README":                                            "file",
		"tmp/.tmp-blob-0123456789abcdef":                    "file",
		"tmp/" + other:                                      "file",
		"zz/" + other:                                       "file",
		"abc/" + other:                                      "file",
		wrongFan + "/" + other:                              "file", // a blob name in the wrong fan-out
		other[:2] + "/" + strings.ToUpper(other):            "file",
		other[:2] + "/" + other[:63]:                        "file",
		other[:2] + "/.tmp-" + other + "-1234":              "file",
		other[:2] + "/" + other:                             "dir", // a directory under a blob's name
		want[0].ID.String()[:2] + "/notes.txt":              "file",
		filepath.Join("ff", strings.Repeat("f", 64)+".bak"): "file",
	}
	for p, kind := range strays {
		full := filepath.Join(s.Dir(), p)
		if err := os.MkdirAll(filepath.Dir(full), 0o700); err != nil {
			t.Fatal(err)
		}
		var err error
		if kind == "dir" {
			err = os.Mkdir(full, 0o700)
		} else {
			err = os.WriteFile(full, []byte("stray"), 0o600)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	got := walkAll(t, s)
	if !slices.Equal(got, want) {
		t.Errorf("Walk: got %d blobs, want the %d put:\ngot  %v\nwant %v", len(got), len(want), got, want)
	}
	stop := errors.New("stop")
	calls := 0
	err := s.Walk(func(BlobInfo) error { calls++; return stop })
	if err != stop || calls != 1 {
		t.Errorf("Walk with a failing fn: got %v after %d calls, want stop after 1", err, calls)
	}
}

// TestBatchSync: without Options.Sync, Put leaves the blob pending; Sync
// fdatasyncs every pending blob once and then the directories.
func TestBatchSync(t *testing.T) {
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
	var ids []ID
	for i := range 10 {
		ids = append(ids, putT(t, s, randBytes(uint64(100+i), 5000)))
	}
	putT(t, s, randBytes(100, 5000)) // a duplicate: still one sync
	if len(synced) != 0 {
		t.Fatalf("got fdatasyncs %v before Sync, want none", synced)
	}
	s.mu.Lock()
	pending, dirs := len(s.pending), len(s.pendingDirs)
	s.mu.Unlock()
	if pending != 10 || dirs == 0 {
		t.Errorf("got %d pending blobs and %d directories, want 10 and some", pending, dirs)
	}
	if err := s.Sync(); err != nil {
		t.Fatal(err)
	}
	for _, id := range ids {
		if synced[id.String()] != 1 {
			t.Errorf("blob %s: got %d fdatasyncs, want 1", id.Short(), synced[id.String()])
		}
	}
	s.mu.Lock()
	pending, dirs, fans := len(s.pending), len(s.pendingDirs), len(s.fans)
	s.mu.Unlock()
	if pending != 0 || dirs != 0 || fans == 0 {
		t.Errorf("after Sync: got %d pending blobs, %d directories and %d known fan-outs; want 0, 0 and some", pending, dirs, fans)
	}
	clear(synced)
	if err := s.Sync(); err != nil || len(synced) != 0 {
		t.Errorf("a second Sync: got %v and fdatasyncs %v, want nothing to do", err, synced)
	}
}

// TestSyncFailureRewrites: a blob whose fdatasync fails is rewritten into a
// fresh file (never fdatasynced again); if its content no longer matches,
// Sync reports ErrCorrupt and keeps it pending.
func TestSyncFailureRewrites(t *testing.T) {
	real := fdatasync
	t.Cleanup(func() { fdatasync = real })
	fdatasync = func(f *os.File) error { return syscall.EIO }

	s := openT(t, Options{})
	data := randBytes(12, 50<<10)
	id := putT(t, s, data)
	before, _ := os.Stat(s.Path(id))
	if err := s.Sync(); err != nil {
		t.Fatalf("Sync: %v, want the blob rewritten", err)
	}
	after, _ := os.Stat(s.Path(id))
	if os.SameFile(before, after) {
		t.Error("the blob was not rewritten into a fresh file")
	}
	if err := s.Verify(id); err != nil {
		t.Error(err)
	}
	if tmp := tmpFiles(t, s); len(tmp) != 0 {
		t.Errorf("got %v in tmp/, want nothing", tmp)
	}

	id2 := putT(t, s, randBytes(13, 50<<10))
	if err := flipByte(s.Path(id2), 7); err != nil {
		t.Fatal(err)
	}
	if err := s.Sync(); !errors.Is(err, ErrCorrupt) || !errors.Is(err, syscall.EIO) {
		t.Errorf("Sync of a damaged blob: got %v, want ErrCorrupt and EIO", err)
	}
	s.mu.Lock()
	still := s.pending[id2]
	s.mu.Unlock()
	if !still {
		t.Error("the blob that could not be synced is no longer pending")
	}
}

func TestCleanTemp(t *testing.T) {
	s := openT(t, Options{})
	id := putT(t, s, []byte("keep me"))
	for _, name := range []string{".tmp-blob-1", ".tmp-blob-2", "whatever"} {
		if err := os.WriteFile(filepath.Join(s.Dir(), "tmp", name), []byte("partial"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.CleanTemp(); err != nil {
		t.Fatal(err)
	}
	if tmp := tmpFiles(t, s); len(tmp) != 0 {
		t.Errorf("got %v in tmp/ after CleanTemp, want nothing", tmp)
	}
	if err := s.Verify(id); err != nil {
		t.Errorf("CleanTemp touched a blob: %v", err)
	}
	if err := os.Remove(filepath.Join(s.Dir(), "tmp")); err != nil {
		t.Fatal(err)
	}
	if err := s.CleanTemp(); err != nil {
		t.Errorf("CleanTemp without tmp/: got %v, want nil", err)
	}
	// Put recreates tmp/.
	putT(t, s, []byte("after"))
}

func TestConcurrentPuts(t *testing.T) {
	for _, syncOn := range []bool{true, false} {
		t.Run(fmt.Sprintf("sync=%v", syncOn), func(t *testing.T) {
			s := openT(t, Options{Sync: syncOn})
			const contents = 20
			var wg sync.WaitGroup
			for g := range 8 {
				wg.Go(func() {
					for i := range contents {
						data := randBytes(uint64((i+g)%contents), 1000+(i+g)%contents*3000)
						id, _, err := s.Put(bytes.NewReader(data))
						if err != nil || id != Sum(data) {
							t.Errorf("Put: got %s, %v; want %s", id.Short(), err, Sum(data).Short())
						}
					}
				})
			}
			wg.Wait()
			if err := s.Sync(); err != nil {
				t.Fatal(err)
			}
			got := walkAll(t, s)
			if len(got) != contents {
				t.Errorf("got %d blobs, want %d", len(got), contents)
			}
			for _, b := range got {
				if err := s.Verify(b.ID); err != nil {
					t.Error(err)
				}
			}
			if tmp := tmpFiles(t, s); len(tmp) != 0 {
				t.Errorf("got %v in tmp/, want nothing", tmp)
			}
		})
	}
}

func TestOpenCreatesStore(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "a", "b")
	s, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
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

// zeroReader yields n zero bytes without holding them.
type zeroReader struct{ n int64 }

func (z *zeroReader) Read(p []byte) (int, error) {
	if z.n == 0 {
		return 0, io.EOF
	}
	k := int(min(int64(len(p)), z.n))
	clear(p[:k])
	z.n -= int64(k)
	return k, nil
}

// TestPutHuge streams 2 GiB + 1 byte, generated by a reader and never held,
// through Put, and checks that the heap stays small: the content is never
// held whole. The size crosses 2^31, where a 32-bit length would overflow;
// on a machine that writes the page cache at ~0.3 GiB/s it takes about 8 s,
// so -short skips it.
func TestPutHuge(t *testing.T) {
	if testing.Short() {
		t.Skip("streams 2 GiB through Put")
	}
	const size = 2<<30 + 1
	s := openT(t, Options{})
	runtime.GC()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	// Sample the heap while Put runs.
	done := make(chan struct{})
	peak := make(chan uint64)
	go func() {
		var ms runtime.MemStats
		var top uint64
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for {
			runtime.ReadMemStats(&ms)
			top = max(top, ms.HeapInuse)
			select {
			case <-done:
				peak <- top
				return
			case <-tick.C:
			}
		}
	}()
	start := time.Now()
	id, n, err := s.Put(&zeroReader{n: size})
	close(done)
	maxHeap := <-peak
	if err != nil {
		t.Fatal(err)
	}
	took := time.Since(start)
	// sha256 of 2 GiB + 1 zero bytes, computed once (it takes a second).
	want, _ := ParseID("b8030a8ab89280935633d8d991da3d9907c0f12e8b6fc3bfc515f4d440872b6e")
	if id != want || n != size {
		t.Errorf("got %s, %d; want %s, %d", id.Short(), n, want.Short(), int64(size))
	}
	fi, err := os.Stat(s.Path(id))
	if err != nil || fi.Size() != size {
		t.Fatalf("got %v, %v; want a %d-byte blob", fi, err, int64(size))
	}
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	const limit = 64 << 20
	if grew := int64(maxHeap) - int64(before.HeapInuse); grew > limit {
		t.Errorf("heap grew by %d MiB putting %d MiB, want under %d MiB", grew>>20, size>>20, limit>>20)
	}
	t.Logf("put %d MiB in %v (%.0f MiB/s); heap in use %d MiB before, %d MiB at most during",
		size>>20, took.Round(time.Millisecond), float64(size>>20)/took.Seconds(), before.HeapInuse>>20, maxHeap>>20)
	if err := s.Remove(id); err != nil {
		t.Fatal(err)
	}
}
