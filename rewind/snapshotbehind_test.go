package rewind

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/zerofs/zerofs/internal/durable"
	"github.com/zerofs/zerofs/internal/testsupport"
	"github.com/zerofs/zerofs/record"
	"github.com/zerofs/zerofs/rewind/internal/index"
)

// TestStepDoesNotWaitForSnapshotEncode (issue 26): the snapshotter holds
// the workspace lock only while it cuts the snapshot (index.SnapshotCut),
// and encodes it after letting go, so a step and a first write made while
// the encode is held wait for none of it (before, the encode ran under
// the workspace lock: hundreds of milliseconds at a million records). The
// snapshot then covers the head at its cut, not the changes made during
// the encode, and a mount that resumes from it answers as a full rebuild.
func TestStepDoesNotWaitForSnapshotEncode(t *testing.T) {
	// Cleanups run last first: the encode is let go, then the engine
	// closed (openT's), then the variables restored.
	every, real := snapshotEvery, snapshotEncode
	t.Cleanup(func() { snapshotEvery, snapshotEncode = every, real })
	snapshotEvery = 20
	entered, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	var cutAt record.Seq
	snapshotEncode = func(c *index.SnapshotCut, dir string) (*index.PendingSnapshot, error) {
		once.Do(func() { cutAt = c.Head(); close(entered); <-release })
		return real(c, dir)
	}
	e, ws := openT(t, Options{})
	var releaseOnce sync.Once
	unblock := func() { releaseOnce.Do(func() { close(release) }) }
	t.Cleanup(unblock)
	// Steps and first writes while the snapshot is encoded, more than
	// one (a lock taken and let go once could still be waited for the
	// second time).
	editsWhileHeld(t, entered, 5, func(i int) error { return stepEdit(e, ws, fmt.Sprintf("f%d", i%7), i) },
		"a step and a write waited for the index snapshot's encode")
	if e.Head() <= cutAt {
		t.Fatalf("head %d, not past the cut at %d: the steps made during the encode were not appended", e.Head(), cutAt)
	}
	unblock()
	if testsupport.Poll(10*time.Second, func() bool { return record.Seq(e.snapHead.Load()) >= cutAt }) != nil {
		t.Fatalf("the snapshot never went in place: snapshot head %d, cut at %d", e.snapHead.Load(), cutAt)
	}
	// A crash image, as a SIGKILL would leave the store: the snapshot at
	// the cut and the log past it.
	if err := e.Sync(); err != nil {
		t.Fatal(err)
	}
	e.wsMu.Lock()
	crash := filepath.Join(t.TempDir(), "store")
	copyTree(t, e.opts.StoreDir, crash)
	e.wsMu.Unlock()
	c := openAt(t, ws, Options{StoreDir: crash})
	if !c.log.Resumed() {
		t.Fatal("the crash image did not start from the snapshot")
	}
	sameHistory(t, c, e)
	sameHistory(t, c, rebuilt(t, c))
}

// snapshotCrashChild runs steps on the workspace in $ZEROFS_TEST_WS (each
// writes f and creates new files, so that the index outgrows one block of
// the snapshot's encode) until it dies at point, on the snapshotter's
// path: "snapshot:block" (the encode half written), "snapshot:encoded"
// (written, not yet made durable), "renamed" (in place, the directory not
// yet synced). It prints "ack SEQ V" once the step that began at SEQ has
// captured f (content V) and changed it, durably.
func snapshotCrashChild(point string) int {
	ctx := context.Background()
	snapshotEvery = 60 // 20 steps: 1280 paths
	die := func(name, path string) {
		if name == point && (name != "renamed" || filepath.Base(path) == index.SnapshotName) {
			testsupport.Die()
		}
	}
	durable.TestHook = die
	crashPoint = func(name string) { die(name, "") }
	ws := os.Getenv("ZEROFS_TEST_WS")
	root, err := os.Open(ws)
	if err != nil {
		return 3
	}
	e, err := Open(ctx, root, Options{StoreDir: os.Getenv("ZEROFS_TEST_STORE")})
	if err != nil {
		fmt.Println("error", err)
		return 4
	}
	caller := Caller{PID: os.Getpid(), Comm: "child"}
	write := func(p string, data string) error {
		release, _, err := e.Begin(ctx, caller, Change{Path: p})
		if err != nil {
			return err
		}
		defer release()
		return os.WriteFile(filepath.Join(ws, p), []byte(data), 0o644)
	}
	for v := 0; v < 1000; v++ {
		s, err := e.BeginStep(ctx, "s", nil)
		if err != nil {
			fmt.Println("error", err)
			return 5
		}
		if err := write("f", strconv.Itoa(v+1)); err != nil {
			fmt.Println("error", err)
			return 6
		}
		// New files, many in one checkpoint: more paths than a block
		// of the encode by the time the snapshot is due, in few events.
		var news []Change
		for j := range 64 {
			news = append(news, Change{Path: fmt.Sprintf("n%d-%d", v, j)})
		}
		release, _, err := e.Begin(ctx, caller, news...)
		if err != nil {
			fmt.Println("error", err)
			return 6
		}
		for _, c := range news {
			if err := os.WriteFile(filepath.Join(ws, c.Path), []byte("x"), 0o644); err != nil {
				return 7
			}
		}
		release()
		if err := e.Sync(); err != nil {
			return 8
		}
		fmt.Println("ack", s.Seq, v)
	}
	return 0 // the point was never reached
}

// TestSnapshotCrash (issue 26) SIGKILLs a process while its snapshotter,
// which runs beside the steps without the workspace lock, encodes the
// index snapshot, after it encoded it, and after it put it in place: the
// next open removes what the encode left, gives every acknowledged state
// back, answers exactly as an index rebuilt from the whole log does, and
// finds every blob a state needs.
func TestSnapshotCrash(t *testing.T) {
	for _, point := range []string{"snapshot:block", "snapshot:encoded", "renamed"} {
		t.Run(point, func(t *testing.T) {
			dir := t.TempDir()
			ws, store := filepath.Join(dir, "ws"), filepath.Join(dir, "store")
			os.Mkdir(ws, 0o755)
			os.WriteFile(filepath.Join(ws, "f"), []byte("0"), 0o644)
			c := testsupport.StartChild(t, "snapshot", point, testsupport.ChildOptions{Stderr: io.Discard,
				Env: []string{"ZEROFS_TEST_WS=" + ws, "ZEROFS_TEST_STORE=" + store}})
			acked := map[record.Seq]int{}
			for l := range c.Lines {
				var seq record.Seq
				var v int
				if _, err := fmt.Sscanf(l, "ack %d %d", &seq, &v); err != nil {
					t.Fatalf("child printed %q", l)
				}
				acked[seq] = v
			}
			if err := c.Cmd.Wait(); !testsupport.KilledBySIGKILL(c.Cmd.ProcessState) {
				t.Fatalf("the child was not killed at %s: %v", point, err)
			}
			if len(acked) == 0 {
				t.Fatal("nothing acknowledged")
			}
			e := openAt(t, ws, Options{StoreDir: store})
			ents, err := os.ReadDir(store)
			if err != nil {
				t.Fatal(err)
			}
			for _, ent := range ents {
				if durable.IsTemp(ent.Name()) {
					t.Errorf("left in the store after the open: %s", ent.Name())
				}
			}
			if point == "renamed" && !e.log.Resumed() {
				t.Error("the snapshot in place was not used")
			}
			for seq, v := range acked {
				// The state at a step's start is f before the step wrote it.
				got, ok := readAt(t, e, "f", seq)
				if want := strconv.Itoa(v); !ok || got != want {
					t.Fatalf("f at step %d: got %q (exists %v), want %q", seq, got, ok, want)
				}
			}
			sameHistory(t, e, rebuilt(t, e))
			keep, err := e.blobsNamedAfter(e.PrunedBefore())
			if err != nil {
				t.Fatal(err)
			}
			for id := range keep {
				if err := e.Blobs().Verify(id); err != nil {
					t.Fatalf("a blob a state needs: %v", err)
				}
			}
			t.Logf("%d steps acknowledged, head %d, resumed from a snapshot: %v", len(acked), e.Head(), e.log.Resumed())
		})
	}
}

// TestStepDoesNotWaitForGCSnapshot (issue 26): gc, and so the pruner of
// --max-store-size, encodes the snapshot of the pruned index after it lets
// go of the workspace lock, so a step and a write made while that encode
// is held wait for none of it; gc still returns only once the snapshot is
// in place.
func TestStepDoesNotWaitForGCSnapshot(t *testing.T) {
	real := snapshotEncode
	t.Cleanup(func() { snapshotEncode = real })
	entered, release := make(chan struct{}), make(chan struct{})
	var once, releaseOnce sync.Once
	snapshotEncode = func(c *index.SnapshotCut, dir string) (*index.PendingSnapshot, error) {
		once.Do(func() { close(entered); <-release })
		return real(c, dir)
	}
	e, ws := openT(t, Options{})
	unblock := func() { releaseOnce.Do(func() { close(release) }) }
	t.Cleanup(unblock)
	ctx := context.Background()
	for i := range 5 {
		if _, err := e.BeginStep(ctx, "s", nil); err != nil {
			t.Fatal(err)
		}
		change(t, e, func() error { return os.WriteFile(filepath.Join(ws, "f"), []byte{byte(i)}, 0o644) }, Change{Path: "f"})
	}
	gcDone := make(chan error, 1)
	go func() {
		_, err := e.GC(ctx, 3)
		gcDone <- err
	}()
	select {
	case <-entered:
	case err := <-gcDone:
		t.Fatalf("gc wrote no snapshot: %v", err)
	case <-time.After(20 * time.Second):
		t.Fatal("gc wrote no snapshot")
	}
	done := make(chan error, 1)
	go func() {
		rel, _, err := e.Begin(ctx, Caller{PID: os.Getpid(), Comm: "test"}, Change{Path: "f"})
		if err == nil {
			err = os.WriteFile(filepath.Join(ws, "f"), []byte("after"), 0o644)
			rel()
		}
		if err == nil {
			_, err = e.BeginStep(ctx, "s", nil)
		}
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a write and a step waited for gc's index snapshot")
	}
	select {
	case err := <-gcDone:
		t.Fatalf("gc returned (%v) before its snapshot was in place", err)
	default:
	}
	unblock()
	if err := <-gcDone; err != nil {
		t.Fatal(err)
	}
	if e.snapHead.Load() == 0 {
		t.Fatal("gc returned with no snapshot in place")
	}
	sameHistory(t, reopen(t, e, ws), rebuilt(t, e))
}

// lockedBuffer is a log destination written from several goroutines.
type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestGCOvertakesSnapshotEncode: a gc that cuts history while the
// snapshotter encodes (without the workspace lock) makes that encode stop
// (its records were dropped in place), waits for it holding no lock a
// step or a write takes, and puts its own snapshot in place; nothing is logged as a
// failure, and a mount from the snapshot answers as a full rebuild.
func TestGCOvertakesSnapshotEncode(t *testing.T) {
	every, real := snapshotEvery, snapshotEncode
	t.Cleanup(func() { snapshotEvery, snapshotEncode = every, real })
	snapshotEvery = 20
	entered, release := make(chan struct{}), make(chan struct{})
	var once, releaseOnce sync.Once
	var stale error
	snapshotEncode = func(c *index.SnapshotCut, dir string) (*index.PendingSnapshot, error) {
		first := false
		once.Do(func() { first = true; close(entered); <-release })
		p, err := real(c, dir)
		if first {
			stale = err
		}
		return p, err
	}
	var logs lockedBuffer
	e, ws := openT(t, Options{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	unblock := func() { releaseOnce.Do(func() { close(release) }) }
	t.Cleanup(unblock)
	ctx := context.Background()
	for i := 0; ; i++ {
		select {
		case <-entered:
		default:
			if i > 200 {
				t.Fatal("no snapshot began")
			}
			if _, err := e.BeginStep(ctx, "s", nil); err != nil {
				t.Fatal(err)
			}
			change(t, e, func() error { return os.WriteFile(filepath.Join(ws, "f"), []byte{byte(i)}, 0o644) }, Change{Path: "f"})
			time.Sleep(time.Millisecond) // real time: the flusher wakes the snapshotter
			continue
		}
		break
	}
	gcDone := make(chan error, 1)
	go func() {
		_, err := e.GC(ctx, e.Step().Seq)
		gcDone <- err
	}()
	if testsupport.Poll(10*time.Second, func() bool { return e.PrunedBefore() > 0 }) != nil {
		t.Fatal("the gc cut nothing")
	}
	// The gc now waits for the encode under way, holding no lock a step
	// takes: a step and a write go on.
	stepped := make(chan error, 1)
	go func() {
		_, err := e.BeginStep(ctx, "s", nil)
		if err == nil {
			var rel func()
			rel, _, err = e.Begin(ctx, Caller{PID: os.Getpid(), Comm: "test"}, Change{Path: "f"})
			if err == nil {
				err = os.WriteFile(filepath.Join(ws, "f"), []byte("during"), 0o644)
				rel()
			}
		}
		stepped <- err
	}()
	select {
	case err := <-stepped:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a step waited for the gc waiting for the snapshotter's encode")
	}
	select {
	case err := <-gcDone:
		t.Fatalf("gc finished (%v) while the encode it must wait for was held", err)
	default:
	}
	unblock()
	select {
	case err := <-gcDone:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("gc never finished")
	}
	if !errors.Is(stale, index.ErrSnapshotStale) {
		t.Fatalf("the encode overtaken by the gc: got %v, want ErrSnapshotStale", stale)
	}
	if got := record.Seq(e.snapHead.Load()); got < e.PrunedBefore() {
		t.Fatalf("snapshot head %d, before the gc's cut at %d", got, e.PrunedBefore())
	}
	if strings.Contains(logs.String(), "could not save") {
		t.Fatalf("a failure was logged:\n%s", logs.String())
	}
	c := reopen(t, e, ws)
	if !c.log.Resumed() {
		t.Fatal("the next mount did not start from the gc's snapshot")
	}
	sameHistory(t, c, rebuilt(t, c))
}

// TestSnapshotsBesideChanges runs the snapshotter every few events while
// a writer captures and removes (stashes the namer names) and another
// steps, rewinds and gcs at random: every snapshot it puts in place, and
// the one Close writes, gives a mount that answers as an index rebuilt
// from the whole log. Two writers capture at once, so their checkpoints
// are sometimes folded in the order they finish rather than the log's;
// the fold does not depend on it (index.TestCheckpointsFoldedOutOfOrder is
// the deterministic test of that: this one hit the old order-dependent
// fold only now and then).
func TestSnapshotsBesideChanges(t *testing.T) {
	every, realEncode, realCommit := snapshotEvery, snapshotEncode, snapshotCommit
	t.Cleanup(func() { snapshotEvery, snapshotEncode, snapshotCommit = every, realEncode, realCommit })
	snapshotEvery = 7
	// Each encode starts a little after its cut, so that the writers'
	// folds fall between them (as they do during a long encode).
	snapshotEncode = func(c *index.SnapshotCut, dir string) (*index.PendingSnapshot, error) {
		time.Sleep(2 * time.Millisecond) // real time: folds meanwhile
		return realEncode(c, dir)
	}
	// After each of the first dozen snapshots put in place, the store is
	// copied as a crash would leave it (snapMu is held here, and wsMu
	// keeps changes out).
	var e *Engine
	var imagesMu sync.Mutex // guards images, copied
	var images []string
	copied := false
	snapshotCommit = func(p *index.PendingSnapshot) error {
		err := realCommit(p)
		imagesMu.Lock()
		defer imagesMu.Unlock()
		if err == nil && !copied {
			if n := len(images); n < 12 {
				e.wsMu.Lock()
				if err = e.Sync(); err == nil {
					img := filepath.Join(t.TempDir(), "store")
					copyTree(t, e.opts.StoreDir, img)
					images = append(images, img)
				}
				e.wsMu.Unlock()
			}
		}
		return err
	}
	e, ws := openT(t, Options{})
	ctx := context.Background()
	rnd := testsupport.Rand(t)
	seeds := []uint64{rnd.Uint64(), rnd.Uint64(), rnd.Uint64()}
	var wg sync.WaitGroup
	errs := make(chan error, 3)
	for w := range 3 { // 0 and 2 capture, 1 steps, rewinds and gcs
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(seeds[w], uint64(w)))
			for i := range 150 {
				p := fmt.Sprintf("d%d/f%d", r.IntN(3), r.IntN(40))
				k := r.IntN(20)
				if w == 1 {
					k = 15 + k%5                 // steps, rewinds and gcs
					time.Sleep(time.Millisecond) // real time: the capturer's changes between them
				} else if k >= 17 {
					k = 15 // a step
				}
				var err error
				switch {
				case k < 12:
					var rel func()
					rel, _, err = e.Begin(ctx, Caller{PID: os.Getpid(), Comm: "test"}, Change{Path: filepath.Dir(p)}, Change{Path: p})
					if err == nil {
						os.MkdirAll(filepath.Join(ws, filepath.Dir(p)), 0o755)
						err = os.WriteFile(filepath.Join(ws, p), []byte(fmt.Sprint(w, i)), 0o644)
						rel()
					}
				case k < 15:
					var rel func()
					rel, _, err = e.Begin(ctx, Caller{PID: os.Getpid(), Comm: "test"}, Change{Path: p, Removed: true})
					if err == nil {
						os.Remove(filepath.Join(ws, p))
						rel()
					}
				case k < 17:
					_, err = e.BeginStep(ctx, "s", nil)
				case k < 19:
					if h := e.Head(); h > 2 && e.HasState(h-2) {
						_, err = e.Rewind(ctx, h-2)
						if errors.Is(err, record.ErrNoSuchSeq) {
							err = nil
						}
					}
				default:
					if h := e.Head(); h > 10 {
						_, err = e.GC(ctx, h-10)
					}
				}
				if err != nil {
					errs <- fmt.Errorf("writer %d, op %d: %w", w, i, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if e.snapHead.Load() == 0 {
		t.Fatal("no snapshot was written while running")
	}
	// The store as each running snapshot left it, then as Close does.
	imagesMu.Lock()
	copied = true
	imagesMu.Unlock()
	if len(images) == 0 {
		t.Fatal("no store was copied")
	}
	for _, img := range images {
		c := openAt(t, ws, Options{StoreDir: img})
		if !c.log.Resumed() {
			t.Fatal("the running engine's snapshot was not used")
		}
		sameHistory(t, c, rebuilt(t, c))
		c.Close()
	}
	r := reopen(t, e, ws)
	if !r.log.Resumed() {
		t.Fatal("Close's snapshot was not used")
	}
	sameHistory(t, r, rebuilt(t, r))
}
