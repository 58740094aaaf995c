package rewind

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

// The store's benchmarks (issue 10), one run each (-benchtime 1x): store
// growth against what changed, capture time of a large file, and a step
// of 100 small captures. scripts/bench-store.sh runs them. Sizes shrink
// with ZEROFS_BENCH_BIG (bytes of the large file, default 1 GiB) and
// ZEROFS_BENCH_STEPS (its steps, default 100).

// benchEngine opens an engine on a new workspace and store.
func benchEngine(b *testing.B, opts Options) (*Engine, string, string) {
	b.Helper()
	dir := b.TempDir()
	ws, store := filepath.Join(dir, "ws"), filepath.Join(dir, "store")
	if err := os.Mkdir(ws, 0o755); err != nil {
		b.Fatal(err)
	}
	root, err := os.Open(ws)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { root.Close() })
	opts.StoreDir = store
	e, err := Open(context.Background(), root, opts)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { e.Close() })
	return e, ws, store
}

// benchChange captures changes and runs fn, as the FUSE layer does.
func benchChange(b *testing.B, e *Engine, fn func() error, changes ...Change) {
	b.Helper()
	release, _, err := e.Begin(context.Background(), Caller{}, changes...)
	if err != nil {
		b.Fatal(err)
	}
	defer release()
	if err := fn(); err != nil {
		b.Fatal(err)
	}
}

// storeBytes is the store's size on disk: log and blobs.
func storeBytes(b *testing.B, store string) int64 {
	b.Helper()
	var n int64
	filepath.Walk(store, func(_ string, fi os.FileInfo, err error) error {
		if err == nil && fi.Mode().IsRegular() {
			n += fi.Size()
		}
		return nil
	})
	return n
}

func bigSize() int64 {
	if s, err := strconv.ParseInt(os.Getenv("ZEROFS_BENCH_BIG"), 10, 64); err == nil && s > 0 {
		return s
	}
	return 1 << 30
}

// writeRandomFile writes n pseudo-random (incompressible) bytes to path.
func writeRandomFile(b *testing.B, path string, n int64) {
	b.Helper()
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	if _, err := io.CopyN(f, rand.NewChaCha8([32]byte{7}), n); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkStoreBigFileSteps: 100 steps, each rewriting one 4 KiB block of
// a large file. Reports the store's growth as a percentage of 100 full
// copies (goal: under 1%), and the capture time of a step touching the
// file, the first (everything new) and the later ones (chunks known), beside
// a plain read of the file.
func BenchmarkStoreBigFileSteps(b *testing.B) {
	size := bigSize()
	steps := 100
	if n, err := strconv.Atoi(os.Getenv("ZEROFS_BENCH_STEPS")); err == nil && n > 1 {
		steps = n
	}
	for b.Loop() {
		e, ws, store := benchEngine(b, Options{})
		big := filepath.Join(ws, "big")
		writeRandomFile(b, big, size)
		readStart := time.Now()
		f, _ := os.Open(big)
		io.Copy(io.Discard, f)
		f.Close()
		readTime := time.Since(readStart)
		base := storeBytes(b, store)
		rnd := rand.New(rand.NewPCG(1, 1))
		var first, later time.Duration
		for i := range steps {
			if _, err := e.BeginStep(context.Background(), "edit", nil); err != nil {
				b.Fatal(err)
			}
			off := rnd.Int64N(size/4096) * 4096
			start := time.Now()
			benchChange(b, e, func() error {
				f, err := os.OpenFile(big, os.O_WRONLY, 0)
				if err != nil {
					return err
				}
				defer f.Close()
				block := make([]byte, 4096)
				rand.NewChaCha8([32]byte{byte(i), 1}).Read(block)
				_, err = f.WriteAt(block, off)
				return err
			}, Change{Path: "big"})
			if err := e.Sync(); err != nil {
				b.Fatal(err)
			}
			if i == 0 {
				first = time.Since(start)
			} else {
				later += time.Since(start)
			}
		}
		grew := storeBytes(b, store) - base
		b.ReportMetric(float64(grew)/float64(int64(steps)*size)*100, "%-of-full-copies")
		b.ReportMetric(float64(grew)/(1<<20), "MiB-grown")
		b.ReportMetric(float64(first.Milliseconds()), "ms-first-capture")
		b.ReportMetric(float64((later / time.Duration(steps-1)).Milliseconds()), "ms-later-capture")
		b.ReportMetric(float64(readTime.Milliseconds()), "ms-plain-read")
		b.Logf("file %d MiB, %d steps: store grew %d MiB (%.3f%% of %d full copies); capture %v first, %v later on average; reading the file %v",
			size>>20, steps, grew>>20, float64(grew)/float64(int64(steps)*size)*100, steps, first.Round(time.Millisecond), (later / time.Duration(steps-1)).Round(time.Millisecond), readTime.Round(time.Millisecond))
	}
}

// sourceFile is a pseudo-random Go-like source file of about n bytes.
func sourceFile(r *rand.Rand, n int) []byte {
	words := []string{"func ", "return ", "err", " != nil", " {\n", "}\n", "\t", "if ", " := ", "s.mu.Lock()\n", "for ", "range ", "fmt.Errorf(", "\"rewind: %w\"", ", ", "ctx", "(", ")", "\n", "// a comment about it\n", "x", "y", "name", "path"}
	var buf bytes.Buffer
	for buf.Len() < n {
		buf.WriteString(words[r.IntN(len(words))])
	}
	return buf.Bytes()
}

// BenchmarkStoreSourceTree: a tree of 10k source files edited over 200
// steps (1 to 10 files a step, a line changed in each). Reports the
// store's growth against the bytes of the before-states that changed (what
// a store of whole before-states must keep at least once), uncompressed
// (goal: within 1.2x) and compressed (goal: below 1x).
func BenchmarkStoreSourceTree(b *testing.B) {
	const files, steps = 10_000, 200
	for _, compress := range []bool{false, true} {
		b.Run(fmt.Sprintf("compress=%v", compress), func(b *testing.B) {
			for b.Loop() {
				e, ws, store := benchEngine(b, Options{NoCompress: !compress})
				r := rand.New(rand.NewPCG(3, 3))
				names := make([]string, files)
				for i := range names {
					dir := filepath.Join(ws, fmt.Sprintf("pkg%02d/sub%d", i%100, i%7))
					os.MkdirAll(dir, 0o755)
					names[i] = filepath.Join(fmt.Sprintf("pkg%02d/sub%d", i%100, i%7), fmt.Sprintf("f%d.go", i))
					if err := os.WriteFile(filepath.Join(ws, names[i]), sourceFile(r, 500+r.IntN(8000)), 0o644); err != nil {
						b.Fatal(err)
					}
				}
				base := storeBytes(b, store)
				var changed int64
				for range steps {
					if _, err := e.BeginStep(context.Background(), "edit", nil); err != nil {
						b.Fatal(err)
					}
					seen := map[string]bool{}
					for range 1 + r.IntN(10) {
						p := names[r.IntN(files)]
						abs := filepath.Join(ws, p)
						old, err := os.ReadFile(abs)
						if err != nil {
							b.Fatal(err)
						}
						if !seen[p] {
							changed += int64(len(old))
							seen[p] = true
						}
						at := r.IntN(len(old))
						edited := append(append(append([]byte{}, old[:at]...), []byte("\tx := y // edited\n")...), old[at:]...)
						benchChange(b, e, func() error { return os.WriteFile(abs, edited, 0o644) }, Change{Path: p})
					}
				}
				if err := e.Sync(); err != nil {
					b.Fatal(err)
				}
				grew := storeBytes(b, store) - base
				b.ReportMetric(float64(grew)/float64(changed), "x-of-changed")
				b.ReportMetric(float64(changed)/(1<<20), "MiB-changed")
				b.ReportMetric(float64(grew)/(1<<20), "MiB-grown")
				b.Logf("compress=%v: %d steps changed before-states of %d KiB; the store grew %d KiB (%.2fx), log included",
					compress, steps, changed>>10, grew>>10, float64(grew)/float64(changed))
			}
		})
	}
}

// BenchmarkStoreSmallCaptures: one step that captures 100 small files
// (each about 2 KiB), with its flush, beside writing and fsyncing the same
// 100 files one by one natively (what one file and fsyncs per blob cost).
func BenchmarkStoreSmallCaptures(b *testing.B) {
	for _, sync := range []bool{false, true} {
		b.Run(fmt.Sprintf("sync=%v", sync), func(b *testing.B) {
			e, ws, _ := benchEngine(b, Options{Sync: sync})
			r := rand.New(rand.NewPCG(5, 5))
			for i := range 100 {
				os.WriteFile(filepath.Join(ws, fmt.Sprint("f", i)), sourceFile(r, 2000), 0o644)
			}
			var native time.Duration
			gen := 0
			for b.Loop() {
				gen++
				if _, err := e.BeginStep(context.Background(), "s", nil); err != nil {
					b.Fatal(err)
				}
				for i := range 100 {
					p := fmt.Sprint("f", i)
					data := fmt.Appendf(sourceFile(r, 2000), "%d", gen)
					benchChange(b, e, func() error { return os.WriteFile(filepath.Join(ws, p), data, 0o644) }, Change{Path: p})
				}
				if err := e.Sync(); err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				dir := b.TempDir()
				start := time.Now()
				for i := range 100 {
					f, _ := os.Create(filepath.Join(dir, fmt.Sprint("f", i)))
					f.Write(sourceFile(r, 2000))
					f.Sync()
					f.Close()
					d, _ := os.Open(dir)
					d.Sync()
					d.Close()
				}
				native += time.Since(start)
				b.StartTimer()
			}
			b.ReportMetric(float64(native.Microseconds())/float64(b.N)/1000, "ms-native-file+2fsyncs-each")
		})
	}
}
