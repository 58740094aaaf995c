package rewind

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/zerofs/zerofs/record"
	"github.com/zerofs/zerofs/rewind/internal/index"
)

// BenchmarkStateAt measures the lookup of one path's state at a sequence
// with 1k and 1M checkpoint records in history: it should grow like log n.
func BenchmarkStateAt(b *testing.B) {
	for _, n := range []int{1_000, 1_000_000} {
		ix := index.NewIndex()
		const paths = 1000
		blob := strings.Repeat("ab", 32)
		for i := range n {
			if err := ix.Add(record.Seq(i+1), []record.FileState{{Path: fmt.Sprintf("dir%d/file%d", i%paths%10, i%paths), Kind: record.KindFile, Blob: blob}}); err != nil {
				b.Fatal(err)
			}
		}
		b.Run(fmt.Sprintf("events=%d", n), func(b *testing.B) {
			i := 0
			for b.Loop() {
				p := fmt.Sprintf("dir%d/file%d", i%paths%10, i%paths)
				if _, ok := ix.At(p, record.Seq(i%n), ^record.Seq(0)); !ok && i%n < n-paths {
					b.Fatal("missing record")
				}
				i += 7919
			}
		})
	}
}

// BenchmarkCapture is one small file's capture: sha256, blob, one log line.
func BenchmarkCapture(b *testing.B) {
	for _, sync := range []bool{false, true} {
		b.Run(fmt.Sprintf("sync=%v", sync), func(b *testing.B) {
			ws, store := b.TempDir(), b.TempDir()
			root, _ := os.Open(ws)
			defer root.Close()
			e, err := Open(context.Background(), root, Options{StoreDir: store, Sync: sync})
			if err != nil {
				b.Fatal(err)
			}
			defer e.Close()
			os.WriteFile(filepath.Join(ws, "f"), []byte("a small file\n"), 0o644)
			for b.Loop() {
				if _, err := e.BeginStep(context.Background(), "s", nil); err != nil {
					b.Fatal(err)
				}
				release, _, err := e.Begin(context.Background(), Caller{}, Change{Path: "f"})
				if err != nil {
					b.Fatal(err)
				}
				release()
			}
		})
	}
}

// BenchmarkRewind10 rewinds a 10-file change and back.
func BenchmarkRewind10(b *testing.B) {
	ctx := context.Background()
	ws, store := b.TempDir(), b.TempDir()
	root, _ := os.Open(ws)
	defer root.Close()
	e, err := Open(ctx, root, Options{StoreDir: store})
	if err != nil {
		b.Fatal(err)
	}
	defer e.Close()
	for i := range 10 {
		os.WriteFile(filepath.Join(ws, fmt.Sprint(i)), []byte("before"), 0o644)
	}
	s, _ := e.BeginStep(ctx, "edit", nil)
	for i := range 10 {
		release, _, _ := e.Begin(ctx, Caller{}, Change{Path: fmt.Sprint(i)})
		os.WriteFile(filepath.Join(ws, fmt.Sprint(i)), []byte("after"), 0o644)
		release()
	}
	for b.Loop() {
		if _, err := e.Rewind(ctx, s.Seq); err != nil {
			b.Fatal(err)
		}
		last, _, _ := e.LastRewind()
		if _, err := e.Rewind(ctx, last.CheckpointSequence-1); err != nil {
			b.Fatal(err)
		}
	}
}
