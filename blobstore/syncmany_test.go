package blobstore

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
)

// TestKeepSyncEachWhenMuchIsDirty: a batch-mode Sync of many kept files
// syncs each file alone, then kept/, and no syncfs, when the system holds
// much more dirty data than the files (a syncfs would write all of it);
// with as little as the files, one syncfs (TestKeepSyncManyWithSyncfs). A
// failed fdatasync fails Sync and leaves every file pending for the next.
// This is the plain path, without io_uring (TestKeepSyncRing: with it).
func TestKeepSyncEachWhenMuchIsDirty(t *testing.T) {
	var mu sync.Mutex
	var log []string
	note := func(s string) { mu.Lock(); log = append(log, s); mu.Unlock() }
	realData, realDir, realFS, realDirty, realRing := fdatasync, syncDirFile, syncFS, dirtyBytes, newSyncRing
	t.Cleanup(func() {
		fdatasync, syncDirFile, syncFS, dirtyBytes, newSyncRing = realData, realDir, realFS, realDirty, realRing
	})
	newSyncRing = func() (*ring, error) { return nil, errors.New("no io_uring in this test") }
	var fail error
	fdatasync = func(f *os.File) error {
		note("data " + filepath.Base(f.Name()))
		if fail != nil {
			return fail
		}
		return realData(f)
	}
	syncDirFile = func(d *os.File) error { note("dir " + filepath.Base(d.Name())); return realDir(d) }
	syncFS = func(d *os.File) error { note("fs"); return realFS(d) }
	dirtyBytes = func() (int64, bool) { return 1 << 40, true }
	base := t.TempDir()
	s := openT(t, Options{})
	var want []string
	var ids []ID
	keep := func(n int) {
		for i := range n {
			f := wsFile(t, filepath.Join(base, "ws"), []byte(fmt.Sprintf("kept %d %d\n", len(ids), i)))
			id, _, ok, err := s.Keep(f, nil)
			f.Close()
			if err != nil || !ok {
				t.Fatalf("Keep: %v %v", ok, err)
			}
			ids = append(ids, id)
			want = append(want, "data "+id.String())
		}
	}
	keep(20)
	if err := s.Sync(); err != nil {
		t.Fatal(err)
	}
	check := func() {
		t.Helper()
		if len(log) == 0 || log[len(log)-1] != "dir "+keptDirName {
			t.Fatalf("syncs %v: kept/ not synced last", log)
		}
		got := slices.Sorted(slices.Values(log[:len(log)-1]))
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Fatalf("syncs %v, want each file's fdatasync %v, then kept/", log, want)
		}
	}
	check()
	for _, id := range ids {
		if err := s.Verify(id); err != nil {
			t.Fatalf("Verify %s: %v", id.Short(), err)
		}
	}

	log, want = nil, nil
	keep(5)
	fail = errors.New("injected fdatasync failure")
	if err := s.Sync(); err == nil {
		t.Fatal("Sync with a failing fdatasync succeeded")
	}
	fail, log = nil, nil
	if err := s.Sync(); err != nil {
		t.Fatal(err)
	}
	check() // the same five again, nothing left out
}
