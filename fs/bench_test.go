package fs

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// BenchmarkSmallFiles writes, stats and reads back 100 small files per
// iteration, natively and through a mount (each write in one step, so
// every create is captured), for the ratio PERF.md talks about.
func BenchmarkSmallFiles(b *testing.B) {
	run := func(b *testing.B, dir string) {
		data := make([]byte, 1024)
		for i := 0; b.Loop(); i++ {
			d := filepath.Join(dir, fmt.Sprint(i))
			if err := os.Mkdir(d, 0o755); err != nil {
				b.Fatal(err)
			}
			for j := range 100 {
				p := filepath.Join(d, fmt.Sprint(j))
				if err := os.WriteFile(p, data, 0o644); err != nil {
					b.Fatal(err)
				}
				if _, err := os.Stat(p); err != nil {
					b.Fatal(err)
				}
				if _, err := os.ReadFile(p); err != nil {
					b.Fatal(err)
				}
			}
		}
	}
	b.Run("native", func(b *testing.B) { run(b, b.TempDir()) })
	b.Run("zerofs", func(b *testing.B) {
		requireFUSE(b)
		m, err := Mount(b.Context(), Options{Workspace: b.TempDir(), Mountpoint: b.TempDir(), Logger: testLogger(), SelfOpens: true})
		if err != nil {
			b.Fatal(err)
		}
		defer m.Unmount()
		run(b, m.Mountpoint())
	})
}

// BenchmarkSequentialRead reads a 64 MiB file in 1 MiB reads, natively and
// through a mount (no passthrough yet: every read is a FUSE request).
func BenchmarkSequentialRead(b *testing.B) {
	run := func(b *testing.B, dir string) {
		p := filepath.Join(dir, "big")
		if err := os.WriteFile(p, make([]byte, 64<<20), 0o644); err != nil {
			b.Fatal(err)
		}
		buf := make([]byte, 1<<20)
		b.SetBytes(64 << 20)
		for b.Loop() {
			f, err := os.Open(p)
			if err != nil {
				b.Fatal(err)
			}
			for {
				if _, err := f.Read(buf); err != nil {
					break
				}
			}
			f.Close()
		}
	}
	b.Run("native", func(b *testing.B) { run(b, b.TempDir()) })
	b.Run("zerofs", func(b *testing.B) {
		requireFUSE(b)
		m, err := Mount(b.Context(), Options{Workspace: b.TempDir(), Mountpoint: b.TempDir(), Logger: testLogger(), SelfOpens: true})
		if err != nil {
			b.Fatal(err)
		}
		defer m.Unmount()
		run(b, m.Mountpoint())
	})
}
