package replicate

import (
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
	dir := t.TempDir()
	seedTree(t, dir)
	w := openWorkspace(t, dir)
	defer w.close()
	b := newMemBucket()
	u := URL{Bucket: "b", Prefix: "c"}
	r, err := Open(w.eng, b, u, w.store, Options{Logger: quiet})
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
	at := w.eng.Step().Seq
	got := filepath.Join(t.TempDir(), "r")
	if _, err := Restore(ctx, b, u, got, RestoreOptions{Logger: quiet}); err != nil {
		t.Fatal(err)
	}
	sameTree(t, "restore after compaction", treeOf(t, got), stateAt(t, w.eng, at))
}
