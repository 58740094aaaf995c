package rewind

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/zerofs/zerofs/internal/testsupport"
	"github.com/zerofs/zerofs/record"
	"github.com/zerofs/zerofs/rewind/internal/index"
)

// buildSnapHistory makes a history with every kind of record: files,
// directories, symlinks, absent paths, a rewind and a gc.
func buildSnapHistory(t *testing.T, e *Engine, ws string) {
	t.Helper()
	ctx := context.Background()
	for i := range 5 {
		if _, err := e.BeginStep(ctx, "step", nil); err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(ws, "d", "f")
		change(t, e, func() error { return os.MkdirAll(filepath.Join(ws, "d"), 0o755) }, Change{Path: "d"})
		change(t, e, func() error { return os.WriteFile(p, []byte{byte('a' + i)}, 0o644) }, Change{Path: "d/f"})
		change(t, e, func() error {
			os.Remove(filepath.Join(ws, "l"))
			return os.Symlink("d/f"+string(rune('0'+i)), filepath.Join(ws, "l"))
		}, Change{Path: "l"})
	}
	if _, err := e.Rewind(ctx, 4); err != nil {
		t.Fatal(err)
	}
	if _, err := e.GC(ctx, 3); err != nil {
		t.Fatal(err)
	}
	change(t, e, func() error { return os.WriteFile(filepath.Join(ws, "after"), []byte("x"), 0o600) }, Change{Path: "after"})
}

// reopen closes e and opens the store again on the same workspace.
func reopen(t *testing.T, e *Engine, ws string) *Engine {
	t.Helper()
	store := e.opts.StoreDir
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	return openAt(t, ws, Options{StoreDir: store})
}

// sameHistory fails unless a and b answer every question about the
// history alike: the index (every path's records), the derived state, and
// the tree at every sequence.
func sameHistory(t *testing.T, a, b *Engine) {
	t.Helper()
	type recs struct {
		seqs   []record.Seq
		states []record.FileState
	}
	dump := func(e *Engine) map[string]recs {
		out := map[string]recs{}
		e.index.Each(func(p string, seqs []record.Seq, state func(int) record.FileState) {
			r := recs{}
			if len(seqs) > 0 { // a path whose records all went is nil or empty
				r.seqs = slices.Clone(seqs)
			}
			for i := range seqs {
				r.states = append(r.states, state(i))
			}
			out[p] = r
		})
		return out
	}
	if da, db := dump(a), dump(b); !reflect.DeepEqual(da, db) {
		t.Fatalf("indexes differ:\n%v\n%v", da, db)
	}
	if ca, cb := a.index.Children(), b.index.Children(); !reflect.DeepEqual(ca, cb) {
		t.Fatalf("directory names differ: %v, %v", ca, cb)
	}
	ma, mb := a.state.Marks(), b.state.Marks()
	if !reflect.DeepEqual(ma, mb) {
		t.Fatalf("step marks differ:\n%v\n%v", ma, mb)
	}
	ra, sa, _ := a.LastRewind()
	rb, sb, _ := b.LastRewind()
	if !reflect.DeepEqual(ra, rb) || sa != sb || a.PrunedBefore() != b.PrunedBefore() || a.Head() != b.Head() {
		t.Fatalf("derived state differs: %+v@%d pruned %d, %+v@%d pruned %d", ra, sa, a.PrunedBefore(), rb, sb, b.PrunedBefore())
	}
	if !reflect.DeepEqual(a.Thinned(), b.Thinned()) {
		t.Fatalf("thinned intervals differ: %v, %v", a.Thinned(), b.Thinned())
	}
	for s := a.PrunedBefore(); s <= a.Head(); s++ {
		if a.HasState(s) != b.HasState(s) {
			t.Fatalf("state %d: there in one, not in the other (%v, %v)", s, a.HasState(s), b.HasState(s))
		}
		if !a.HasState(s) {
			continue
		}
		if d := diffTrees(indexTree(t, a, s), indexTree(t, b, s)); d != "" {
			t.Fatalf("trees at %d differ:\n%s", s, d)
		}
	}
}

// TestIndexSnapshotResumes: Close writes a snapshot, the next Open starts
// from it (reading no line it covers) and answers exactly as an index
// rebuilt from the whole log does.
func TestIndexSnapshotResumes(t *testing.T) {
	e, ws := openT(t, Options{})
	buildSnapHistory(t, e, ws)
	e2 := reopen(t, e, ws)
	if !e2.log.Resumed() {
		t.Fatal("the open after Close did not start from the snapshot")
	}
	sameHistory(t, e2, rebuilt(t, e2))
	// And it goes on from there: a capture after the resumed open, again.
	change(t, e2, func() error { return os.WriteFile(filepath.Join(ws, "after"), []byte("y"), 0o600) }, Change{Path: "after"})
	e3 := reopen(t, e2, ws)
	if !e3.log.Resumed() {
		t.Fatal("the second open did not start from the snapshot")
	}
	sameHistory(t, e3, rebuilt(t, e3))
}

// rebuilt returns an engine on the same workspace over a copy of e's store
// without its snapshot: the index as the whole log gives it.
func rebuilt(t *testing.T, e *Engine) *Engine {
	t.Helper()
	store := filepath.Join(t.TempDir(), "store")
	copyTree(t, e.opts.StoreDir, store)
	os.Remove(filepath.Join(store, index.SnapshotName))
	r := openAt(t, e.ws.root.Name(), Options{StoreDir: store})
	if r.log.Resumed() {
		t.Fatal("the copy without a snapshot resumed")
	}
	return r
}

func copyTree(t *testing.T, from, to string) {
	t.Helper()
	err := filepath.Walk(from, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(from, p)
		dst := filepath.Join(to, rel)
		if fi.IsDir() {
			return os.MkdirAll(dst, 0o700)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(dst, b, 0o600)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestDamagedSnapshotRebuilds: a snapshot that is damaged, of another
// version, forged with a checksum that matches but a path outside the
// workspace, or left behind by a log that changed since, is never used:
// the index is rebuilt from the log and serves the same states.
func TestDamagedSnapshotRebuilds(t *testing.T) {
	forge := func(body []byte) []byte {
		sum := sha256.Sum256(body)
		return append(body, sum[:]...)
	}
	for _, tc := range []struct {
		name    string
		damage  func(t *testing.T, store string, snap []byte) []byte
		wantErr string // what readSnapshot says, "" if the snapshot itself is sound
	}{
		{"byte flipped", func(t *testing.T, _ string, b []byte) []byte { b[len(b)/2] ^= 1; return b }, "checksum"},
		{"cut short", func(t *testing.T, _ string, b []byte) []byte { return b[:len(b)-40] }, "checksum"},
		{"empty", func(t *testing.T, _ string, b []byte) []byte { return nil }, "not a snapshot"},
		{"other version", func(t *testing.T, _ string, b []byte) []byte {
			body := append([]byte(index.SnapshotMagic), binary.AppendUvarint(nil, index.SnapshotVersion+1)...)
			return forge(append(body, b[len(index.SnapshotMagic)+1:len(b)-32]...))
		}, "version"},
		{"forged path", func(t *testing.T, _ string, b []byte) []byte {
			// Rename "after" (5 bytes) to "../af" and fix the checksum.
			body := slices.Clone(b[:len(b)-32])
			i := indexOf(body, []byte("\x05after"))
			if i < 0 {
				t.Fatal("no path 'after' in the snapshot")
			}
			copy(body[i+1:], "../af")
			return forge(body)
		}, `path "../af"`},
		{"forged mark", func(t *testing.T, _ string, b []byte) []byte {
			// A step's mark (kind 0, label "step") gets a kind the fold
			// never makes; the checksum is fixed.
			body := slices.Clone(b[:len(b)-32])
			i := indexOf(body, []byte("\x00\x04step"))
			if i < 0 {
				t.Fatal("no mark labelled 'step' in the snapshot")
			}
			body[i] = 9
			return forge(body)
		}, "not a mark"},
		{"mark past the head", func(t *testing.T, _ string, b []byte) []byte {
			// The first step's mark (a one-byte sequence: the history is
			// shorter than 128 events) gets a sequence past the head.
			body := slices.Clone(b[:len(b)-32])
			i := indexOf(body, []byte("\x00\x04step"))
			if i < 1 {
				t.Fatal("no mark labelled 'step' in the snapshot")
			}
			body[i-1] = 0x7f
			return forge(body)
		}, "past the head"},
		{"marks out of order", func(t *testing.T, _ string, b []byte) []byte {
			// The second step's mark gets the first one's sequence.
			body := slices.Clone(b[:len(b)-32])
			i := indexOf(body, []byte("\x00\x04step"))
			j := indexOf(body[i+1:], []byte("\x00\x04step")) + i + 1
			if i < 1 || j <= i {
				t.Fatal("no two marks labelled 'step' in the snapshot")
			}
			body[j-1] = body[i-1]
			return forge(body)
		}, "out of order"},
		{"log changed since", func(t *testing.T, store string, b []byte) []byte {
			// Same length, one byte of an early line's id changed.
			f, err := os.OpenFile(filepath.Join(store, "events.jsonl"), os.O_RDWR, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			// A hex digit of the first line's id becomes another one.
			c := make([]byte, 1)
			if _, err := f.ReadAt(c, 8); err != nil {
				t.Fatal(err)
			}
			c[0] = map[bool]byte{true: '1', false: '0'}[c[0] == '0']
			if _, err := f.WriteAt(c, 8); err != nil {
				t.Fatal(err)
			}
			return b
		}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e, ws := openT(t, Options{})
			buildSnapHistory(t, e, ws)
			store := e.opts.StoreDir
			if err := e.Close(); err != nil {
				t.Fatal(err)
			}
			snapPath := filepath.Join(store, index.SnapshotName)
			snap, err := os.ReadFile(snapPath)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(snapPath, tc.damage(t, store, snap), 0o600); err != nil {
				t.Fatal(err)
			}
			_, _, err = index.ReadSnapshot(store)
			if tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
				t.Fatalf("ReadSnapshot: got %v, want an error saying %q", err, tc.wantErr)
			}
			e2 := reopen(t, e, ws)
			if e2.log.Resumed() {
				t.Fatal("the damaged snapshot was used")
			}
			sameHistory(t, e2, rebuilt(t, e2))
		})
	}
}

func indexOf(b, sub []byte) int {
	for i := 0; i+len(sub) <= len(b); i++ {
		if string(b[i:i+len(sub)]) == string(sub) {
			return i
		}
	}
	return -1
}

// TestSnapshotWhileRunning: the engine writes a snapshot every
// snapshotEvery events, so that a crash (here: a copy of the store taken
// while the engine runs, as a SIGKILL would leave it) costs a mount only
// the lines after it.
func TestSnapshotWhileRunning(t *testing.T) {
	defer func(n record.Seq) { snapshotEvery = n }(snapshotEvery)
	snapshotEvery = 20
	e, ws := openT(t, Options{})
	for i := range 30 {
		p := filepath.Join(ws, "f")
		change(t, e, func() error { return os.WriteFile(p, []byte{byte(i)}, 0o644) }, Change{Path: "f"})
		if _, err := e.BeginStep(context.Background(), "s", nil); err != nil {
			t.Fatal(err)
		}
	}
	if testsupport.Poll(10*time.Second, func() bool { return record.Seq(e.snapHead.Load()) >= 20 }) != nil {
		t.Fatalf("no snapshot while running: snapshot head %d, log head %d", e.snapHead.Load(), e.Head())
	}
	// A crash image: the store as it is now, engine still running.
	if err := e.Sync(); err != nil {
		t.Fatal(err)
	}
	e.wsMu.Lock()
	crash := filepath.Join(t.TempDir(), "store")
	copyTree(t, e.opts.StoreDir, crash)
	e.wsMu.Unlock()
	c := openAt(t, ws, Options{StoreDir: crash})
	if !c.log.Resumed() {
		t.Fatal("the crash image did not start from the running engine's snapshot")
	}
	sameHistory(t, c, e)
}

// TestStepDoesNotWaitForSnapshot (issue 26): the flusher makes its index
// snapshot durable (an fsync, a rename and a directory fsync: tens to
// hundreds of milliseconds on a busy disk, every snapshotEvery events) after
// it lets go of the workspace lock, so a step and a capture made meanwhile
// wait for none of it; the snapshot still goes in place, and a mount resumes
// from it.
func TestStepDoesNotWaitForSnapshot(t *testing.T) {
	// Cleanups run last first: the commit is let go, then the engine
	// closed (openT's), then the variables restored.
	every, real := snapshotEvery, snapshotCommit
	t.Cleanup(func() { snapshotEvery, snapshotCommit = every, real })
	snapshotEvery = 20
	entered, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	snapshotCommit = func(p *index.PendingSnapshot) error {
		once.Do(func() { close(entered); <-release })
		return real(p)
	}
	e, ws := openT(t, Options{})
	var releaseOnce sync.Once
	unblock := func() { releaseOnce.Do(func() { close(release) }) }
	t.Cleanup(unblock)
	// While the snapshot is made durable: a step and a first write.
	editsWhileHeld(t, entered, 1, func(i int) error { return stepEdit(e, ws, "f", i) },
		"a step and a write waited for the index snapshot's fsync")
	if e.snapHead.Load() != 0 {
		t.Fatalf("snapshot head %d before the snapshot was made durable", e.snapHead.Load())
	}
	unblock()
	if testsupport.Poll(10*time.Second, func() bool { return record.Seq(e.snapHead.Load()) >= 20 }) != nil {
		t.Fatalf("the snapshot never went in place: snapshot head %d, log head %d", e.snapHead.Load(), e.Head())
	}
	head := e.Head()
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	c := openAt(t, ws, Options{StoreDir: e.opts.StoreDir})
	if !c.log.Resumed() {
		t.Fatal("the next mount did not start from the snapshot")
	}
	if c.Head() < head {
		t.Fatalf("head %d after resuming from the snapshot, was %d", c.Head(), head)
	}
}

// stepEdit makes a first write of byte i to name in ws, captured, and then
// begins a step: what a step and its first change must never wait for.
func stepEdit(e *Engine, ws, name string, i int) error {
	rel, _, err := e.Begin(context.Background(), Caller{PID: os.Getpid(), Comm: "test"}, Change{Path: name})
	if err != nil {
		return err
	}
	err = os.WriteFile(filepath.Join(ws, name), []byte{byte(i)}, 0o644)
	rel()
	if err != nil {
		return err
	}
	_, err = e.BeginStep(context.Background(), "s", nil)
	return err
}

// editsWhileHeld runs edit, a millisecond apart, until entered closes (a
// test hook now holds a snapshot's work), then after more edits; t fails
// when the hook is never entered, or with waited when those edits do not
// finish within 5 s.
func editsWhileHeld(t *testing.T, entered <-chan struct{}, after int, edit func(int) error, waited string) {
	t.Helper()
	done := make(chan error, 1)
	go func() {
		for i := 0; ; i++ {
			select {
			case <-entered:
				for j := range after {
					if err := edit(i + j); err != nil {
						done <- err
						return
					}
				}
				done <- nil
				return
			default:
			}
			if err := edit(i); err != nil {
				done <- err
				return
			}
			time.Sleep(time.Millisecond) // real time: edits spread while the snapshot is made
		}
	}()
	select {
	case <-entered:
	case err := <-done:
		t.Fatalf("no snapshot began: %v", err)
	case <-time.After(20 * time.Second):
		t.Fatal("no snapshot began")
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal(waited)
	}
}
