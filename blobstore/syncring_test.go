package blobstore

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"

	"golang.org/x/sys/unix"
)

// plainSyncs makes the Store's sync ring unavailable for the test and
// records, through the plain path's seams, the files it fdatasyncs and
// the directories it fsyncs, in order.
func plainSyncs(t *testing.T) *[]string {
	t.Helper()
	var mu sync.Mutex
	log := &[]string{}
	realRing, realData, realDir := newSyncRing, fdatasync, syncDirFile
	t.Cleanup(func() { newSyncRing, fdatasync, syncDirFile = realRing, realData, realDir })
	newSyncRing = func() (*ring, error) { return nil, errors.New("no io_uring in this test") }
	fdatasync = func(f *os.File) error {
		mu.Lock()
		*log = append(*log, "data "+filepath.Base(f.Name()))
		mu.Unlock()
		return realData(f)
	}
	syncDirFile = func(d *os.File) error {
		mu.Lock()
		*log = append(*log, "dir "+filepath.Base(d.Name()))
		mu.Unlock()
		return realDir(d)
	}
	return log
}

// keepN keeps n new files of the workspace base/ws in s and returns their ids.
func keepN(t *testing.T, s *Store, base string, n int) []ID {
	t.Helper()
	var ids []ID
	for i := range n {
		f := wsFile(t, filepath.Join(base, "ws"), []byte(fmt.Sprintf("kept %d of %d\n", i, n)))
		id, _, ok, err := s.Keep(f, nil)
		f.Close()
		if err != nil || !ok {
			t.Fatalf("Keep: %v %v", ok, err)
		}
		ids = append(ids, id)
	}
	return ids
}

// TestKeepSyncRing: a batch-mode Sync that syncs kept files one by one
// does it through the io_uring (an open, fdatasync and close of each file,
// then kept/), in windows of syncRingFiles: 300 files, one of them gone
// from kept/ before the Sync (skipped, as on the plain path), make no
// plain fdatasync or directory fsync, every present file is counted synced
// and kept/ once; the blobs verify, and nothing stays pending.
func TestKeepSyncRing(t *testing.T) {
	if r, err := newSyncRing(); err != nil {
		t.Skipf("no io_uring here: %v", err) // TestKeepSyncRingFallback covers the plain path
	} else {
		r.close()
	}
	realDirty, realData, realDir := dirtyBytes, fdatasync, syncDirFile
	t.Cleanup(func() { dirtyBytes, fdatasync, syncDirFile = realDirty, realData, realDir })
	dirtyBytes = func() (int64, bool) { return 1 << 40, true } // one by one, not a syncfs
	var plain []string
	fdatasync = func(f *os.File) error { plain = append(plain, "data "+f.Name()); return realData(f) }
	syncDirFile = func(d *os.File) error { plain = append(plain, "dir "+d.Name()); return realDir(d) }
	s := openT(t, Options{})
	base := t.TempDir()
	ids := keepN(t, s, base, 300)
	// One gone, as a stash named and renamed since.
	if err := os.Remove(s.keptPath(ids[7])); err != nil {
		t.Fatal(err)
	}
	files, dirs := ringSynced.Load(), ringDirSynced.Load()
	if err := s.Sync(); err != nil {
		t.Fatal(err)
	}
	if len(plain) != 0 {
		t.Fatalf("plain syncs %v, want none: all through the ring", plain)
	}
	if got := ringSynced.Load() - files; got != 299 {
		t.Fatalf("%d files synced through the ring, want 299", got)
	}
	if got := ringDirSynced.Load() - dirs; got != 1 {
		t.Fatalf("kept/ synced %d times through the ring, want once, after the files", got)
	}
	s.kmu.Lock()
	left := len(s.kept.pending)
	s.kmu.Unlock()
	if left != 0 {
		t.Fatalf("%d files still pending after Sync", left)
	}
	for i, id := range ids {
		if i == 7 {
			continue
		}
		if err := s.Verify(id); err != nil {
			t.Fatalf("Verify %s: %v", id.Short(), err)
		}
	}
	// No descriptor of a kept file is left open in the process.
	ents, _ := os.ReadDir("/proc/self/fd")
	for _, e := range ents {
		if target, err := os.Readlink(filepath.Join("/proc/self/fd", e.Name())); err == nil && filepath.Dir(target) == filepath.Join(s.dir, keptDirName) {
			t.Errorf("descriptor %s open on %s after Sync", e.Name(), target)
		}
	}
}

// TestKeepSyncRingFallback: without io_uring (newSyncRing fails), and when
// the ring fails in use (its descriptor closed behind it: io_uring_enter
// fails, what it did is unknown), a batch-mode Sync syncs each file with
// its own fdatasync and then kept/, as before the ring; after a failure
// the ring is not used again.
func TestKeepSyncRingFallback(t *testing.T) {
	realDirty := dirtyBytes
	t.Cleanup(func() { dirtyBytes = realDirty })
	dirtyBytes = func() (int64, bool) { return 1 << 40, true }
	check := func(log []string, ids []ID) {
		t.Helper()
		var want []string
		for _, id := range ids {
			want = append(want, "data "+id.String())
		}
		if len(log) == 0 || log[len(log)-1] != "dir "+keptDirName {
			t.Fatalf("syncs %v: kept/ not synced last", log)
		}
		got := slices.Sorted(slices.Values(log[:len(log)-1]))
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Fatalf("syncs %v, want each file's fdatasync %v, then kept/", log, want)
		}
	}
	t.Run("no io_uring", func(t *testing.T) {
		log := plainSyncs(t)
		s := openT(t, Options{})
		ids := keepN(t, s, t.TempDir(), 20)
		if err := s.Sync(); err != nil {
			t.Fatal(err)
		}
		check(*log, ids)
	})
	t.Run("ring fails", func(t *testing.T) {
		r, err := newSyncRing()
		if err != nil {
			t.Skipf("no io_uring here: %v", err)
		}
		log := plainSyncs(t)
		newSyncRing = func() (*ring, error) { return r, nil }
		s := openT(t, Options{})
		ids := keepN(t, s, t.TempDir(), 20)
		// A descriptor that is no ring: io_uring_enter fails.
		ringFd := r.fd
		null, err := unix.Open("/dev/null", unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			t.Fatal(err)
		}
		r.fd = null
		t.Cleanup(func() { r.fd = ringFd; s.closeSyncRing() })
		if err := s.Sync(); err != nil {
			t.Fatal(err)
		}
		check(*log, ids)
		if !s.syncDead {
			t.Fatal("the ring that failed is still in use")
		}
		*log = nil
		more := keepN(t, s, t.TempDir(), 3)
		if err := s.Sync(); err != nil {
			t.Fatal(err)
		}
		check(*log, more)
	})
}

// TestSyncRingResults: how the ring's completions are read. A file gone
// (ENOENT at its open) is skipped; a failed open or fdatasync fails the
// Sync with the file's name; an fdatasync that finds no file in the slot
// its open filled (a kernel that looks slots up at submission) says the
// ring cannot do the work; kept/'s fsync failing fails it, unless the
// filesystem cannot fsync directories (EINVAL: synced the plain way).
func TestSyncRingResults(t *testing.T) {
	dir, err := os.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer dir.Close()
	e := func(errno unix.Errno) int32 { return -int32(errno) }
	batch := []string{"a", "b"}
	for _, c := range []struct {
		name string
		res  []int32
		want error // nil, errRingUnusable, or an errno the error wraps
	}{
		{"all synced", []int32{0, 0, 0, 0, 0, 0, 0}, nil},
		{"one gone", []int32{0, 0, 0, e(unix.ENOENT), e(unix.ECANCELED), e(unix.ECANCELED), 0}, nil},
		{"open fails", []int32{0, 0, 0, e(unix.EACCES), e(unix.ECANCELED), e(unix.ECANCELED), 0}, unix.EACCES},
		{"fdatasync fails", []int32{0, e(unix.EIO), 0, 0, 0, 0, 0}, unix.EIO},
		{"close fails", []int32{0, 0, e(unix.EBADF), 0, 0, 0, 0}, nil},
		{"slot not filled", []int32{0, e(unix.EBADF), e(unix.EBADF), 0, 0, 0, 0}, errRingUnusable},
		{"kept/ fails", []int32{0, 0, 0, 0, 0, 0, e(unix.EIO)}, unix.EIO},
		{"kept/ cannot", []int32{0, 0, 0, 0, 0, 0, e(unix.EINVAL)}, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := syncRingResults(dir, batch, c.res, true)
			if c.want == nil && err != nil || c.want != nil && !errors.Is(err, c.want) {
				t.Fatalf("got %v, want %v", err, c.want)
			}
		})
	}
}

// TestKeepSyncRingSmallWindow: with the ring, a window of fewer than
// syncfsRingFrom kept files is synced through it without a look at the
// system's dirty data, even when a syncfs would otherwise be chosen; from
// syncfsRingFrom files the choice is as without the ring.
func TestKeepSyncRingSmallWindow(t *testing.T) {
	if r, err := newSyncRing(); err != nil {
		t.Skipf("no io_uring here: %v", err)
	} else {
		r.close()
	}
	realDirty, realFS, realRingFrom := dirtyBytes, syncFS, syncfsRingFrom
	t.Cleanup(func() { dirtyBytes, syncFS, syncfsRingFrom = realDirty, realFS, realRingFrom })
	syncfsRingFrom = 8
	looks, fsyncs := 0, 0
	dirtyBytes = func() (int64, bool) { looks++; return 0, true } // a syncfs, if asked
	syncFS = func(d *os.File) error { fsyncs++; return realFS(d) }
	s := openT(t, Options{})
	base := t.TempDir()
	files := ringSynced.Load()
	keepN(t, s, base, 7)
	if err := s.Sync(); err != nil {
		t.Fatal(err)
	}
	if got := ringSynced.Load() - files; got != 7 || looks != 0 || fsyncs != 0 {
		t.Fatalf("7 files: %d synced through the ring, %d looks at dirty data, %d syncfs; want 7, 0, 0", got, looks, fsyncs)
	}
	keepN(t, s, base, 8)
	if err := s.Sync(); err != nil {
		t.Fatal(err)
	}
	if looks != 1 || fsyncs != 1 {
		t.Fatalf("8 files with nothing else dirty: %d looks, %d syncfs; want 1, 1", looks, fsyncs)
	}
}
