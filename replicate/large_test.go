package replicate

import (
	"context"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/zerofs/zerofs/record"
	"github.com/zerofs/zerofs/rewind"
)

// TestLargeBlobStreams: content larger than streamAbove goes up from a
// temporary file, never whole in memory (what the upload allocates stays
// well below the content's size), with and without a key, and restores
// byte for byte: a file read live by a base, and its before-state from the
// store after it changed. The restore streams too: it holds neither
// version whole.
func TestLargeBlobStreams(t *testing.T) {
	startS3(t)
	defer func(n int64) { streamAbove = n }(streamAbove)
	streamAbove = 1 << 20
	for _, keyed := range []bool{false, true} {
		// The heap's bound is checked on a 24 MiB file, with and without
		// a key, under the race detector too (the keyed half took 250 s
		// there while a restore opened a sealed blob whole; streamed, it
		// takes as long as the plain half).
		size := 24 << 20
		name := "plain"
		var key []byte
		if keyed {
			name, key = "keyed", make([]byte, 32)
		}
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			w := openWorkspace(t, dir)
			defer w.close()
			u := URL{Bucket: "replicas", Prefix: "large-" + name}
			r := replicator(t, w, u, Options{BaseEvery: time.Nanosecond, Key: key})
			big := filepath.Join(dir, "big.bin")
			data := make([]byte, size)
			rand.NewChaCha8([32]byte{1}).Read(data) // incompressible
			write := func() {
				release, _, err := w.eng.Begin(context.Background(), rewind.Caller{PID: 1}, rewind.Change{Path: "big.bin"})
				if err != nil {
					t.Fatal(err)
				}
				err = os.WriteFile(big, data, 0o644)
				release()
				if err != nil {
					t.Fatal(err)
				}
			}
			write()
			first, err := w.eng.BeginStep(context.Background(), "big", nil)
			if err != nil {
				t.Fatal(err)
			}
			var grew int64
			grew, err = heapGrowth(func() error { return r.Once(context.Background()) }) // the base reads big.bin live
			if err != nil {
				t.Fatal(err)
			}
			if grew > int64(size/2) {
				t.Errorf("uploading a %d-byte file grew the heap by %d bytes: it was held in memory", size, grew)
			} else {
				t.Logf("uploading a %d-byte file grew the heap by at most %d bytes", size, grew)
			}
			data[0], data[size-1] = 'x', 'y'
			write() // its before-state, a blob in the store
			if _, err := w.eng.BeginStep(context.Background(), "changed", nil); err != nil {
				t.Fatal(err)
			}
			if err := r.Once(context.Background()); err != nil {
				t.Fatal(err)
			}
			if n := r.State().Streamed; n < 2 {
				t.Errorf("%d objects streamed, want both versions of big.bin", n)
			}
			for i, at := range []record.Seq{r.State().Base, first.Seq} {
				b, _ := OpenS3(context.Background(), u)
				dst := filepath.Join(t.TempDir(), "r")
				// Both versions of big.bin come down (the history keeps
				// the first as the second's before-state).
				var res RestoreResult
				grew, err := heapGrowth(func() (err error) {
					res, err = Restore(context.Background(), b, u, dst, RestoreOptions{At: at, HasAt: true, Key: key, Logger: quiet, SameOwner: true})
					return err
				})
				if err != nil {
					t.Fatal(err)
				}
				if res.Blobs < 2 {
					t.Errorf("the restore fetched %d blobs, want both versions of big.bin", res.Blobs)
				}
				// What a restore holds whatever the content's size (about
				// 15 MB: the blob store's 4 MiB chunk buffers, a decoder,
				// the engine opening the store) stays below one blob; a
				// restore holding a blob whole holds that on top.
				if i == 0 && grew > int64(size) {
					t.Errorf("restoring two %d-byte blobs grew the heap by %d bytes: they were held in memory", size, grew)
				} else if i == 0 {
					t.Logf("restoring two %d-byte blobs grew the heap by at most %d bytes", size, grew)
				}
				sameTree(t, "restore --at "+itoa(at), treeOf(t, dst), stateAt(t, w.eng, at))
			}
		})
	}
}

// heapGrowth runs fn and returns how far the heap's peak rose above where
// it stood before, with the collector made eager so that the heap is what
// is held, not garbage.
func heapGrowth(fn func() error) (int64, error) {
	defer debug.SetGCPercent(debug.SetGCPercent(5))
	runtime.GC()
	sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	metrics.Read(sample)
	base := sample[0].Value.Uint64()
	peak := base
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			case <-time.After(time.Millisecond):
			}
			metrics.Read(sample)
			peak = max(peak, sample[0].Value.Uint64())
		}
	}()
	err := fn()
	close(stop)
	<-done
	return int64(peak) - int64(base), err
}

// TestXattrsRestored: a file and a directory unchanged since before
// replication (read live by the base), the workspace's root, and a
// directory's and a file's recorded before-states keep their xattrs
// through a restore.
func TestXattrsRestored(t *testing.T) {
	startS3(t)
	dir := t.TempDir()
	seedTree(t, dir)
	same := filepath.Join(dir, "src/pkg0/f0.go")
	changed := filepath.Join(dir, "src/pkg1/f1.go")
	sameDir := filepath.Join(dir, "src/pkg0")
	changedDir := filepath.Join(dir, "src/pkg1")
	for _, p := range []string{same, changed, sameDir, changedDir, dir} {
		if err := unix.Setxattr(p, "user.note", []byte("kept "+filepath.Base(p)), 0); err != nil {
			t.Skipf("no user xattrs here: %v", err)
		}
	}
	w := openWorkspace(t, dir)
	defer w.close()
	u := URL{Bucket: "replicas", Prefix: "xattrs"}
	r := replicator(t, w, u, Options{BaseEvery: time.Nanosecond})
	first, err := w.eng.BeginStep(context.Background(), "one", nil)
	if err != nil {
		t.Fatal(err)
	}
	// changed is rewritten in a later step: its before-state (a record)
	// carries its xattrs; the new file has none.
	release, _, err := w.eng.Begin(context.Background(), rewind.Caller{PID: 1}, rewind.Change{Path: "src/pkg1/f1.go"})
	if err != nil {
		t.Fatal(err)
	}
	os.Remove(changed)
	os.WriteFile(changed, []byte("new\n"), 0o644)
	release()
	// changedDir's xattr changes: its before-state (a record) carries
	// the old one, the base reads the new one live.
	release, _, err = w.eng.Begin(context.Background(), rewind.Caller{PID: 1}, rewind.Change{Path: "src/pkg1"})
	if err != nil {
		t.Fatal(err)
	}
	err = unix.Setxattr(changedDir, "user.note", []byte("changed"), 0)
	release()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.eng.BeginStep(context.Background(), "two", nil); err != nil {
		t.Fatal(err)
	}
	if err := r.Once(context.Background()); err != nil {
		t.Fatal(err)
	}
	get := func(p string) string {
		buf := make([]byte, 256)
		n, err := unix.Getxattr(p, "user.note", buf)
		if err != nil {
			return "none (" + err.Error() + ")"
		}
		return string(buf[:n])
	}
	root := filepath.Base(dir)
	newest := restoreAt(t, u, r.State().Base)
	older := restoreAt(t, u, first.Seq)
	for _, c := range []struct {
		dir, path, want, what string
	}{
		{newest, "src/pkg0/f0.go", "kept f0.go", "an unchanged file"},
		{newest, "src/pkg0", "kept pkg0", "an unchanged directory"},
		{newest, "src/pkg1", "changed", "a changed directory"},
		{newest, "", "kept " + root, "the root"},
		{older, "src/pkg1/f1.go", "kept f1.go", "a file's recorded before-state"},
		{older, "src/pkg1", "kept pkg1", "a directory's recorded before-state"},
		{older, "src/pkg0/f0.go", "kept f0.go", "an unchanged file"},
		{older, "src/pkg0", "kept pkg0", "an unchanged directory"},
		{older, "", "kept " + root, "the root"},
	} {
		at := "the newest state"
		if c.dir == older {
			at = "--at " + itoa(first.Seq)
		}
		if got := get(filepath.Join(c.dir, c.path)); got != c.want {
			t.Errorf("%s's xattr (%q) after a restore of %s: %s, want %q", c.what, c.path, at, got, c.want)
		}
	}
}

// TestOwnersRestored: owners come back through a restore (as root) that
// asks for them (SameOwner: the replica is plain, so by default they do
// not: TestRestorePlainReplicaTakesNoPrivilege in cmd/zerofs): of a
// file and a directory unchanged since before replication (read live by
// the base), of a file whose owner changed (its before-state, a record,
// at the older state; its new owner at the newest), and of a symlink.
// Without SameOwner every path is the restoring user's.
func TestOwnersRestored(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("owners are restored only as root")
	}
	startS3(t)
	dir := t.TempDir()
	seedTree(t, dir)
	owners := map[string][2]int{
		"src/pkg0/f0.go": {65534, 65534},
		"src/pkg1/f1.go": {1000, 1001},
		"src/pkg2":       {1002, 1003},
		"p1":             {1004, 1005}, // the symlink itself
	}
	for p, o := range owners {
		if err := os.Lchown(filepath.Join(dir, p), o[0], o[1]); err != nil {
			t.Fatal(err)
		}
	}
	w := openWorkspace(t, dir)
	defer w.close()
	u := URL{Bucket: "replicas", Prefix: "owners"}
	r := replicator(t, w, u, Options{BaseEvery: time.Nanosecond, Logger: quiet})
	first, err := w.eng.BeginStep(context.Background(), "one", nil)
	if err != nil {
		t.Fatal(err)
	}
	release, _, err := w.eng.Begin(context.Background(), rewind.Caller{PID: 1}, rewind.Change{Path: "src/pkg1/f1.go"})
	if err != nil {
		t.Fatal(err)
	}
	err = os.Lchown(filepath.Join(dir, "src/pkg1/f1.go"), 2000, 2001)
	release()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.eng.BeginStep(context.Background(), "two", nil); err != nil {
		t.Fatal(err)
	}
	if err := r.Once(context.Background()); err != nil {
		t.Fatal(err)
	}
	owner := func(p string) [2]int {
		var st unix.Stat_t
		if err := unix.Lstat(p, &st); err != nil {
			t.Fatal(err)
		}
		return [2]int{int(st.Uid), int(st.Gid)}
	}
	restore := func(at record.Seq, same bool) string {
		b, err := OpenS3(context.Background(), u)
		if err != nil {
			t.Fatal(err)
		}
		dir := filepath.Join(t.TempDir(), "restored")
		res, err := Restore(context.Background(), b, u, dir, RestoreOptions{At: at, HasAt: true, SameOwner: same})
		if err != nil {
			t.Fatalf("restore %s --at %d: %v", u, at, err)
		}
		if same != res.Dropped.Empty() {
			t.Errorf("restore --at %d (same owner %v) dropped %+v", at, same, res.Dropped)
		}
		return dir
	}
	for _, d := range []string{restore(r.State().Base, false), restore(first.Seq, false)} {
		for p := range owners {
			if got := owner(filepath.Join(d, p)); got != [2]int{0, 0} {
				t.Errorf("%s's owner after a restore without SameOwner: %v, want the restoring user's", p, got)
			}
		}
	}
	newest := restore(r.State().Base, true)
	older := restore(first.Seq, true)
	for p, o := range owners {
		for _, d := range []string{newest, older} {
			want := o
			if p == "src/pkg1/f1.go" && d == newest {
				want = [2]int{2000, 2001}
			}
			if got := owner(filepath.Join(d, p)); got != want {
				at := "the newest state"
				if d == older {
					at = "--at " + itoa(first.Seq)
				}
				t.Errorf("%s's owner after a restore of %s: %v, want %v", p, at, got, want)
			}
		}
	}
}
