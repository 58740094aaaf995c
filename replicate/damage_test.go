package replicate

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/zerofs/zerofs/internal/testsupport"
	"github.com/zerofs/zerofs/record"
	"github.com/zerofs/zerofs/rewind"
)

// memBucket is an in-memory Bucket for unit tests (the integration tests
// use a real S3 server).
type memBucket struct {
	mu   sync.Mutex
	objs map[string][]byte
	puts int
}

func newMemBucket() *memBucket { return &memBucket{objs: map[string][]byte{}} }

func (m *memBucket) PutNew(_ context.Context, name string, body []byte) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.puts++
	if _, ok := m.objs[name]; ok {
		return ErrExists
	}
	m.objs[name] = append([]byte(nil), body...)
	return nil
}

func (m *memBucket) PutNewReader(ctx context.Context, name string, body io.ReadSeeker, size int64) error {
	b, err := io.ReadAll(body)
	if err != nil {
		return err
	}
	if int64(len(b)) != size {
		return errors.New("memBucket: body is not size bytes")
	}
	return m.PutNew(ctx, name, b)
}

func (m *memBucket) Delete(_ context.Context, name string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.objs, name)
	return nil
}

func (m *memBucket) Get(_ context.Context, name string) ([]byte, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	b, ok := m.objs[name]
	if !ok {
		return nil, ErrNotFound
	}
	return append([]byte(nil), b...), nil
}

func (m *memBucket) GetReader(ctx context.Context, name string) (io.ReadCloser, error) {
	b, err := m.Get(ctx, name)
	if err != nil {
		return nil, err
	}
	return io.NopCloser(bytes.NewReader(b)), nil
}

func (m *memBucket) List(_ context.Context, prefix string) ([]string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []string
	for n := range m.objs {
		if strings.HasPrefix(n, prefix) {
			out = append(out, n)
		}
	}
	sort.Strings(out)
	return out, nil
}

// TestRestoreRefusesDamage: an object of the replica changed by one byte
// (a blob, a log segment, a base) or missing is refused with a clear
// error naming it, and the restore leaves nothing behind.
func TestRestoreRefusesDamage(t *testing.T) {
	for _, kind := range []string{blobsDir, logDir, basesDir, "missing " + blobsDir} {
		t.Run(kind, func(t *testing.T) {
			dir := t.TempDir()
			seedTree(t, dir)
			w := openWorkspace(t, dir)
			defer w.close()
			rng := testsupport.Rand(t)
			for i := 0; i < 20; i++ {
				w.change(t, rng)
			}
			w.eng.BeginStep(context.Background(), "s", nil)
			b := newMemBucket()
			u := URL{Bucket: "b", Prefix: "p"}
			r, err := Open(w.eng, b, u, w.store, Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			if err := r.Once(context.Background()); err != nil {
				t.Fatal(err)
			}
			var victim string
			for n := range b.objs {
				if strings.HasPrefix(n, strings.TrimPrefix(kind, "missing ")) && n > victim {
					victim = n
				}
			}
			if victim == "" {
				t.Fatalf("no object under %s", kind)
			}
			if strings.HasPrefix(kind, "missing") {
				delete(b.objs, victim)
			} else {
				b.objs[victim][len(b.objs[victim])/2] ^= 1
			}
			target := filepath.Join(t.TempDir(), "restored")
			_, err = Restore(context.Background(), b, u, target, RestoreOptions{Logger: quiet})
			var de *DamageError
			switch {
			case strings.HasPrefix(kind, "missing"):
				if !errors.Is(err, ErrNotFound) {
					t.Fatalf("got %v, want ErrNotFound", err)
				}
			case !errors.As(err, &de) || !errors.Is(err, record.ErrCorrupt) || !strings.Contains(err.Error(), victim):
				t.Fatalf("got %v, want a *DamageError naming %s", err, victim)
			}
			if _, serr := os.Lstat(target); !os.IsNotExist(serr) {
				t.Errorf("a refused restore left %s behind (%v)", target, serr)
			}
		})
	}
}

// TestChain: segments chain from 1 without a gap; an overlap left by a
// crash is bridged; a gap ends the chain.
func TestChain(t *testing.T) {
	seg := func(a, b record.Seq) segment { return segment{First: a, Last: b} }
	for _, c := range []struct {
		segs []segment
		want record.Seq
	}{
		{nil, 0},
		{[]segment{seg(2, 5)}, 0},
		{[]segment{seg(1, 5), seg(6, 9)}, 9},
		{[]segment{seg(1, 5), seg(1, 7), seg(6, 9)}, 9},
		{[]segment{seg(1, 5), seg(7, 9)}, 5},
	} {
		if _, got := chain(c.segs); got != c.want {
			t.Errorf("chain(%v) = %d, want %d", c.segs, got, c.want)
		}
	}
}

// TestGroupedAndIdle: while the workspace changes, Run writes about one
// segment per attempt (not one per event); once it pauses, one base, and
// then, idle, nothing at all.
func TestGroupedAndIdle(t *testing.T) {
	dir := t.TempDir()
	w := openWorkspace(t, dir)
	defer w.close()
	b := newMemBucket()
	r, err := Open(w.eng, b, URL{Bucket: "b"}, w.store, Options{Every: 100 * time.Millisecond, BaseEvery: time.Hour, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); r.Run(ctx) }()
	defer func() { cancel(); <-done }()
	rng := testsupport.Rand(t)
	start := time.Now()
	for time.Since(start) < time.Second {
		w.change(t, rng)
	}
	w.eng.Sync()
	// At least head: the engine may append after it (a stash_named event
	// the namer writes for a removed file), and the replica then follows.
	head := w.eng.Head()
	if err := testsupport.Poll(10*time.Second, func() bool { return r.State().Logged >= head }); err != nil {
		t.Fatalf("replica at %d, want %d or more", r.State().Logged, head)
	}
	b.mu.Lock()
	segs := 0
	for n := range b.objs {
		if strings.HasPrefix(n, logDir) {
			segs++
		}
	}
	b.mu.Unlock()
	// One attempt per 100 ms over about a second (and the catching up).
	if segs > 20 || head < 50 {
		t.Errorf("%d events in %d segments, want them grouped (about 10)", head, segs)
	}
	// A pause makes one base (three quiet attempts), and then nothing.
	if err := testsupport.Poll(10*time.Second, func() bool {
		st := r.State()
		return st.Based && st.Base >= w.eng.Step().Seq && st.Logged == w.eng.Head()
	}); err != nil {
		t.Fatalf("no base after a pause: %+v, step %d", r.State(), w.eng.Step().Seq)
	}
	b.mu.Lock()
	before := b.puts
	b.mu.Unlock()
	time.Sleep(time.Second) // idle: ten attempts
	b.mu.Lock()
	after := b.puts
	b.mu.Unlock()
	if after != before {
		t.Errorf("an idle workspace made %d PUTs in a second, want none", after-before)
	}
	t.Logf("%d events in %d segments", head, segs)
}

// TestBaseNamesStashesAhead: a base is made at the current step's start.
// A file removed before that start is stashed, and its stash may be named
// after a change later in the step (the namer waits for removals to
// pause): the base at the start still names it, from the stash_named event
// ahead of it, rather than wait for the next step (it once waited for
// ever, an idle workspace never got its base: TestGroupedAndIdle, seed
// 1796424663482429762 in CI).
func TestBaseNamesStashesAhead(t *testing.T) {
	ctx := context.Background()
	for try := 0; ; try++ {
		dir := t.TempDir()
		for _, n := range []string{"f", "g"} {
			if err := os.WriteFile(filepath.Join(dir, n), []byte(n), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		w := openWorkspace(t, dir)
		remove := func(p string) record.Seq {
			release, _, err := w.eng.Begin(ctx, rewind.Caller{PID: 1, Comm: "test"}, rewind.Change{Path: p, Removed: true, Stash: true})
			if err != nil {
				t.Fatal(err)
			}
			defer release()
			if err := os.Remove(filepath.Join(dir, p)); err != nil {
				t.Fatal(err)
			}
			return w.eng.Head()
		}
		removed := remove("f")
		step, err := w.eng.BeginStep(ctx, "later", nil)
		if err != nil {
			t.Fatal(err)
		}
		changed := remove("g")
		if err := w.eng.NameStashes(ctx); err != nil {
			t.Fatal(err)
		}
		// The order wanted: f's stash named after g's removal, in the
		// step. The namer names after a 50 ms pause in removals, so on a
		// loaded machine it may have named f's before the step: again.
		var namedAt record.Seq
		for ev, err := range w.eng.Log().Events(removed + 1) {
			if err != nil {
				t.Fatal(err)
			}
			if ev.Type == record.TypeStashNamed && strings.Contains(string(ev.Payload), fmt.Sprintf(`"sequence":%d,`, removed)) {
				namedAt = ev.Seq
			}
		}
		if namedAt < changed {
			w.close()
			if try == 19 {
				t.Fatalf("f's stash was named at %d, before g's removal at %d, in 20 tries", namedAt, changed)
			}
			continue
		}
		defer w.close()
		b := newMemBucket()
		r, err := Open(w.eng, b, URL{Bucket: "b"}, w.store, Options{Logger: quiet})
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		if err := r.attempt(ctx, true); err != nil {
			t.Fatal(err)
		}
		if st := r.State(); !st.Based || st.Base != step.Seq || st.Logged != w.eng.Head() {
			t.Fatalf("after a final attempt: %+v, want a base at the step's start %d and the log to %d (f removed at %d, named at %d)",
				st, step.Seq, w.eng.Head(), removed, namedAt)
		}
		// The states before and after f's removal, from the replica alone.
		for _, at := range []record.Seq{removed - 1, step.Seq} {
			out := filepath.Join(t.TempDir(), "restored")
			if _, err := Restore(ctx, b, URL{Bucket: "b"}, out, RestoreOptions{At: at, HasAt: true, Logger: quiet, SameOwner: true}); err != nil {
				t.Fatalf("restore at %d: %v", at, err)
			}
			sameTree(t, fmt.Sprintf("restored at %d", at), treeOf(t, out), stateAt(t, w.eng, at))
			if at != step.Seq {
				continue
			}
			// No rewind at the base itself: the restored log ends with
			// the restore's own stash_named event, at the base's next.
			raw, err := os.ReadFile(filepath.Join(out, record.StoreName, record.LogName))
			if err != nil {
				t.Fatal(err)
			}
			lines := strings.Split(strings.TrimSuffix(string(raw), "\n"), "\n")
			var last record.Event
			if err := json.Unmarshal([]byte(lines[len(lines)-1]), &last); err != nil || last.Seq != step.Seq+1 || last.Type != record.TypeStashNamed {
				t.Errorf("the restored log ends with %s (%v), want a stash_named event at %d", lines[len(lines)-1], err, step.Seq+1)
			}
		}
		return
	}
}

// stopBucket fails every PUT while failing is set, and calls afterPut
// after each PUT that succeeds.
type stopBucket struct {
	Bucket
	failing  bool
	afterPut func(name string)
}

func (s *stopBucket) PutNew(ctx context.Context, name string, body []byte) error {
	if s.failing {
		return errors.New("stopBucket: endpoint down")
	}
	err := s.Bucket.PutNew(ctx, name, body)
	if err == nil && s.afterPut != nil {
		s.afterPut(name)
	}
	return err
}

func (s *stopBucket) PutNewReader(ctx context.Context, name string, body io.ReadSeeker, size int64) error {
	b, err := io.ReadAll(body)
	if err != nil {
		return err
	}
	return s.PutNew(ctx, name, b)
}

// TestStopAfterProgress: a stop (unmount, Ctrl-C) that ends Run right
// after an attempt uploaded a base is not a failure, and what the
// attempt did is in replica.json: the replica caught up, nothing pending,
// and the failure recorded before it (the endpoint was down) gone, not
// shown by status as the last word.
func TestStopAfterProgress(t *testing.T) {
	w := openWorkspace(t, t.TempDir())
	defer w.close()
	os.WriteFile(filepath.Join(w.dir, "f"), []byte("content\n"), 0o644)
	w.eng.BeginStep(context.Background(), "s", nil)
	b := &stopBucket{Bucket: newMemBucket(), failing: true}
	r, err := Open(w.eng, b, URL{Bucket: "b"}, w.store, Options{Every: 10 * time.Millisecond, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if err := r.Once(context.Background()); err == nil {
		t.Fatal("an attempt against a failing endpoint succeeded")
	}
	if st, _ := ReadState(w.store); st.LastError == "" || st.Pending == 0 {
		t.Fatalf("after a failure replica.json says %+v, want the error and what is pending", st)
	}
	ctx, cancel := context.WithCancel(context.Background())
	b.failing = false
	b.afterPut = func(name string) {
		if strings.HasPrefix(name, basesDir) {
			cancel()
		}
	}
	r.Run(ctx)
	st, err := ReadState(w.store)
	if err != nil {
		t.Fatal(err)
	}
	if !st.Based || st.Base < w.eng.Step().Seq || st.Logged != w.eng.Head() || st.Pending != 0 || st.LastError != "" {
		t.Errorf("after a stop that followed a base, replica.json says %+v: want the base, nothing pending, no error", st)
	}
}
