package eventlog

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/zerofs/zerofs/record"
)

// Tests that go through the fault seams (writeAt, truncate, fdatasync). They
// replace package variables, so none of them runs in parallel.

// setSeam replaces a seam for the rest of the test.
func setSeam[T any](t *testing.T, seam *T, v T) {
	t.Helper()
	old := *seam
	*seam = v
	t.Cleanup(func() { *seam = old })
}

func fileSize(t *testing.T, path string) int64 {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}

// TestFsyncFailure: an fdatasync error reaches the caller, and the Log then
// refuses every later append and sync without touching the file, so nothing
// is ever acknowledged after lines that may be lost. Reopening goes on.
func TestFsyncFailure(t *testing.T) {
	for _, syncOn := range []bool{true, false} {
		t.Run(fmt.Sprintf("sync=%v", syncOn), func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "events.jsonl")
			l, err := Open(path, Options{Sync: syncOn, Logger: quietLogger()})
			if err != nil {
				t.Fatal(err)
			}
			appendN(t, l, 2)
			if err := l.Sync(); err != nil {
				t.Fatal(err)
			}
			real := fdatasync
			var calls atomic.Int32
			setSeam(t, &fdatasync, func(f *os.File) error {
				if calls.Add(1) == 1 {
					return fmt.Errorf("fake: %w", syscall.EIO)
				}
				return real(f)
			})
			check := func(what string, err error) {
				t.Helper()
				if !errors.Is(err, ErrFailed) || !errors.Is(err, syscall.EIO) {
					t.Errorf("%s: got %v, want ErrFailed wrapping EIO", what, err)
				}
			}
			_, err = l.Append(context.Background(), "t", nil)
			if syncOn {
				check("the append whose fsync fails", err)
			} else if err != nil {
				t.Fatalf("append without sync: %v", err)
			}
			if !syncOn {
				check("Sync", l.Sync())
			}
			size := fileSize(t, path)
			_, err = l.Append(context.Background(), "t", nil)
			check("the next append", err)
			_, err = l.AppendBatch(context.Background(), []Record{{Type: "t"}})
			check("the next batch", err)
			check("Sync", l.Sync())
			if got := fileSize(t, path); got != size {
				t.Errorf("refused appends changed the file: %d bytes, want %d", got, size)
			}
			if calls.Load() != 1 {
				t.Errorf("got %d fdatasync calls, want 1 (no retry after a failure)", calls.Load())
			}
			check("Close", l.Close())

			// Close released the lock even so; a new Log goes on.
			l2 := openT(t, path, Options{Sync: syncOn})
			if h := l2.Head(); h != 3 {
				t.Errorf("reopened: got head %d, want 3 (the unacknowledged line reached the file)", h)
			}
			ev, err := l2.Append(context.Background(), "t", nil)
			if err != nil || ev.Seq != 4 {
				t.Errorf("append after reopening: got %d, %v; want 4, nil", ev.Seq, err)
			}
		})
	}
}

// TestWriteFailure: a write that fails after putting part of a line in the
// file is cut back, so the next append starts on a line boundary and the
// log stays valid; the failure itself does not fail the Log.
func TestWriteFailure(t *testing.T) {
	tests := []struct {
		name    string
		write   func(f *os.File, p []byte, off int64) (int, error)
		wantErr error
		batch   bool
	}{
		{"half a line, then ENOSPC", func(f *os.File, p []byte, off int64) (int, error) {
			n, _ := f.WriteAt(p[:len(p)/2], off)
			return n, syscall.ENOSPC
		}, syscall.ENOSPC, false},
		{"nothing written, EIO", func(f *os.File, p []byte, off int64) (int, error) {
			return 0, syscall.EIO
		}, syscall.EIO, false},
		{"short write without an error", func(f *os.File, p []byte, off int64) (int, error) {
			return f.WriteAt(p[:len(p)-1], off) // all but the newline
		}, io.ErrShortWrite, false},
		{"a batch cut after its first line", func(f *os.File, p []byte, off int64) (int, error) {
			n, _ := f.WriteAt(p[:bytes.IndexByte(p, '\n')+1], off)
			return n, syscall.ENOSPC
		}, syscall.ENOSPC, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "events.jsonl")
			l := openT(t, path, Options{Sync: true})
			appendN(t, l, 3)
			size := fileSize(t, path)
			setSeam(t, &writeAt, tt.write)
			var err error
			if tt.batch {
				_, err = l.AppendBatch(context.Background(), []Record{{Type: "a"}, {Type: "b"}})
			} else {
				_, err = l.Append(context.Background(), "a", map[string]string{"pad": "some padding"})
			}
			if !errors.Is(err, tt.wantErr) || errors.Is(err, ErrFailed) {
				t.Fatalf("got %v, want %v and not ErrFailed", err, tt.wantErr)
			}
			if got := fileSize(t, path); got != size {
				t.Errorf("got %d bytes after the failed write, want it cut back to %d", got, size)
			}
			if h := l.Head(); h != 3 {
				t.Errorf("got head %d, want 3", h)
			}
			writeAt = (*os.File).WriteAt
			ev, err := l.Append(context.Background(), "b", nil)
			if err != nil || ev.Seq != 4 {
				t.Fatalf("next append: got %d, %v; want 4, nil", ev.Seq, err)
			}
			l.Close()
			head, torn, err := Check(path)
			if head != 4 || torn != 0 || err != nil {
				t.Errorf("Check: got %d, %d, %v; want 4, 0, nil", head, torn, err)
			}
			evs := readAll(t, path, 0)
			checkSeqs(t, evs, 1, 4)
			if evs[3].Type != "b" {
				t.Errorf("got type %q at seq 4, want the next append's %q", evs[3].Type, "b")
			}
		})
	}
}

// TestWriteAndCutFailure: when the cut after a failed write fails too, the
// remnant stays in the file, so the Log refuses to write after it; the next
// Open cuts it as a torn tail.
func TestWriteAndCutFailure(t *testing.T) {
	path := filepath.Join(t.TempDir(), "events.jsonl")
	l, err := Open(path, Options{Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	appendN(t, l, 3)
	size := fileSize(t, path)
	setSeam(t, &writeAt, func(f *os.File, p []byte, off int64) (int, error) {
		n, _ := f.WriteAt(p[:len(p)/2], off)
		return n, syscall.EIO
	})
	setSeam(t, &truncate, func(*os.File, int64) error { return syscall.EROFS })
	_, err = l.Append(context.Background(), "t", nil)
	if !errors.Is(err, ErrFailed) || !errors.Is(err, syscall.EIO) || !errors.Is(err, syscall.EROFS) {
		t.Fatalf("got %v, want ErrFailed wrapping EIO and EROFS", err)
	}
	writeAt = (*os.File).WriteAt
	if _, err := l.Append(context.Background(), "t", nil); !errors.Is(err, ErrFailed) {
		t.Errorf("next append: got %v, want ErrFailed", err)
	}
	half := fileSize(t, path)
	if half <= size {
		t.Fatalf("got %d bytes, want the remnant after %d", half, size)
	}
	l.Close()
	truncate = (*os.File).Truncate
	l2 := openT(t, path, Options{})
	if h := l2.Head(); h != 3 {
		t.Errorf("got head %d, want 3", h)
	}
	if got := fileSize(t, path); got != size {
		t.Errorf("got %d bytes after Open, want %d", got, size)
	}
	if torn := tornFiles(t, path); len(torn) != 1 {
		t.Errorf("got torn files %v, want one", torn)
	}
}

// TestGroupCommitDurability fakes the disk: the fdatasync seam records how
// many bytes were in the file when a successful fdatasync began (all of them
// are then durable, the rest only written). Every Append acknowledged with
// Options.Sync, and every event covered by a Sync that returned nil, must
// end within those bytes at the moment of the acknowledgement: a power cut
// then keeps it. Some fdatasyncs fail, to check that no line is acknowledged
// after a failure either.
func TestGroupCommitDurability(t *testing.T) {
	for _, failAt := range []int32{0, 40} {
		t.Run(fmt.Sprintf("failAt=%d", failAt), func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "events.jsonl")
			l := openT(t, path, Options{Sync: true})
			var durableSize atomic.Int64
			var calls atomic.Int32
			real := fdatasync
			setSeam(t, &fdatasync, func(f *os.File) error {
				fi, err := f.Stat()
				if err != nil {
					return err
				}
				if calls.Add(1) == failAt {
					return syscall.EIO
				}
				if err := real(f); err != nil {
					return err
				}
				for {
					old := durableSize.Load()
					if fi.Size() <= old || durableSize.CompareAndSwap(old, fi.Size()) {
						return nil
					}
				}
			})
			type ack struct {
				seq     record.Seq
				durable int64 // durableSize when the ack arrived
			}
			var mu sync.Mutex
			var acks []ack
			var wg sync.WaitGroup
			for g := range 16 {
				wg.Go(func() {
					for i := range 100 {
						var s record.Seq
						if g%2 == 0 && i%10 == 0 {
							// A Sync covers everything written before it.
							s = l.Head()
							if l.Sync() != nil {
								return
							}
						} else {
							ev, err := l.Append(context.Background(), "t", map[string]int{"g": g, "i": i})
							if err != nil {
								if !errors.Is(err, ErrFailed) {
									t.Errorf("got %v, want ErrFailed", err)
								}
								return
							}
							s = ev.Seq
						}
						d := durableSize.Load()
						mu.Lock()
						acks = append(acks, ack{s, d})
						mu.Unlock()
					}
				})
			}
			wg.Wait()
			// Where each line ends in the final file.
			data, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			ends := []int64{0}
			for off := 0; ; {
				i := bytes.IndexByte(data[off:], '\n')
				if i < 0 {
					break
				}
				off += i + 1
				ends = append(ends, int64(off))
			}
			for _, a := range acks {
				if a.seq >= record.Seq(len(ends)) {
					t.Fatalf("seq %d acknowledged but not in the file", a.seq)
				}
				if end := ends[a.seq]; end > a.durable {
					t.Fatalf("seq %d acknowledged when %d bytes were durable; its line ends at %d", a.seq, a.durable, end)
				}
			}
			if len(acks) == 0 {
				t.Fatal("nothing acknowledged")
			}
			t.Logf("%d acknowledgements checked, %d fdatasyncs for %d lines", len(acks), calls.Load(), len(ends)-1)
		})
	}
}
