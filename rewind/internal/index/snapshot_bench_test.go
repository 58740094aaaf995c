package index

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"runtime"
	"testing"
	"time"

	"github.com/zerofs/zerofs/eventlog"
	"github.com/zerofs/zerofs/record"
)

// BenchmarkReadSnapshot reads the index snapshot of a history shaped like
// rewind's writeSyntheticLog (one-file checkpoints, nine in every ten
// events) over a few or nearly as many paths as records: what a mount
// pays before it serves a request, and the heap the index keeps.
func BenchmarkReadSnapshot(b *testing.B) {
	for _, c := range []struct{ records, paths int }{{900_000, 10_000}, {900_000, 900_000}} {
		b.Run(fmt.Sprintf("records=%d/paths=%d", c.records, c.paths), func(b *testing.B) {
			dir := b.TempDir()
			s := benchHistory(b, c.records, c.paths, 0)
			if err := WriteSnapshot(dir, eventlog.Resume{Head: record.Seq(c.records)}, s); err != nil {
				b.Fatal(err)
			}
			s = nil
			runtime.GC()
			var heap uint64
			for b.Loop() {
				ix, _, _, err := readSnapshot(dir)
				if err != nil {
					b.Fatal(err)
				}
				runtime.GC()
				var ms runtime.MemStats
				runtime.ReadMemStats(&ms)
				heap = ms.HeapInuse
				runtime.KeepAlive(ix)
			}
			b.ReportMetric(float64(heap)/(1<<20), "MiB-heap")
		})
	}
}

// BenchmarkEncodeSnapshot encodes the index snapshot of such a history to
// a temporary file (not made durable): what the snapshotter does every
// snapshotEvery events, without the workspace lock
// (BenchmarkSnapshotLockHold measures what it holds the lock for).
func BenchmarkEncodeSnapshot(b *testing.B) {
	for _, c := range []struct{ records, paths int }{{100_000, 50_000}, {900_000, 900_000}} {
		b.Run(fmt.Sprintf("records=%d/paths=%d", c.records, c.paths), func(b *testing.B) {
			dir := b.TempDir()
			s := benchHistory(b, c.records, c.paths, 0)
			for b.Loop() {
				p, err := EncodeSnapshot(dir, eventlog.Resume{Head: record.Seq(c.records)}, s)
				if err != nil {
					b.Fatal(err)
				}
				p.f.Close()
				os.Remove(p.f.Name())
			}
		})
	}
}

// benchHistory is a history shaped like rewind's writeSyntheticLog:
// records one-file checkpoints over paths paths, with a step every
// stepEvery-th event (a mark each, which a cut copies) unless stepEvery is 0.
func benchHistory(b *testing.B, records, paths, stepEvery int) *State {
	s := NewState()
	for i := 1; i <= records; i++ {
		if stepEvery > 0 && i%stepEvery == 0 {
			s.AddStep(record.Event{Seq: record.Seq(i), Type: record.TypeToolCall, Payload: []byte(`{"name":"Bash"}`)})
			continue
		}
		sum := sha256.Sum256([]byte(fmt.Sprint(i)))
		p := i * 7919 % paths
		f := record.FileState{Path: fmt.Sprintf("src/pkg%d/file%d.go", p%97, p), Kind: record.KindFile,
			Blob: hex.EncodeToString(sum[:]), Bytes: int64(i % 5000), Mode: 0o644, PID: 4242, Comm: "sed"}
		if err := s.AddCheckpoint(record.Seq(i), 0, false, []record.FileState{f}); err != nil {
			b.Fatal(err)
		}
	}
	return s
}

// BenchmarkSnapshotLockHold is how long the engine's workspace lock is
// held for a snapshot taken while running: "under-lock-before" is the
// whole encode (as EncodeSnapshot did under the lock), "under-lock-after"
// the cut alone (SnapshotCut, what writeSnapshotBehind holds it for), and
// "fold-wait" runs the encode of a cut beside a goroutine that folds
// checkpoints and reports the longest a fold waited (the index's read
// lock, held a block of paths at a time) in max-fold-wait-us, against
// "fold-wait-idle", the same folds with no encode.
func BenchmarkSnapshotLockHold(b *testing.B) {
	for _, c := range []struct{ records, paths int }{{100_000, 50_000}, {900_000, 900_000}} {
		b.Run(fmt.Sprintf("records=%d/paths=%d", c.records, c.paths), func(b *testing.B) {
			dir := b.TempDir()
			s := benchHistory(b, c.records, c.paths, 10)
			r := eventlog.Resume{Head: record.Seq(c.records)}
			drop := func(p *PendingSnapshot) {
				p.f.Close()
				os.Remove(p.f.Name())
			}
			b.Run("under-lock-before", func(b *testing.B) {
				for b.Loop() {
					p, err := EncodeSnapshot(dir, r, s)
					if err != nil {
						b.Fatal(err)
					}
					drop(p)
				}
			})
			b.Run("under-lock-after", func(b *testing.B) {
				for b.Loop() {
					s.Cut(r)
				}
			})
			// The folds name paths already there (a new path may grow the
			// path table, a wait of its own).
			folds := func(seq *record.Seq, worst *time.Duration) (stop func()) {
				quit, done := make(chan struct{}), make(chan struct{})
				go func() {
					defer close(done)
					for {
						select {
						case <-quit:
							return
						default:
						}
						*seq++
						p := int(*seq) * 7919 % c.paths
						f := record.FileState{Path: fmt.Sprintf("src/pkg%d/file%d.go", p%97, p), Kind: record.KindFile, Absent: true}
						start := time.Now()
						if err := s.AddCheckpoint(*seq, 0, false, []record.FileState{f}); err != nil {
							panic(err)
						}
						*worst = max(*worst, time.Since(start))
						time.Sleep(100 * time.Microsecond) // real time: folds spread over the encode
					}
				}()
				return func() { close(quit); <-done }
			}
			seq := record.Seq(c.records)
			b.Run("fold-wait-idle", func(b *testing.B) {
				var worst time.Duration
				for b.Loop() {
					stop := folds(&seq, &worst)
					time.Sleep(50 * time.Millisecond) // real time: as long as a small encode
					stop()
				}
				b.ReportMetric(float64(worst.Microseconds()), "max-fold-wait-us")
			})
			b.Run("fold-wait", func(b *testing.B) {
				var worst time.Duration
				for b.Loop() {
					cut := s.Cut(eventlog.Resume{Head: seq})
					stop := folds(&seq, &worst)
					p, err := cut.Encode(dir)
					stop()
					if err != nil {
						b.Fatal(err)
					}
					drop(p)
				}
				b.ReportMetric(float64(worst.Microseconds()), "max-fold-wait-us")
			})
		})
	}
}
