package index

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"runtime"
	"testing"

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
			s := NewState()
			for i := 1; i <= c.records; i++ {
				sum := sha256.Sum256([]byte(fmt.Sprint(i)))
				p := i * 7919 % c.paths
				f := record.FileState{Path: fmt.Sprintf("src/pkg%d/file%d.go", p%97, p), Kind: record.KindFile,
					Blob: hex.EncodeToString(sum[:]), Bytes: int64(i % 5000), Mode: 0o644, PID: 4242, Comm: "sed"}
				if err := s.AddCheckpoint(record.Seq(i), 0, false, []record.FileState{f}); err != nil {
					b.Fatal(err)
				}
			}
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
// a temporary file (not made durable): what the flusher's snapshot holds
// the workspace lock for, every snapshotEvery events.
func BenchmarkEncodeSnapshot(b *testing.B) {
	for _, c := range []struct{ records, paths int }{{100_000, 50_000}, {900_000, 900_000}} {
		b.Run(fmt.Sprintf("records=%d/paths=%d", c.records, c.paths), func(b *testing.B) {
			dir := b.TempDir()
			s := NewState()
			for i := 1; i <= c.records; i++ {
				sum := sha256.Sum256([]byte(fmt.Sprint(i)))
				p := i * 7919 % c.paths
				f := record.FileState{Path: fmt.Sprintf("src/pkg%d/file%d.go", p%97, p), Kind: record.KindFile,
					Blob: hex.EncodeToString(sum[:]), Bytes: int64(i % 5000), Mode: 0o644, PID: 4242, Comm: "sed"}
				if err := s.AddCheckpoint(record.Seq(i), 0, false, []record.FileState{f}); err != nil {
					b.Fatal(err)
				}
			}
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
