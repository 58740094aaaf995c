package replicate

import (
	"bytes"
	"context"
	"path/filepath"
	"testing"

	"github.com/zerofs/zerofs/internal/testsupport"
)

// TestCompaction: a hundred attempts of one change each make a hundred
// small segments; compaction keeps the chain a restore reads short (at
// most compactEvery-1 segments per level), and the restore from it equals
// @T.
func TestCompaction(t *testing.T) {
	old := compactEvery
	compactEvery = 4
	defer func() { compactEvery = old }()
	for _, key := range [][]byte{nil, make([]byte, 32)} {
		name := "plain"
		if key != nil {
			name = "keyed"
		}
		t.Run(name, func(t *testing.T) { compaction(t, key) })
	}
}

// compaction is TestCompaction with the replica key key (nil: none). A
// merged segment is written as a stream (compact.go): sealed, in chunks.
func compaction(t *testing.T, key []byte) {
	dir := t.TempDir()
	seedTree(t, dir)
	w := openWorkspace(t, dir)
	defer w.close()
	b := newMemBucket()
	u := URL{Bucket: "b", Prefix: "c"}
	r, err := Open(w.eng, b, u, w.store, Options{Logger: quiet, Key: key})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	rng := testsupport.Rand(t)
	ctx := context.Background()
	for i := 0; i < 100; i++ {
		for w.eng.Head() == r.State().Logged {
			w.change(t, rng)
		}
		if err := r.Once(ctx); err != nil {
			t.Fatal(err)
		}
	}
	// The namer may append a stash_named event (a removed file's) after
	// the last attempt read the head: name what is left, and replicate
	// that too, so the chain can be asked to reach the head (seed
	// 1796422938376320046 once ended at 108 with the head at 109).
	if err := w.eng.NameStashes(ctx); err != nil {
		t.Fatal(err)
	}
	if w.eng.Head() != r.State().Logged {
		if err := r.Once(ctx); err != nil {
			t.Fatal(err)
		}
	}
	segs, _, err := listReplica(ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	run, end := chain(segs)
	levels := 0
	for _, s := range run {
		levels = max(levels, s.Level)
	}
	if end != w.eng.Head() || len(run) > (compactEvery-1)*(levels+1) || levels < 2 {
		t.Fatalf("%d segments in the bucket: chain of %d to %d (head %d), %d levels", len(segs), len(run), end, w.eng.Head(), levels)
	}
	t.Logf("%d segments in the bucket, a restore reads %d (levels 0..%d)", len(segs), len(run), levels)
	for _, s := range run {
		body := b.objs[s.Name]
		if s.Level > 0 && key != nil && !bytes.HasPrefix(body, sealMagic2) {
			t.Errorf("merged segment %s is not sealed in chunks", s.Name)
		}
	}
	at := w.eng.Step().Seq
	got := filepath.Join(t.TempDir(), "r")
	if _, err := Restore(ctx, b, u, got, RestoreOptions{Logger: quiet, Key: key, SameOwner: true}); err != nil {
		t.Fatal(err)
	}
	sameTree(t, "restore after compaction", treeOf(t, got), stateAt(t, w.eng, at))
}
