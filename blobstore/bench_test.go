package blobstore

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"
)

// Put throughput beside a plain io.Copy of the same bytes to a file, so the
// ratios can be read off: BenchmarkPut/sync=true against
// BenchmarkCopy/fsync=true (what a blob costs over writing the bytes
// durably), sync=false against fsync=false. Each iteration stores new
// content (a counter in the first bytes), so Put never deduplicates.
//
//	go test -run '^$' -bench 'Put|Copy' ./blobstore/

var benchSizes = []int{4 << 10, 1 << 20, 64 << 20}

// benchContent returns a buffer of n pseudo-random bytes and a function
// that makes it unique for iteration i.
func benchContent(n int) ([]byte, func(i int)) {
	b := randBytes(uint64(n), n)
	return b, func(i int) {
		if n >= 8 {
			binary.LittleEndian.PutUint64(b, uint64(i))
		}
	}
}

// removeBig deletes the file at path when it is large, with the timer
// stopped, so that big runs do not fill the disk; small files stay (the
// stop itself would cost more than their write).
func removeBig(b *testing.B, size int, path string) {
	if size < 1<<20 {
		return
	}
	b.StopTimer()
	if err := os.Remove(path); err != nil {
		b.Fatal(err)
	}
	b.StartTimer()
}

func BenchmarkPut(b *testing.B) {
	for _, syncOn := range []bool{true, false} {
		for _, size := range benchSizes {
			b.Run(fmt.Sprintf("sync=%v/size=%s", syncOn, sizeName(size)), func(b *testing.B) {
				s := openT(b, Options{Sync: syncOn})
				data, vary := benchContent(size)
				b.SetBytes(int64(size))
				i := 0
				for b.Loop() {
					vary(i)
					i++
					id, _, err := s.Put(bytes.NewReader(data))
					if err != nil {
						b.Fatal(err)
					}
					if !syncOn {
						// A batch's Sync, here after each put.
						if err := s.Sync(); err != nil {
							b.Fatal(err)
						}
					}
					_ = id
				}
			})
		}
	}
}

// BenchmarkPutNoSync is Put without Options.Sync and without Sync: the cost
// of a batch-mode Put itself.
func BenchmarkPutNoSync(b *testing.B) {
	for _, size := range benchSizes {
		b.Run("size="+sizeName(size), func(b *testing.B) {
			s := openT(b, Options{})
			data, vary := benchContent(size)
			b.SetBytes(int64(size))
			i := 0
			for b.Loop() {
				vary(i)
				i++
				id, _, err := s.Put(bytes.NewReader(data))
				if err != nil {
					b.Fatal(err)
				}
				_ = id
			}
		})
	}
}

// BenchmarkCopy writes the same bytes to a new file with io.Copy, then
// fsyncs it (fsync=true) or not.
func BenchmarkCopy(b *testing.B) {
	for _, fsync := range []bool{true, false} {
		for _, size := range benchSizes {
			b.Run(fmt.Sprintf("fsync=%v/size=%s", fsync, sizeName(size)), func(b *testing.B) {
				dir := b.TempDir()
				data, vary := benchContent(size)
				b.SetBytes(int64(size))
				i := 0
				for b.Loop() {
					vary(i)
					path := filepath.Join(dir, fmt.Sprint(i))
					i++
					f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
					if err != nil {
						b.Fatal(err)
					}
					if _, err := io.Copy(f, bytes.NewReader(data)); err != nil {
						b.Fatal(err)
					}
					if fsync {
						if err := f.Sync(); err != nil {
							b.Fatal(err)
						}
					}
					if err := f.Close(); err != nil {
						b.Fatal(err)
					}
					removeBig(b, size, path)
				}
			})
		}
	}
}

func sizeName(n int) string {
	switch {
	case n >= 1<<20:
		return fmt.Sprintf("%dMiB", n>>20)
	default:
		return fmt.Sprintf("%dKiB", n>>10)
	}
}
