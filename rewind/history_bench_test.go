package rewind

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/zerofs/zerofs/record"
)

// writeSyntheticLog writes a store whose log holds n events shaped like an
// agent's history: a tool_call every tenth event, and one-file checkpoints
// over a pool of paths between them. It writes the lines directly (no
// fsync per line), so a million events take seconds, not hours.
func writeSyntheticLog(tb testing.TB, store string, n, paths int) {
	tb.Helper()
	if err := os.MkdirAll(store, 0o700); err != nil {
		tb.Fatal(err)
	}
	f, err := os.Create(filepath.Join(store, "events.jsonl"))
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	w := bufio.NewWriterSize(f, 1<<20)
	t0 := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	label := "Edit"
	for i := 1; i <= n; i++ {
		ev := record.Event{ID: fmt.Sprintf("00000000-0000-4000-8000-%012d", i), SessionID: "11111111-2222-4333-8444-555555555555",
			Seq: record.Seq(i), CreatedAt: t0.Add(time.Duration(i) * time.Millisecond)}
		var payload any
		if i%10 == 1 {
			ev.Type = record.TypeToolCall
			label = fmt.Sprintf("Edit %d", i)
			payload = map[string]any{"name": label}
		} else {
			ev.Type = record.TypeCheckpoint
			sum := sha256.Sum256([]byte(fmt.Sprint(i)))
			p := i * 7919 % paths
			payload = record.Checkpoint{Tool: label, Files: []record.FileState{{
				Path: fmt.Sprintf("src/pkg%d/file%d.go", p%97, p), Kind: record.KindFile,
				Blob: hex.EncodeToString(sum[:]), Bytes: int64(i % 5000), Mode: 0o644, PID: 4242, Comm: "sed",
			}}}
		}
		raw, err := json.Marshal(payload)
		if err != nil {
			tb.Fatal(err)
		}
		ev.Payload = raw
		line, err := json.Marshal(ev)
		if err != nil {
			tb.Fatal(err)
		}
		w.Write(line)
		w.WriteByte('\n')
	}
	if err := w.Flush(); err != nil {
		tb.Fatal(err)
	}
}

// BenchmarkOpenHistory opens (mounts) a workspace whose history holds n
// events: the cost a mount pays before it serves a request, and the heap the
// engine keeps for that history.
func BenchmarkOpenHistory(b *testing.B) {
	for _, n := range []int{1_000, 1_000_000} {
		b.Run(fmt.Sprintf("events=%d", n), func(b *testing.B) {
			ws, store := b.TempDir(), b.TempDir()
			writeSyntheticLog(b, store, n, 10_000)
			root, err := os.Open(ws)
			if err != nil {
				b.Fatal(err)
			}
			defer root.Close()
			// One open before timing: it may write the index snapshot.
			e, err := Open(context.Background(), root, Options{StoreDir: store})
			if err != nil {
				b.Fatal(err)
			}
			e.Close()
			var heap uint64
			for b.Loop() {
				e, err := Open(context.Background(), root, Options{StoreDir: store})
				if err != nil {
					b.Fatal(err)
				}
				runtime.GC()
				var ms runtime.MemStats
				runtime.ReadMemStats(&ms)
				heap = ms.HeapInuse
				runtime.KeepAlive(e)
				if err := e.Close(); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(heap)/(1<<20), "MiB-heap")
		})
	}
}

// TestWriteSyntheticStore writes a synthetic history for scripts/bench.sh
// when ZEROFS_SYNTHETIC_STORE names a directory (and skips otherwise):
// ZEROFS_SYNTHETIC_EVENTS events (default 1,000,000) over
// ZEROFS_SYNTHETIC_PATHS paths (default 10,000).
func TestWriteSyntheticStore(t *testing.T) {
	dir := os.Getenv("ZEROFS_SYNTHETIC_STORE")
	if dir == "" {
		t.Skip("only for scripts/bench.sh: set ZEROFS_SYNTHETIC_STORE")
	}
	n := 1_000_000
	if s := os.Getenv("ZEROFS_SYNTHETIC_EVENTS"); s != "" {
		var err error
		if n, err = strconv.Atoi(s); err != nil {
			t.Fatal(err)
		}
	}
	paths := 10_000
	if s := os.Getenv("ZEROFS_SYNTHETIC_PATHS"); s != "" {
		var err error
		if paths, err = strconv.Atoi(s); err != nil || paths < 1 {
			t.Fatalf("ZEROFS_SYNTHETIC_PATHS=%q: want a positive number", s)
		}
	}
	writeSyntheticLog(t, dir, n, paths)
	// The first open reads the whole log and writes the index snapshot.
	ws := t.TempDir()
	root, err := os.Open(ws)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	start := time.Now()
	e, err := Open(context.Background(), root, Options{StoreDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	opened := time.Since(start)
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	fmt.Printf("first open without a snapshot: %d ms (reads and checks the whole log, then writes the snapshot)\n", opened.Milliseconds())
}
