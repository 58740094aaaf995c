package eventlog

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/zerofs/zerofs/record"
)

// BenchmarkAppend measures appends per second with 1 and 8 concurrent
// appenders, with Options.Sync (each Append waits for fdatasync; concurrent
// ones share it) and without. The payload is a checkpoint of one file, about
// the size zerofs writes for each captured path.
//
//	go test -run '^$' -bench Append -benchtime 2s ./eventlog/
func BenchmarkAppend(b *testing.B) {
	payload := map[string]any{
		"tool": "edit",
		"files": []map[string]any{{
			"path": "src/internal/some/package/file.go", "kind": "file",
			"blob":  "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
			"bytes": 4242, "mode": 420, "pid": 4242, "comm": "sed",
		}},
	}
	for _, syncOn := range []bool{true, false} {
		for _, appenders := range []int{1, 8} {
			b.Run(fmt.Sprintf("sync=%v/appenders=%d", syncOn, appenders), func(b *testing.B) {
				path := filepath.Join(b.TempDir(), "events.jsonl")
				l, err := Open(path, Options{Sync: syncOn, Logger: quietLogger()})
				if err != nil {
					b.Fatal(err)
				}
				defer l.Close()
				// Count fdatasyncs, to show how many appends share one.
				var syncs atomic.Int64
				real := fdatasync
				fdatasync = func(f *os.File) error { syncs.Add(1); return real(f) }
				defer func() { fdatasync = real }()
				ctx := context.Background()
				// Hand out b.N appends to the appenders.
				work := make(chan struct{}, 1024)
				var wg sync.WaitGroup
				var fail sync.Once
				b.ResetTimer()
				for range appenders {
					wg.Go(func() {
						for range work {
							if _, err := l.Append(ctx, record.TypeCheckpoint, payload); err != nil {
								fail.Do(func() { b.Error(err) })
							}
						}
					})
				}
				for range b.N {
					work <- struct{}{}
				}
				close(work)
				wg.Wait()
				b.StopTimer()
				b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "appends/s")
				if n := syncs.Load(); n > 0 {
					b.ReportMetric(float64(b.N)/float64(n), "appends/fsync")
				}
			})
		}
	}
}

// BenchmarkEvents measures reading the log back from the top.
func BenchmarkEvents(b *testing.B) {
	path := filepath.Join(b.TempDir(), "events.jsonl")
	l, err := Open(path, Options{Logger: quietLogger()})
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	const n = 10000
	appendN(b, l, n)
	b.ResetTimer()
	for b.Loop() {
		count := 0
		for _, err := range l.Events(1) {
			if err != nil {
				b.Fatal(err)
			}
			count++
		}
		if count != n {
			b.Fatalf("got %d events, want %d", count, n)
		}
	}
	b.ReportMetric(float64(n*b.N)/b.Elapsed().Seconds(), "events/s")
}
