package replicate

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/zerofs/zerofs/internal/testsupport"
	"github.com/zerofs/zerofs/record"
)

// TestMissingSegmentIsDamage: a log segment missing from the middle of a
// replica (on a real S3 server) is damage, named with the events it
// lacks, for restore and for log --replica alike: not "no base yet",
// which it was reported as (issue 27, section 6). The writer's next run
// uploads what is missing again, and the replica restores.
func TestMissingSegmentIsDamage(t *testing.T) {
	startS3(t)
	rng := testsupport.Rand(t)
	dir := t.TempDir()
	seedTree(t, dir)
	w := openWorkspace(t, dir)
	defer w.close()
	u := URL{Bucket: "replicas", Prefix: "gap"}
	r := replicator(t, w, u, Options{BaseEvery: time.Nanosecond, Logger: quiet})
	for round := 0; round < 3; round++ {
		for i := 0; i < 5; i++ {
			w.change(t, rng)
		}
		if _, err := w.eng.BeginStep(context.Background(), "round", nil); err != nil {
			t.Fatal(err)
		}
		if err := r.Once(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	b, err := OpenS3(context.Background(), u)
	if err != nil {
		t.Fatal(err)
	}
	segs, _, err := listReplica(context.Background(), b)
	if err != nil || len(segs) < 3 {
		t.Fatalf("segments %v (%v), want 3 or more", segs, err)
	}
	victim := segs[1]
	if err := b.Delete(context.Background(), victim.Name); err != nil {
		t.Fatal(err)
	}
	target := filepath.Join(t.TempDir(), "restored")
	_, err = Restore(context.Background(), b, u, target, RestoreOptions{Logger: quiet})
	want := "events " + itoa(victim.First) + ".." + itoa(victim.Last) + " are missing"
	if !errors.Is(err, record.ErrCorrupt) || errors.Is(err, ErrNoState) || !strings.Contains(err.Error(), want) {
		t.Errorf("restore with %s deleted: got %v, want damage saying %q", victim.Name, err, want)
	}
	if _, serr := os.Lstat(target); !os.IsNotExist(serr) {
		t.Errorf("the refused restore left %s behind", target)
	}
	if _, err := Describe(context.Background(), b, u, nil); !errors.Is(err, record.ErrCorrupt) || !strings.Contains(err.Error(), want) {
		t.Errorf("describe with %s deleted: got %v, want damage saying %q", victim.Name, err, want)
	}
	// The writer, restarted, finds the replica short and fills it.
	r.Close()
	r = replicator(t, w, u, Options{BaseEvery: time.Nanosecond, Logger: quiet})
	if err := r.Once(context.Background()); err != nil {
		t.Fatal(err)
	}
	at := w.eng.Step().Seq
	sameTree(t, "restore after the writer filled the gap", treeOf(t, restoreAt(t, u, at)), stateAt(t, w.eng, at))
}
