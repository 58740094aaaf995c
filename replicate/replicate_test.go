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

func TestMain(m *testing.M) {
	testsupport.RunChild(map[string]func(string) int{
		"replicate-and-change": childReplicateAndChange,
		"collect-and-hang":     childCollectAndHang,
		"replicate-large":      childReplicateLarge,
	})
	os.Exit(m.Run())
}

// replicator opens a replicator for w to u (on the S3 server the test
// started), with bases as often as asked.
func replicator(t testing.TB, w *workspace, u URL, opts Options) *Replicator {
	t.Helper()
	b, err := OpenS3(context.Background(), u)
	if err != nil {
		t.Fatal(err)
	}
	r, err := Open(w.eng, b, u, w.store, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

// restoreAt restores u at seq into a new directory and returns it, with
// SameOwner: the test's own replica, whose modes are compared as written.
func restoreAt(t testing.TB, u URL, at record.Seq) string {
	t.Helper()
	b, err := OpenS3(context.Background(), u)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "restored")
	if _, err := Restore(context.Background(), b, u, dir, RestoreOptions{At: at, HasAt: true, SameOwner: true}); err != nil {
		t.Fatalf("restore %s --at %d: %v", u, at, err)
	}
	return dir
}

// TestRestoreRandomStates: a random history (writes, mkdirs, symlinks,
// chmods, removes, renames, steps, rewinds) is replicated in several
// rounds, some with changes in the step the base is made at; states at random sequences are restored and compared with the
// local @T, path by path (kind, mode, content, symlink target), and the
// restored store's own @T agree with the original's.
func TestRestoreRandomStates(t *testing.T) {
	startS3(t)
	rng := testsupport.Rand(t)
	dir := t.TempDir()
	seedTree(t, dir)
	w := openWorkspace(t, dir)
	defer w.close()
	u := URL{Bucket: "replicas", Prefix: "team/ws1"}
	r := replicator(t, w, u, Options{BaseEvery: time.Nanosecond})
	for round := 0; round < 4; round++ {
		for i := 0; i < 40; i++ {
			w.change(t, rng)
		}
		if _, err := w.eng.BeginStep(context.Background(), "round", nil); err != nil {
			t.Fatal(err)
		}
		// In odd rounds the new step changes a few paths before the
		// attempt: a file the round removed (and stashed) may then be
		// named after a change in the step, and the base at its start
		// names it from the log past it (TestBaseNamesStashesAhead makes
		// that case every time).
		for range round % 2 * 3 {
			w.change(t, rng)
		}
		if err := r.Once(context.Background()); err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
	}
	st := r.State()
	if st.Base < w.eng.Step().Seq || st.Logged != w.eng.Head() {
		t.Fatalf("replica at log %d base %d, want %d and %d", st.Logged, st.Base, w.eng.Head(), w.eng.Step().Seq)
	}
	for i := 0; i < 6; i++ {
		at := record.Seq(rng.IntN(int(st.Base) + 1))
		if i == 0 {
			at = st.Base
		}
		if !w.eng.HasState(at) {
			continue
		}
		dir := restoreAt(t, u, at)
		want := stateAt(t, w.eng, at)
		sameTree(t, "restore --at "+itoa(at), treeOf(t, dir), want)
		t.Logf("restore --at %d of head %d: %d paths compared", at, w.eng.Head(), len(want))
		// The restored store offers the replicated history: its @T for
		// a T below at are the original's.
		rw := openWorkspace(t, dir)
		for _, tt := range []record.Seq{0, at / 2, at} {
			if w.eng.HasState(tt) && rw.eng.HasState(tt) {
				sameTree(t, "restored @"+itoa(tt), stateAt(t, rw.eng, tt), stateAt(t, w.eng, tt))
			}
		}
		rw.close()
	}
}

// seedTree gives a workspace a tree to begin with: files, directories,
// modes and a symlink that no event names until they change.
func seedTree(t testing.TB, dir string) {
	for i := 0; i < 30; i++ {
		sub := filepath.Join(dir, "src", "pkg"+uitoa(uint64(i%4)))
		os.MkdirAll(sub, 0o755)
		if err := os.WriteFile(filepath.Join(sub, "f"+uitoa(uint64(i))+".go"), []byte(strings.Repeat("line\n", i*7)), os.FileMode(0o600+i%2*0o100)); err != nil {
			t.Fatal(err)
		}
	}
	os.Symlink("src/pkg1", filepath.Join(dir, "p1"))
	os.Chmod(filepath.Join(dir, "src", "pkg3"), 0o700)
}

func itoa(s record.Seq) string { return uitoa(uint64(s)) }

func uitoa(n uint64) string {
	if n == 0 {
		return "0"
	}
	var b []byte
	for ; n > 0; n /= 10 {
		b = append([]byte{byte('0' + n%10)}, b...)
	}
	return string(b)
}

// TestSecondWriterRefused: a second store replicating to the same prefix
// is refused with a clear message, and writes nothing; the first store
// goes on, also after a restart.
func TestSecondWriterRefused(t *testing.T) {
	startS3(t)
	u := URL{Bucket: "replicas", Prefix: "shared"}
	w1 := openWorkspace(t, t.TempDir())
	defer w1.close()
	os.WriteFile(filepath.Join(w1.dir, "f"), []byte("one"), 0o644)
	r1 := replicator(t, w1, u, Options{})
	if err := r1.Once(context.Background()); err != nil {
		t.Fatal(err)
	}
	w2 := openWorkspace(t, t.TempDir())
	defer w2.close()
	r2 := replicator(t, w2, u, Options{})
	err := r2.Once(context.Background())
	var le *LeaseError
	if !errors.As(err, &le) || !errors.Is(err, ErrLeased) {
		t.Fatalf("second writer: got %v, want a *LeaseError", err)
	}
	if !strings.Contains(err.Error(), "one writer per prefix") || !strings.Contains(err.Error(), r1.State().Store) {
		t.Errorf("refusal %q does not say who holds the prefix", err)
	}
	if st, _ := ReadState(w2.store); st.LastError == "" {
		t.Errorf("the refusal is not in the second store's replica.json")
	}
	// The first store, reopened (a restart), still writes.
	r1.Close()
	r1 = replicator(t, w1, u, Options{})
	if err := r1.Once(context.Background()); err != nil {
		t.Fatalf("first writer after a restart: %v", err)
	}
}
