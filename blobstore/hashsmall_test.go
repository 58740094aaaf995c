package blobstore

import (
	"crypto/sha256"
	"math/rand"
	"os"
	"path/filepath"
	"testing"
)

// HashFile reads a small file whole in one pread (hashSmall) and a larger
// one by its extents: both give the sha256 and length of the content, holes
// included as zeros, at every size around the boundary.
func TestHashFileSizes(t *testing.T) {
	dir := t.TempDir()
	rng := rand.New(rand.NewSource(1))
	for _, size := range []int{0, 1, 4095, 4096, hashSmall - 1, hashSmall, hashSmall + 1, 3 * hashSmall} {
		for _, hole := range []bool{false, true} {
			data := make([]byte, size)
			rng.Read(data)
			p := filepath.Join(dir, "f")
			os.Remove(p)
			f, err := os.Create(p)
			if err != nil {
				t.Fatal(err)
			}
			if hole && size > 8192 {
				// A hole in the middle: written around it.
				for i := 4096; i < size-4096; i++ {
					data[i] = 0
				}
				if _, err := f.WriteAt(data[:4096], 0); err != nil {
					t.Fatal(err)
				}
				if _, err := f.WriteAt(data[size-4096:], int64(size-4096)); err != nil {
					t.Fatal(err)
				}
			} else if _, err := f.Write(data); err != nil {
				t.Fatal(err)
			}
			id, n, err := HashFile(f)
			f.Close()
			if err != nil {
				t.Fatal(err)
			}
			if want := sha256.Sum256(data); id != want || n != int64(size) {
				t.Errorf("size %d, hole %v: got %x (%d bytes), want %x", size, hole, id[:4], n, want[:4])
			}
		}
	}
}
