package rewind

import (
	"context"
	"crypto/sha256"
	"io"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/zerofs/zerofs/internal/durable"
)

// sparseSize is the logical size of the sparse file these tests write
// into: over blobstore's threshold for a copy (64 MiB), mostly holes.
const sparseSize = 128 << 20

// sparseWS makes ws/big: sparseSize bytes, data in three blocks.
func sparseWS(t *testing.T, ws string) []byte {
	t.Helper()
	f, err := os.Create(filepath.Join(ws, "big"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := f.Truncate(sparseSize); err != nil {
		t.Fatal(err)
	}
	sum := sha256.New()
	for i, off := range []int64{0, 50 << 20, sparseSize - 4096} {
		b := make([]byte, 4096)
		for j := range b {
			b[j] = byte(i*7 + j%251 + 1)
		}
		if _, err := f.WriteAt(b, off); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := io.Copy(sum, io.NewSectionReader(f, 0, sparseSize)); err != nil {
		t.Fatal(err)
	}
	if off, err := unix.Seek(int(f.Fd()), 0, unix.SEEK_HOLE); err != nil || off >= sparseSize {
		t.Skip("the test directory's filesystem does not report holes")
	}
	return sum.Sum(nil)
}

// checkSparse checks that ws/big hashes to want and allocates no more
// than its data (three blocks) and some slack.
func checkSparse(t *testing.T, p string, want []byte) {
	t.Helper()
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	h := sha256.New()
	if n, err := io.Copy(h, f); err != nil || n != sparseSize {
		t.Fatalf("%s: %d bytes, %v; want %d", p, n, err, sparseSize)
	}
	if string(h.Sum(nil)) != string(want) {
		t.Fatalf("%s: content differs from the recorded state", p)
	}
	var st unix.Stat_t
	unix.Fstat(int(f.Fd()), &st)
	if st.Blocks*512 > 1<<20 {
		t.Fatalf("%s allocates %d bytes; its data is 12 KiB", p, st.Blocks*512)
	}
}

// TestSparseWriteStashed: issue 14, defect 6. A write into a large sparse
// file is captured by a copy of its data, recorded by its stash name (no
// hash on the request path); @T reads it before and after the namer runs,
// and a rewind restores it byte for byte, allocating only its data.
func TestSparseWriteStashed(t *testing.T) {
	for _, sync := range []bool{false, true} {
		t.Run(map[bool]string{false: "batch", true: "always"}[sync], func(t *testing.T) {
			ctx := context.Background()
			dir := t.TempDir()
			ws, store := filepath.Join(dir, "ws"), filepath.Join(dir, "store")
			os.Mkdir(ws, 0o755)
			want := sparseWS(t, ws)
			e := openAt(t, ws, Options{StoreDir: store, Sync: sync})
			ev, err := e.BeginStep(ctx, "w", nil)
			if err != nil {
				t.Fatal(err)
			}
			// Hold the namer back, as a loaded machine would (and let it
			// go before Close, which names, if the test fails).
			e.namer.mu.Lock()
			held := true
			defer func() {
				if held {
					e.namer.mu.Unlock()
				}
			}()
			release, _, err := e.Begin(ctx, Caller{}, Change{Path: "big"})
			if err != nil {
				t.Fatal(err)
			}
			un := e.index.Unnamed()
			if len(un) != 1 || un[0].Path != "big" {
				release()
				t.Fatalf("unnamed records after the capture: %v; want big's stash", un)
			}
			f, err := os.OpenFile(filepath.Join(ws, "big"), os.O_WRONLY, 0)
			if err != nil {
				t.Fatal(err)
			}
			f.WriteAt([]byte("x"), 70<<20)
			f.Close()
			release()
			e.namer.mu.Unlock()
			held = false
			readAt := func(what string) {
				t.Helper()
				ent, err := e.StateAt("big", ev.Seq)
				if err != nil || !ent.Exists || ent.Live {
					t.Fatalf("%s: @%d/big: exists %v live %v, %v", what, ev.Seq, ent.Exists, ent.Live, err)
				}
				c, err := e.OpenContent(ent)
				if err != nil {
					t.Fatal(err)
				}
				h := sha256.New()
				io.Copy(h, c)
				c.Close()
				if string(h.Sum(nil)) != string(want) {
					t.Fatalf("%s: @%d/big differs from the state before the write", what, ev.Seq)
				}
			}
			readAt("before naming") // names it on demand
			if err := e.NameStashes(ctx); err != nil {
				t.Fatal(err)
			}
			readAt("after naming")
			if left, _ := e.Blobs().Stashes(); len(left) != 0 {
				t.Fatalf("stashes left after naming: %v", left)
			}
			if _, err := e.Rewind(ctx, ev.Seq); err != nil {
				t.Fatal(err)
			}
			checkSparse(t, filepath.Join(ws, "big"), want)
		})
	}
}

// sparseCrashChild writes a byte into $ZEROFS_TEST_WS/big through a
// capture (Begin) and dies by SIGKILL at point: "kept:copied" (the copy
// made, no checkpoint), "checkpointed" (the checkpoint appended, the file
// not written), "written" (written, nothing named), "stash:hashed" (the
// copy stored as a blob, no stash_named event) or "stash:named" (the
// event appended, the copy's stash link not removed).
func sparseCrashChild(point string) {
	die := func() { syscall.Kill(os.Getpid(), syscall.SIGKILL); select {} }
	durable.TestHook = func(name, _ string) {
		if name == point {
			die()
		}
	}
	crashPoint = func(name string) {
		if name == point {
			die()
		}
		if point == "written" && name == "stash:hashed" {
			select {} // nothing is named before the kill
		}
	}
	ws := os.Getenv("ZEROFS_TEST_WS")
	root, err := os.Open(ws)
	if err != nil {
		os.Exit(3)
	}
	e, err := Open(context.Background(), root, Options{StoreDir: os.Getenv("ZEROFS_TEST_STORE"), Sync: os.Getenv("ZEROFS_TEST_SYNC") == "1"})
	if err != nil {
		os.Exit(4)
	}
	release, _, err := e.Begin(context.Background(), Caller{}, Change{Path: "big"})
	if err != nil {
		os.Exit(5)
	}
	if point == "checkpointed" {
		die()
	}
	f, err := os.OpenFile(filepath.Join(ws, "big"), os.O_WRONLY, 0)
	if err != nil {
		os.Exit(6)
	}
	f.WriteAt([]byte("x"), 70<<20)
	f.Close()
	release()
	if point == "written" {
		die()
	}
	e.NameStashes(context.Background())
	os.Exit(0)
}

// TestSparseStashCrash: SIGKILL at every point between a sparse file's
// copy and the removal of the copy's stash link, with --sync always and
// batch: the next Open names what the log names (or removes the copy no
// record names), @T reads back the state before the write, a rewind
// restores it allocating only its data, and no stash is left.
func TestSparseStashCrash(t *testing.T) {
	for _, sync := range []string{"0", "1"} {
		for _, point := range []string{"kept:copied", "checkpointed", "written", "stash:hashed", "stash:named"} {
			t.Run(point+"/sync="+sync, func(t *testing.T) {
				ctx := context.Background()
				var want []byte
				k := killInStep(t, "sparse", point, sync, "w", func(ws string) { want = sparseWS(t, ws) })
				ws, store, root, ev := k.ws, k.store, k.root, k.step
				kept, _ := os.ReadDir(filepath.Join(store, BlobsName, "kept"))
				t.Logf("killed at %s: %d names in kept/", point, len(kept))
				e, err := Open(ctx, root, Options{StoreDir: store, Sync: sync == "1"})
				if err != nil {
					t.Fatal(err)
				}
				defer e.Close()
				if left, err := e.Blobs().Stashes(); err != nil || len(left) != 0 {
					t.Fatalf("stashes left after Open: %v, %v", left, err)
				}
				ent, err := e.StateAt("big", ev.Seq)
				if err != nil || !ent.Exists {
					t.Fatalf("@%d/big: exists %v, %v", ev.Seq, ent.Exists, err)
				}
				c, err := e.OpenContent(ent)
				if err != nil {
					t.Fatal(err)
				}
				h := sha256.New()
				io.Copy(h, c)
				c.Close()
				if string(h.Sum(nil)) != string(want) {
					t.Fatalf("@%d/big differs from the state before the write", ev.Seq)
				}
				if _, err := e.Rewind(ctx, ev.Seq); err != nil {
					t.Fatal(err)
				}
				checkSparse(t, filepath.Join(ws, "big"), want)
			})
		}
	}
}
