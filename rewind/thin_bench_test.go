package rewind

import (
	"context"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/zerofs/zerofs/record"
)

// BenchmarkStoreThin: 30 days of 8 steps each (a clock set back), every step
// rewriting 64 KiB of incompressible bytes in one of 4 files and a small
// file among 200; then one gc that thins everything older than the last 3
// days to one state a day. It reports the store's size before and after,
// the states of how many steps went, and the gc's time (ns/op). One run
// each (-benchtime 1x): the history is built outside the timer.
func BenchmarkStoreThin(b *testing.B) {
	ctx := context.Background()
	for range b.N {
		b.StopTimer()
		clock := time.Date(2026, 1, 1, 8, 0, 0, 0, time.UTC)
		e, ws, store := benchEngine(b, Options{Now: func() time.Time { return clock }})
		rng := rand.New(rand.NewPCG(1, 2))
		for i := range 200 {
			os.WriteFile(filepath.Join(ws, "s"+strconv.Itoa(i)), []byte("small "+strconv.Itoa(i)), 0o644)
		}
		var cut record.Seq
		for day := range 30 {
			for step := range 8 {
				clock = time.Date(2026, 1, 1+day, 8+step, 0, 0, 0, time.UTC)
				ev, err := e.BeginStep(ctx, "s", nil)
				if err != nil {
					b.Fatal(err)
				}
				if day == 27 && step == 0 {
					cut = ev.Seq
				}
				big := filepath.Join(ws, "big"+strconv.Itoa(rng.IntN(4)))
				buf := make([]byte, 64<<10)
				for j := range buf {
					buf[j] = byte(rng.Uint32())
				}
				benchChange(b, e, func() error { return os.WriteFile(big, buf, 0o644) }, Change{Path: filepath.Base(big)})
				small := "s" + strconv.Itoa(rng.IntN(200))
				benchChange(b, e, func() error {
					return os.WriteFile(filepath.Join(ws, small), []byte(strconv.Itoa(day*8+step)), 0o644)
				}, Change{Path: small})
			}
		}
		if err := e.Sync(); err != nil {
			b.Fatal(err)
		}
		before := storeBytes(b, store)
		b.StartTimer()
		res, err := e.GCWith(ctx, record.GCRequest{ThinBefore: cut})
		b.StopTimer()
		if err != nil || res.Thinned == nil {
			b.Fatalf("gc: %+v, %v", res, err)
		}
		after := storeBytes(b, store)
		b.ReportMetric(float64(before)/(1<<20), "MiB-before")
		b.ReportMetric(float64(after)/(1<<20), "MiB-after")
		b.ReportMetric(float64(res.Thinned.Steps), "steps-gone")
		b.ReportMetric(float64(res.Thinned.Records), "records-gone")
		b.StartTimer()
	}
}
