package index

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/zerofs/zerofs/eventlog"
	"github.com/zerofs/zerofs/record"
)

// cutHistory folds n events into s from sequence from on (checkpoints of
// one of paths paths, a step every tenth event, a rewind among them, a
// person's change) and returns the next sequence. A path's name depends
// only on its number, so a later call with more paths reaches the same
// ones too.
func cutHistory(t *testing.T, s *State, from record.Seq, n, paths int) record.Seq {
	t.Helper()
	seq := from
	for i := range n {
		switch {
		case i%10 == 0:
			s.Add(evs{}.step(seq)[0])
		case i == n/2:
			s.Add(evs{}.rw(seq, seq-3, 0, record.FormUndo, 0)[0])
		default:
			x := int(seq) * 7919 % paths
			p := fmt.Sprintf("d%d/f%d", x%7, x)
			f := record.FileState{Path: p, Kind: record.KindFile, Blob: blobA, Bytes: int64(i), Mode: 0o644, Comm: "sed"}
			if err := s.AddCheckpoint(seq, 0, i%13 == 0, []record.FileState{f}); err != nil {
				t.Fatal(err)
			}
		}
		seq++
	}
	return seq
}

// encoded is the bytes of c's snapshot.
func encoded(t *testing.T, c *SnapshotCut) []byte {
	t.Helper()
	dir := t.TempDir()
	p, err := c.Encode(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Commit(); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, SnapshotName))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestSnapshotCutLeavesOutLaterFolds (issue 26): a snapshot cut at a
// resume point and encoded after more events were folded (records of
// paths it holds, paths new since, steps, stashes recorded and named,
// all while it encodes) is byte for byte the snapshot encoded at the cut,
// and reads back as the state at the cut.
func TestSnapshotCutLeavesOutLaterFolds(t *testing.T) {
	const paths = 3 * encodeBlock // several blocks of the read lock
	s := NewState()
	head := cutHistory(t, s, 1, 5000, paths) - 1
	r := eventlog.Resume{Head: head, Size: 1234, CRC: 99, Offsets: []int64{0, 100, 250}}
	want := encoded(t, s.Cut(r))

	c := s.Cut(r)
	// Folds after the cut, before the encode: new records of old paths,
	// new paths, a stash recorded and named.
	next := cutHistory(t, s, head+1, 3000, 2*paths)
	kept := "p-" + strings.Repeat("ab", 16)
	if err := s.AddCheckpoint(next, 0, false, []record.FileState{{Path: "d1/f1", Kind: record.KindFile, Kept: kept}}); err != nil {
		t.Fatal(err)
	}
	if err := s.Add(namedEvent(t, next+1, record.Named{Sequence: next, Kept: kept, Blob: blobA})); err != nil {
		t.Fatal(err)
	}
	// And folds while it encodes.
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		cutHistory(t, s, next+2, 3000, 4*paths)
	}()
	got := encoded(t, c)
	wg.Wait()
	if !bytes.Equal(got, want) {
		t.Fatalf("the snapshot encoded after later folds (%d bytes) differs from the one encoded at the cut (%d bytes)", len(got), len(want))
	}
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, SnapshotName), got, 0o600)
	back, br, err := ReadSnapshot(dir)
	if err != nil {
		t.Fatal(err)
	}
	if br.Head != head || back.Head() != head {
		t.Fatalf("read back: head %d (state %d), want %d", br.Head, back.Head(), head)
	}
	back.Index().Each(func(p string, seqs []record.Seq, _ func(int) record.FileState) {
		for _, q := range seqs {
			if q > head {
				t.Fatalf("%s: a record at %d, after the cut at %d", p, q, head)
			}
		}
	})
}

// TestSnapshotCutStaleAfterGC: gc's cut or thinning drops records in
// place, so a cut taken before it encodes nothing (ErrSnapshotStale) and
// leaves no file behind.
func TestSnapshotCutStaleAfterGC(t *testing.T) {
	for _, tc := range []struct {
		name string
		gc   func(t *testing.T, s *State, head record.Seq)
	}{
		{"prune", func(t *testing.T, s *State, head record.Seq) {
			if err := s.Add(record.Event{Seq: head + 1, Type: record.TypeHistoryPruned, Payload: []byte(`{"before":100,"reason":"gc","steps":10}`)}); err != nil {
				t.Fatal(err)
			}
		}},
		{"thin", func(t *testing.T, s *State, _ record.Seq) {
			if s.Index().Thin(10, 2000) == 0 {
				t.Fatal("the thin dropped nothing")
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := NewState()
			head := cutHistory(t, s, 1, 3000, encodeBlock/2) - 1
			c := s.Cut(eventlog.Resume{Head: head})
			tc.gc(t, s, head)
			dir := t.TempDir()
			if _, err := c.Encode(dir); !errors.Is(err, ErrSnapshotStale) {
				t.Fatalf("encode after a gc: got %v, want ErrSnapshotStale", err)
			}
			if ents, _ := os.ReadDir(dir); len(ents) != 0 {
				t.Fatalf("left behind: %v", ents)
			}
		})
	}
}
