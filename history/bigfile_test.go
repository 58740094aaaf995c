package history_test

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	zfs "github.com/zerofs/zerofs/fs"
	"github.com/zerofs/zerofs/history"
	"github.com/zerofs/zerofs/internal/testsupport"
	"github.com/zerofs/zerofs/record"
)

// TestBigFilesAreNeverReadWhole: issue 14, defect 6, in the views. A
// 1 GiB sparse file with a 1-byte change made root's `zerofs log --stat`
// take 88 s and 2.1 GB of memory and `zerofs diff` 104 s and 3.2 GB (10 GiB:
// ten times that): both read the file whole into memory to hash or
// compare it. A file over 64 MiB is compared by its sha256, streamed, and
// shown as binary. Here a 256 MiB sparse file: the log and the diff
// allocate a small fraction of it, and say the right thing.
func TestBigFilesAreNeverReadWhole(t *testing.T) {
	testsupport.RequireFUSE(t)
	const size = 256 << 20
	ctx := context.Background()
	ws := t.TempDir()
	m, err := zfs.Mount(ctx, zfs.Options{Workspace: ws, Mountpoint: t.TempDir(),
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), SelfOpens: true})
	if err != nil {
		t.Fatal(err)
	}
	unmounted := false
	unmount := func() {
		if !unmounted {
			unmounted = true
			testsupport.Unmount(t, m.Mountpoint(), 20*time.Second, m.Unmount)
		}
	}
	t.Cleanup(unmount)
	mp := m.Mountpoint()
	step := func(label string) record.Seq { return stepAt(t, mp, label) }
	writeAt := func(off int64, b string) {
		f, err := os.OpenFile(filepath.Join(mp, "big"), os.O_WRONLY|os.O_CREATE, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if err := f.Truncate(size); err != nil {
			t.Fatal(err)
		}
		if _, err := f.WriteAt([]byte(b), off); err != nil {
			t.Fatal(err)
		}
	}
	step("make")
	writeAt(size/2, "x")
	made := step("change")
	writeAt(size/4, "y")
	step("after")
	unmount()
	wsp, err := history.Find(ws)
	if err != nil {
		t.Fatal(err)
	}
	src, err := history.Open(ctx, wsp, history.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	allocated := func(what string, fn func()) {
		t.Helper()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		fn()
		runtime.ReadMemStats(&after)
		if n := after.TotalAlloc - before.TotalAlloc; n > size/8 {
			t.Errorf("%s allocated %d bytes for a %d-byte sparse file", what, n, size)
		}
	}
	allocated("Log with changes", func() {
		ents, err := history.Log(src, history.LogOptions{Changes: true})
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, e := range ents {
			for _, c := range e.Changes {
				got = append(got, string(c.Change)+" "+c.Path)
			}
		}
		if s := strings.Join(got, ","); s != "modified big,added big" {
			t.Errorf("log changes = %s, want modified big,added big", s)
		}
	})
	allocated("Diff", func() {
		fds, err := history.Diff(src, made, history.Now, nil)
		if err != nil {
			t.Fatal(err)
		}
		if len(fds) != 1 || !strings.Contains(fds[0].Text, "Binary files a/big and b/big differ") {
			t.Errorf("Diff(%d, now) = %+v", made, fds)
		}
	})
	// Unchanged big content: no diff (compared by its hash).
	fds, err := history.Diff(src, history.Now, history.Now, nil)
	if err != nil || len(fds) != 0 {
		t.Errorf("Diff(now, now) = %+v, %v; want none", fds, err)
	}
}
