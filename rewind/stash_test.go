package rewind

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/zerofs/zerofs/blobstore"
	"github.com/zerofs/zerofs/eventlog"
	"github.com/zerofs/zerofs/internal/durable"
	"github.com/zerofs/zerofs/record"
	"golang.org/x/sys/unix"
)

// stashFiles is what the stash tests remove: name -> content.
func stashFiles() map[string]string {
	files := map[string]string{}
	for i := range 40 {
		files[fmt.Sprintf("f%02d", i)] = fmt.Sprintf("file %d\n%s", i, string(make([]byte, i*97)))
	}
	files["same1"], files["same2"] = "the same content\n", "the same content\n"
	return files
}

// writeStashFiles writes stashFiles into ws and returns them.
func writeStashFiles(ws string) map[string]string {
	files := stashFiles()
	for p, c := range files {
		os.WriteFile(filepath.Join(ws, p), []byte(c), 0o644)
	}
	return files
}

// stashWS makes a workspace holding stashFiles, with its store beside it.
func stashWS(t *testing.T) (ws, store string, files map[string]string) {
	dir := t.TempDir()
	ws, store = filepath.Join(dir, "ws"), filepath.Join(dir, "store")
	os.Mkdir(ws, 0o755)
	return ws, store, writeStashFiles(ws)
}

// unlinkStashed removes p through the engine as the mount's Unlink does;
// with dirfd >= 0 (ws's root open, p a name in it) the capture reads p
// through that descriptor as the mount's does (Change.Dirfd), which in
// batch mode links the stash by its name (blobstore.Store.StashAt).
func unlinkStashed(t *testing.T, e *Engine, ws, p string, dirfd int) {
	t.Helper()
	change(t, e, func() error { return os.Remove(filepath.Join(ws, p)) }, stashChange(p, dirfd))
}

// unlinkMoved removes p, a name in the directory open at dirfd, as the
// mount's Unlink does: captured by CaptureUnlinkLocked, removed by its
// Removal (in batch mode, the rename of p into the store as its stash).
func unlinkMoved(e *Engine, dirfd int, p string) error {
	ctx := context.Background()
	release, _, err := e.Begin(ctx, Caller{})
	if err != nil {
		return err
	}
	defer release()
	rm, err := e.CaptureUnlinkLocked(ctx, Caller{}, stashChange(p, dirfd))
	if err != nil {
		return err
	}
	if err := rm.Unlink(ctx, dirfd, p, func() error { return unix.Unlinkat(dirfd, p, 0) }); err != nil {
		e.NameStashes(ctx)
		return err
	}
	return nil
}

// stashChange is an unlink's change of p, read through dirfd unless it is
// -1.
func stashChange(p string, dirfd int) Change {
	return Change{Path: p, Removed: true, Stash: true, Dirfd: dirfd, InDir: dirfd >= 0}
}

// checkStashed fails unless every file of files reads back at t byte for
// byte (verified blobs), and no stash is left in the store once named.
func checkStashed(t *testing.T, e *Engine, files map[string]string, t0 record.Seq) {
	t.Helper()
	for p, want := range files {
		ent, err := e.StateAt(p, t0)
		if err != nil || !ent.Exists {
			t.Fatalf("@%d/%s: exists %v, %v", t0, p, ent.Exists, err)
		}
		c, err := e.OpenContent(ent)
		if err != nil {
			t.Fatalf("@%d/%s: %v", t0, p, err)
		}
		got, err := io.ReadAll(c)
		c.Close()
		if err != nil || string(got) != want {
			t.Fatalf("@%d/%s: %d bytes (%v), want %d", t0, p, len(got), err, len(want))
		}
		if !ent.Live && ent.State.Blob != blobstore.Sum([]byte(want)).String() {
			t.Fatalf("@%d/%s: blob %q, want the content's sha256", t0, p, ent.State.Blob)
		}
	}
	if err := e.NameStashes(context.Background()); err != nil {
		t.Fatal(err)
	}
	if left, err := e.Blobs().Stashes(); err != nil || len(left) != 0 {
		t.Fatalf("stashes left after naming: %v, %v", left, err)
	}
}

// TestStashedRemovals: unlinks through Change.Stash record stashes, not
// blobs; a view read names them on demand; after a reopen (the log read
// again, the snapshot left aside) every record has its blob.
func TestStashedRemovals(t *testing.T) {
	for _, mode := range []string{"batch", "always", "batch-dirfd", "always-dirfd", "batch-move", "always-move"} {
		sync, move := strings.HasPrefix(mode, "always"), strings.HasSuffix(mode, "-move")
		at := strings.HasSuffix(mode, "-dirfd") || move
		t.Run(mode, func(t *testing.T) {
			ctx := context.Background()
			ws, store, files := stashWS(t)
			root, err := os.Open(ws)
			if err != nil {
				t.Fatal(err)
			}
			defer root.Close()
			e, err := Open(ctx, root, Options{StoreDir: store, Sync: sync})
			if err != nil {
				t.Fatal(err)
			}
			ev, err := e.BeginStep(ctx, "rm", nil)
			if err != nil {
				t.Fatal(err)
			}
			dirfd := -1
			if at {
				dirfd = int(root.Fd())
			}
			for p := range files {
				if move {
					if err := unlinkMoved(e, dirfd, p); err != nil {
						t.Fatal(err)
					}
					continue
				}
				unlinkStashed(t, e, ws, p, dirfd)
			}
			kept := 0
			for p := range files {
				if rec, ok := e.index.At(p, ev.Seq, ^record.Seq(0)); ok && rec.State.Kept != "" {
					kept++
				}
			}
			if kept == 0 {
				t.Fatal("no removal recorded a stash")
			}
			checkStashed(t, e, files, ev.Seq)
			if err := e.Close(); err != nil {
				t.Fatal(err)
			}
			os.Remove(filepath.Join(store, "index.snapshot"))
			e, err = Open(ctx, root, Options{StoreDir: store, Sync: sync})
			if err != nil {
				t.Fatal(err)
			}
			defer e.Close()
			checkStashed(t, e, files, ev.Seq)
			res, err := e.Rewind(ctx, ev.Seq)
			if err != nil {
				t.Fatal(err)
			}
			for p, want := range files {
				if got, err := os.ReadFile(filepath.Join(ws, p)); err != nil || string(got) != want {
					t.Fatalf("after the rewind %s: %q, %v (%+v)", p, got, err, res.Report)
				}
			}
		})
	}
}

// stashCrashChild removes stashFiles from $ZEROFS_TEST_WS, each in a
// stash, and dies by SIGKILL at point: "kept:stashed" (the 20th stash
// linked, its checkpoint not appended), "checkpointed" (the 20th
// checkpoint appended, its unlink not done), "unlinked" (every unlink
// done, nothing named), "stash:hashed" (stashes hashed and linked as
// blobs, no stash_named event) or "stash:named" (the event appended, the
// stashes' links not removed); in batch mode also "kept:syncing" (the
// first Sync of stashes begun, none made durable by it) and
// "kept:ring-syncing" (the first window's stashes synced one by one
// through io_uring: their opens, fdatasyncs and closes and kept/'s fsync
// submitted, not waited for).
func stashCrashChild(point string) {
	die := func() { syscall.Kill(os.Getpid(), syscall.SIGKILL); select {} }
	n := 0
	durable.TestHook = func(name, _ string) {
		if name == "kept:syncing" && point == "kept:ring-syncing" {
			// Far more dirty data than the stashes, so that Sync syncs
			// them one by one (through io_uring), not with a syncfs.
			dirty(filepath.Join(filepath.Dir(os.Getenv("ZEROFS_TEST_WS")), "dirty"))
		}
		if name == point {
			if n++; n == 20 || point == "kept:syncing" || point == "kept:ring-syncing" {
				die()
			}
		}
	}
	crashPoint = func(name string) {
		if name == point {
			die()
		}
		if point == "unlinked" && name == "stash:hashed" {
			// At "unlinked" nothing is named yet: a namer batch that
			// began during the removals (a pause of 50 ms at a high
			// load) never gets to its event.
			select {}
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
	dirfd := -1
	if os.Getenv("ZEROFS_TEST_STASH_AT") == "1" {
		dirfd = int(root.Fd())
	}
	i := 0
	for p := range stashFiles() {
		if os.Getenv("ZEROFS_TEST_STASH_MOVE") == "1" {
			// As the mount's Unlink: the record, then the rename into
			// the store ("checkpointed": between the two).
			if i++; i == 20 && point == "checkpointed" {
				crashPoint = func(name string) {
					if name == "stash:recorded" {
						die()
					}
				}
			}
			if err := unlinkMoved(e, dirfd, p); err != nil {
				os.Exit(5)
			}
			continue
		}
		release, _, err := e.Begin(context.Background(), Caller{}, stashChange(p, dirfd))
		if err != nil {
			os.Exit(5)
		}
		if i++; i == 20 && point == "checkpointed" {
			die()
		}
		os.Remove(filepath.Join(ws, p))
		release()
	}
	if point == "unlinked" {
		die()
	}
	e.NameStashes(context.Background())
	os.Exit(0)
}

// TestStashCrash: SIGKILL at every point between a removal's stash and the
// stash becoming its blob (kept:moving: as the renames begin),
// with --sync always and batch: the next Open names what the log names and
// moves every stash left to its blob, every file reads back byte for byte
// at the step's start, and no stash is left.
func TestStashCrash(t *testing.T) {
	for _, sync := range []string{"0", "1", "0-dirfd", "0-move"} {
		for _, point := range []string{"kept:stashed", "checkpointed", "unlinked", "stash:hashed", "stash:named", "kept:moving", "kept:syncing", "kept:ring-syncing"} {
			if strings.HasPrefix(point, "kept:") && strings.HasSuffix(point, "syncing") && sync == "1" {
				continue // --sync always syncs each stash as it is made
			}
			t.Run(point+"/sync="+sync, func(t *testing.T) {
				ctx := context.Background()
				files := stashFiles()
				sync, move := strings.CutSuffix(sync, "-move")
				sync, at := strings.CutSuffix(sync, "-dirfd")
				if at || move {
					t.Setenv("ZEROFS_TEST_STASH_AT", "1") // the child's capture reads through the root's descriptor
				}
				if move {
					t.Setenv("ZEROFS_TEST_STASH_MOVE", "1") // and removes as the mount's Unlink does
				}
				k := killInStep(t, "stash", point, sync, "rm", func(ws string) { writeStashFiles(ws) })
				ws, store, root, ev := k.ws, k.store, k.root, k.step
				stashes, _ := os.ReadDir(filepath.Join(store, BlobsName, "kept"))
				left, removed := 0, map[string]bool{}
				for p := range files {
					if _, err := os.Lstat(filepath.Join(ws, p)); err == nil {
						left++
					} else {
						removed[p] = true
					}
				}
				t.Logf("killed at %s: %d of %d files left, %d names in kept/", point, left, len(files), len(stashes))
				e, err := Open(ctx, root, Options{StoreDir: store, Sync: sync == "1"})
				if err != nil {
					t.Fatal(err)
				}
				closed := false
				defer func() {
					if !closed {
						e.Close()
					}
				}()
				checkStashed(t, e, files, ev.Seq)
				if _, err := e.Rewind(ctx, ev.Seq); err != nil {
					t.Fatal(err)
				}
				for p, want := range files {
					if got, err := os.ReadFile(filepath.Join(ws, p)); err != nil || string(got) != want {
						t.Fatalf("after the rewind %s: %d bytes, %v; want %d", p, len(got), err, len(want))
					}
					if !removed[p] {
						continue
					}
					// A removed file's before-state: its blob, whole.
					if err := e.Blobs().Verify(blobstore.Sum([]byte(want))); err != nil {
						t.Fatalf("%s's blob: %v", p, err)
					}
				}
				closed = true
				if err := e.Close(); err != nil {
					t.Fatal(err)
				}
				// The log as verify reads it: whole, no torn tail left.
				if _, torn, err := eventlog.Check(filepath.Join(store, record.LogName)); err != nil || torn != 0 {
					t.Fatalf("the log after recovery: %d torn bytes, %v", torn, err)
				}
			})
		}
	}
}

// crashed is a workspace whose child process was SIGKILLed in a step:
// its directories, its root (open) and the step's tool_call.
type crashed struct {
	ws, store string
	root      *os.File
	step      record.Event
}

// killInStep makes a workspace (fill writes its files), begins a step
// with --sync always, closes the engine and runs child ("stash":
// stashCrashChild, or "sparse": sparseCrashChild) in this test binary
// again (killedAt), which must end killed by SIGKILL at point.
func killInStep(t *testing.T, child, point, sync, label string, fill func(ws string)) crashed {
	t.Helper()
	ctx := context.Background()
	dir := t.TempDir()
	c := crashed{ws: filepath.Join(dir, "ws"), store: filepath.Join(dir, "store")}
	os.Mkdir(c.ws, 0o755)
	fill(c.ws)
	root, err := os.Open(c.ws)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { root.Close() })
	c.root = root
	e, err := Open(ctx, root, Options{StoreDir: c.store, Sync: true})
	if err != nil {
		t.Fatal(err)
	}
	if c.step, err = e.BeginStep(ctx, label, nil); err != nil {
		t.Fatal(err)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	killedAt(t, child, point, "ZEROFS_TEST_WS="+c.ws, "ZEROFS_TEST_STORE="+c.store, "ZEROFS_TEST_SYNC="+sync)
	return c
}

// TestStashTampered: the store is untrusted. A stash a record names that is
// gone, or is no longer a regular file, when the next Open names it, makes
// that before-state lost: the record becomes skipped with the reason (a
// rewind reports it, never invents content); the other files read back.
func TestStashTampered(t *testing.T) {
	ctx := context.Background()
	ws, store, files := stashWS(t)
	e := openAt(t, ws, Options{StoreDir: store, Sync: true})
	ev, err := e.BeginStep(ctx, "rm", nil)
	if err != nil {
		t.Fatal(err)
	}
	e.Close()
	killedAt(t, "stash", "unlinked", "ZEROFS_TEST_WS="+ws, "ZEROFS_TEST_STORE="+store, "ZEROFS_TEST_SYNC=1")
	lost := map[string]bool{}
	for _, p := range []string{"f01", "f02"} {
		rec := lastRecord(t, store, p)
		kp := filepath.Join(store, BlobsName, "kept", rec.Kept)
		if err := os.Remove(kp); err != nil {
			t.Fatal(err)
		}
		if p == "f02" {
			os.Mkdir(kp, 0o700)
		}
		lost[p] = true
	}
	e = openAt(t, ws, Options{StoreDir: store, Sync: true})
	for p, want := range files {
		ent, err := e.StateAt(p, ev.Seq)
		if err != nil {
			t.Fatal(err)
		}
		if lost[p] {
			if !ent.State.Skipped || ent.State.Reason == "" {
				t.Fatalf("@%d/%s: %+v; want skipped, with the reason", ev.Seq, p, ent.State)
			}
			continue
		}
		c, err := e.OpenContent(ent)
		if err != nil {
			t.Fatalf("@%d/%s: %v", ev.Seq, p, err)
		}
		got, _ := io.ReadAll(c)
		c.Close()
		if string(got) != want {
			t.Fatalf("@%d/%s: %d bytes, want %d", ev.Seq, p, len(got), len(want))
		}
	}
	res, err := e.Rewind(ctx, ev.Seq)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Report.Skipped) != 2 {
		t.Fatalf("rewind skipped %v, want f01 and f02", res.Report.Skipped)
	}
}

// lastRecord is p's last checkpoint record in the log of store.
func lastRecord(t *testing.T, store, p string) record.FileState {
	t.Helper()
	var out record.FileState
	for ev, err := range eventlog.ReadFile(filepath.Join(store, record.LogName), 1) {
		if err != nil {
			t.Fatal(err)
		}
		if ev.Type != record.TypeCheckpoint {
			continue
		}
		var cp record.Checkpoint
		json.Unmarshal(ev.Payload, &cp)
		for _, f := range cp.Files {
			if f.Path == p {
				out = f
			}
		}
	}
	if out.Kept == "" {
		t.Fatalf("%s: no stash recorded", p)
	}
	return out
}

// TestStepDoesNotWaitForNaming: a step boundary does not wait for the
// namer's batch (seconds of hashing after an rm -rf of a large tree, during
// which every change through the mount waited behind the step too): with
// the namer held after hashing, BeginStep returns, and once the namer goes
// on every removed file reads back at the step before.
func TestStepDoesNotWaitForNaming(t *testing.T) {
	held, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	crashPoint = func(name string) {
		if name == "stash:hashed" {
			once.Do(func() { close(held); <-release })
		}
	}
	ctx := context.Background()
	ws, store, files := stashWS(t)
	e := openAt(t, ws, Options{StoreDir: store})
	t.Cleanup(func() { crashPoint = func(string) {} }) // after Close: the namer has stopped
	defer e.Close()
	defer once.Do(func() {})
	ev, err := e.BeginStep(ctx, "rm", nil)
	if err != nil {
		t.Fatal(err)
	}
	for p := range files {
		unlinkStashed(t, e, ws, p, -1)
	}
	// A liveness bound, not a timing assertion: without the change the
	// step waits until the namer is released, which only the test does.
	const bound = time.Minute
	select {
	case <-held:
	case <-time.After(bound):
		t.Fatal("the namer never began a batch")
	}
	done := make(chan error, 1)
	go func() {
		_, err := e.BeginStep(ctx, "next", nil)
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(bound):
		close(release)
		t.Fatal("the step boundary waited for the namer's batch")
	}
	close(release)
	checkStashed(t, e, files, ev.Seq)
}

// dirty writes 64 MiB to path, not synced: dirty data in the page cache.
func dirty(path string) {
	f, err := os.Create(path)
	if err != nil {
		os.Exit(6)
	}
	defer f.Close()
	b := make([]byte, 1<<20)
	for i := range b {
		b[i] = byte(i)
	}
	for range 64 {
		if _, err := f.Write(b); err != nil {
			os.Exit(6)
		}
	}
}
