package replicate

import (
	"context"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/zerofs/zerofs/internal/testsupport"
	"github.com/zerofs/zerofs/record"
)

// bucketCount is how many objects (and bytes, for blobs) the replica at
// u holds under each of its prefixes.
type bucketCount struct{ blobs, segs, bases int }

func countBucket(t testing.TB, u URL) bucketCount {
	t.Helper()
	b, err := OpenS3(context.Background(), u)
	if err != nil {
		t.Fatal(err)
	}
	var c bucketCount
	for _, p := range []struct {
		dir string
		n   *int
	}{{blobsDir, &c.blobs}, {logDir, &c.segs}, {basesDir, &c.bases}} {
		names, err := b.List(context.Background(), p.dir)
		if err != nil {
			t.Fatal(err)
		}
		*p.n = len(names)
	}
	return c
}

// buildHistory makes rounds of random changes in w, a step after each,
// replicated after each; it returns the steps' sequences.
func buildHistory(t testing.TB, w *workspace, r *Replicator, rounds int) []record.Seq {
	rng := testsupport.NewRand(uint64(rounds) * 7919)
	var steps []record.Seq
	for round := 0; round < rounds; round++ {
		for i := 0; i < 25; i++ {
			w.change(t, rng)
		}
		ev, err := w.eng.BeginStep(context.Background(), "round "+strconv.Itoa(round), nil)
		if err != nil {
			t.Fatal(err)
		}
		steps = append(steps, ev.Seq)
		if err := r.Once(context.Background()); err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
	}
	return steps
}

// checkOffered restores every step start the replica still offers (from
// the local cut to the newest base) and compares it with the local @T;
// one below the cut must be refused, saying why.
func checkOffered(t *testing.T, w *workspace, u URL, steps []record.Seq, base record.Seq) {
	t.Helper()
	cut := w.eng.PrunedBefore()
	n := 0
	for _, at := range append(steps, base) {
		if at > base || !w.eng.HasState(at) {
			continue
		}
		sameTree(t, "restore --at "+itoa(at), treeOf(t, restoreAt(t, u, at)), stateAt(t, w.eng, at))
		n++
	}
	if n < 2 {
		t.Fatalf("only %d states compared (cut %d, base %d, steps %v)", n, cut, base, steps)
	}
	if cut > 1 {
		err := restoreRefused(t, u, cut-1)
		if err == nil || !strings.Contains(err.Error(), "pruned") {
			t.Errorf("restore --at %d, below the cut %d: got %v, want a refusal naming the pruned history", cut-1, cut, err)
		}
	}
}

// restoreRefused restores u at a state the replica no longer offers and
// returns the error; the refusal must come from the log alone, before
// any base or blob is read.
func restoreRefused(t *testing.T, u URL, at record.Seq) error {
	t.Helper()
	b, err := OpenS3(context.Background(), u)
	if err != nil {
		t.Fatal(err)
	}
	var read []string
	hook := &hookBucket{Bucket: b, beforeGet: func(name string) {
		if !strings.HasPrefix(name, logDir) && name != leaseName {
			read = append(read, name)
		}
	}}
	dir := t.TempDir() + "/refused"
	_, err = Restore(context.Background(), hook, u, dir, RestoreOptions{At: at, HasAt: true, Logger: quiet, SameOwner: true})
	if len(read) > 0 {
		t.Errorf("restore --at %d, a state the replica does not offer, read %d objects besides the log before refusing (%s ...)", at, len(read), read[0])
	}
	if _, serr := os.Lstat(dir); !os.IsNotExist(serr) {
		t.Errorf("a refused restore left %s behind (%v)", dir, serr)
	}
	return err
}

// TestGCPropagates: a local gc --before N reaches the bucket: the blobs
// only states before N needed are deleted (and the segments compaction
// merged, and the older bases), and every state the replica still offers
// restores byte for byte as the local @T.
func TestGCPropagates(t *testing.T) {
	startS3(t)
	defer func(n int) { compactEvery = n }(compactEvery)
	compactEvery = 3
	dir := t.TempDir()
	seedTree(t, dir)
	w := openWorkspace(t, dir)
	defer w.close()
	u := URL{Bucket: "replicas", Prefix: "gc"}
	r := replicator(t, w, u, Options{BaseEvery: time.Nanosecond, SegmentBytes: 2 << 10})
	steps := buildHistory(t, w, r, 6)
	before := countBucket(t, u)
	if before.bases != 1 {
		t.Errorf("%d bases in the bucket, want the newest only", before.bases)
	}
	cut := steps[3]
	if _, err := w.eng.GC(context.Background(), cut); err != nil {
		t.Fatal(err)
	}
	if err := r.Once(context.Background()); err != nil {
		t.Fatal(err)
	}
	after := countBucket(t, u)
	st := r.State()
	t.Logf("gc --before %d: bucket %+v -> %+v, %d objects deleted in all, base %d", cut, before, after, st.Deleted, st.Base)
	if after.blobs >= before.blobs {
		t.Errorf("the bucket holds %d blobs after the gc, %d before: nothing was deleted", after.blobs, before.blobs)
	}
	if after.bases != 1 {
		t.Errorf("%d bases after the gc, want 1", after.bases)
	}
	if st.Base <= steps[len(steps)-1] {
		t.Errorf("the base is at %d, not after the gc's cut event", st.Base)
	}
	checkOffered(t, w, u, steps, st.Base)
	// The replica's summary says where its history starts.
	b, _ := OpenS3(context.Background(), u)
	sum, err := Describe(context.Background(), b, u, nil)
	if err != nil {
		t.Fatal(err)
	}
	if sum.PrunedBefore != w.eng.PrunedBefore() {
		t.Errorf("log --replica says the history starts at %d, the store at %d", sum.PrunedBefore, w.eng.PrunedBefore())
	}
}

// TestRestoreWhileCollecting: a restore that listed the replica before a
// newer base made its objects unneeded finds them gone, lists again, and
// restores the newest state.
func TestRestoreWhileCollecting(t *testing.T) {
	startS3(t)
	dir := t.TempDir()
	seedTree(t, dir)
	w := openWorkspace(t, dir)
	defer w.close()
	u := URL{Bucket: "replicas", Prefix: "race"}
	r := replicator(t, w, u, Options{BaseEvery: time.Nanosecond})
	steps := buildHistory(t, w, r, 3)
	s3b, err := OpenS3(context.Background(), u)
	if err != nil {
		t.Fatal(err)
	}
	// The restore's first read of a base: the writer has, by then, gc'd,
	// written a new base and deleted the old one.
	fired := false
	hook := &hookBucket{Bucket: s3b, beforeGet: func(name string) {
		if strings.HasPrefix(name, basesDir) && !fired {
			fired = true
			if _, err := w.eng.GC(context.Background(), steps[1]); err != nil {
				t.Error(err)
			}
			if err := r.Once(context.Background()); err != nil {
				t.Error(err)
			}
		}
	}}
	dst := t.TempDir() + "/restored"
	res, err := Restore(context.Background(), hook, u, dst, RestoreOptions{Logger: quiet, SameOwner: true})
	if err != nil {
		t.Fatal(err)
	}
	if !fired || res.Sequence != r.State().Base {
		t.Fatalf("restored %d (the race fired: %v), want the newest base %d", res.Sequence, fired, r.State().Base)
	}
	sameTree(t, "restore during a collect", treeOf(t, dst), stateAt(t, w.eng, res.Sequence))
}

type hookBucket struct {
	Bucket
	beforeGet func(string)
}

func (h *hookBucket) Get(ctx context.Context, name string) ([]byte, error) {
	h.beforeGet(name)
	return h.Bucket.Get(ctx, name)
}

func (h *hookBucket) GetReader(ctx context.Context, name string) (io.ReadCloser, error) {
	h.beforeGet(name)
	return h.Bucket.GetReader(ctx, name)
}

// childCollectAndHang replicates the store in arg ("DIR PREFIX K") after
// a local gc, and stops dead (for the parent's SIGKILL) after deleting K
// objects.
func childCollectAndHang(arg string) int {
	f := strings.Fields(arg)
	k, _ := strconv.Atoi(f[2])
	t := &childT{}
	w := openWorkspace(t, f[0])
	u := URL{Bucket: "replicas", Prefix: f[1]}
	b, err := OpenS3(context.Background(), u)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	r, err := Open(w.eng, b, u, w.store, Options{BaseEvery: time.Nanosecond})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	n := 0
	afterDelete = func(name string) {
		n++
		fmt.Printf("deleted %s\n", name)
		if n == k {
			select {}
		}
	}
	if err := r.Once(context.Background()); err != nil {
		fmt.Fprintln(os.Stderr, "replicate:", err)
		return 1
	}
	fmt.Println("done")
	return 0
}

// TestSIGKILLMidDeletion: the replicator that propagates a gc is
// SIGKILLed in the middle of its deletions; the replica as it left it
// restores every state it offers, and the next run finishes the
// deletion (nothing it leaves is unneeded: a run after it deletes
// nothing).
func TestSIGKILLMidDeletion(t *testing.T) {
	startS3(t)
	rng := testsupport.Rand(t)
	dir := t.TempDir()
	seedTree(t, dir)
	const prefix = "killgc"
	u := URL{Bucket: "replicas", Prefix: prefix}
	w := openWorkspace(t, dir)
	r := replicator(t, w, u, Options{BaseEvery: time.Nanosecond})
	steps := buildHistory(t, w, r, 5)
	before := countBucket(t, u)
	if _, err := w.eng.GC(context.Background(), steps[3]); err != nil {
		t.Fatal(err)
	}
	r.Close()
	w.close()

	k := 1 + rng.IntN(4)
	c := testsupport.StartChild(t, "collect-and-hang", fmt.Sprintf("%s %s %d", dir, prefix, k), testsupport.ChildOptions{})
	for i := 0; i < k; i++ {
		c.Expect(t, "deleted ")
	}
	c.Kill(t)
	mid := countBucket(t, u)

	w = openWorkspace(t, dir)
	defer w.close()
	b, _ := OpenS3(context.Background(), u)
	segs, bases, err := listReplica(context.Background(), b)
	if err != nil {
		t.Fatal(err)
	}
	_, end := chain(segs)
	newest, ok := newestBase(bases, end)
	if !ok {
		t.Fatal("no base in the replica after the kill")
	}
	t.Logf("killed after %d deletions: bucket %+v -> %+v; newest base %d", k, before, mid, newest.Seq)
	checkOffered(t, w, u, steps, newest.Seq)

	r = replicator(t, w, u, Options{BaseEvery: time.Nanosecond})
	if err := r.Once(context.Background()); err != nil {
		t.Fatalf("resume: %v", err)
	}
	after := countBucket(t, u)
	if after.blobs >= mid.blobs && mid.blobs >= before.blobs {
		t.Errorf("no blob deleted: %+v, %+v, %+v", before, mid, after)
	}
	r.Close()
	r = replicator(t, w, u, Options{BaseEvery: time.Nanosecond})
	deleted := r.State().Deleted
	if err := r.Once(context.Background()); err != nil {
		t.Fatal(err)
	}
	if d := r.State().Deleted - deleted; d != 0 {
		t.Errorf("a run after the resumed one still deleted %d objects", d)
	}
	checkOffered(t, w, u, steps, r.State().Base)
}

// TestThinPropagates: a local gc that thins (one state a day kept before
// a cut, here every step of today's history but the first) reaches the
// bucket as a gc does: the blobs only the thinned states needed are
// deleted, every state the replica still offers restores as the local @T,
// and a thinned state is refused.
func TestThinPropagates(t *testing.T) {
	startS3(t)
	dir := t.TempDir()
	seedTree(t, dir)
	w := openWorkspace(t, dir)
	defer w.close()
	u := URL{Bucket: "replicas", Prefix: "thin"}
	r := replicator(t, w, u, Options{BaseEvery: time.Nanosecond, Logger: quiet})
	steps := buildHistory(t, w, r, 6)
	before := countBucket(t, u)
	res, err := w.eng.GCWith(context.Background(), record.GCRequest{ThinBefore: steps[4]})
	if err != nil {
		t.Fatal(err)
	}
	if res.Thinned == nil || len(w.eng.Thinned()) == 0 {
		t.Fatalf("the gc thinned nothing: %+v", res)
	}
	if err := r.Once(context.Background()); err != nil {
		t.Fatal(err)
	}
	after := countBucket(t, u)
	st := r.State()
	t.Logf("thin before %d: bucket %+v -> %+v, thinned %v, base %d", steps[4], before, after, w.eng.Thinned(), st.Base)
	if after.blobs >= before.blobs {
		t.Errorf("the bucket holds %d blobs after the thin, %d before: nothing was deleted", after.blobs, before.blobs)
	}
	if st.Base < res.ThinSeq {
		t.Errorf("the base is at %d, before the thin's event %d", st.Base, res.ThinSeq)
	}
	checkOffered(t, w, u, steps, st.Base)
	thinned := 0
	for _, at := range steps {
		if w.eng.HasState(at) {
			continue
		}
		thinned++
		if err := restoreRefused(t, u, at); err == nil || !strings.Contains(err.Error(), "thinned") {
			t.Errorf("restore --at %d, a thinned state: got %v, want a refusal naming the thin", at, err)
		}
	}
	if thinned == 0 {
		t.Errorf("no step's state was thinned away (steps %v, thinned %v)", steps, w.eng.Thinned())
	}
}
