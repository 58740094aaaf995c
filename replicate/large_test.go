package replicate

import (
	"context"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"testing"
	"time"

	"github.com/zerofs/zerofs/rewind"
)

// TestLargeBlobStreams: content larger than streamAbove goes up from a
// temporary file, never whole in memory (what the upload allocates stays
// well below the content's size), with and without a key, and restores
// byte for byte: a file read live by a base, and its before-state from the
// store after it changed.
func TestLargeBlobStreams(t *testing.T) {
	startS3(t)
	defer func(n int64) { streamAbove = n }(streamAbove)
	streamAbove = 1 << 20
	const size = 24 << 20
	for _, keyed := range []bool{false, true} {
		name := "plain"
		var key []byte
		if keyed {
			name, key = "keyed", make([]byte, 32)
		}
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			w := openWorkspace(t, dir)
			defer w.close()
			u := URL{Bucket: "replicas", Prefix: "large-" + name}
			r := replicator(t, w, u, Options{BaseEvery: time.Nanosecond, Key: key})
			big := filepath.Join(dir, "big.bin")
			rng := rand.New(rand.NewPCG(1, 2))
			data := make([]byte, size)
			for i := range data {
				data[i] = byte(rng.Uint32()) // incompressible
			}
			write := func() {
				release, _, err := w.eng.Begin(context.Background(), rewind.Caller{PID: 1}, rewind.Change{Path: "big.bin"})
				if err != nil {
					t.Fatal(err)
				}
				err = os.WriteFile(big, data, 0o644)
				release()
				if err != nil {
					t.Fatal(err)
				}
			}
			write()
			first, err := w.eng.BeginStep(context.Background(), "big", nil)
			if err != nil {
				t.Fatal(err)
			}
			// The heap's peak while it goes up, with the collector made
			// eager so that the heap is what is held, not garbage.
			defer debug.SetGCPercent(debug.SetGCPercent(5))
			runtime.GC()
			sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
			metrics.Read(sample)
			base := sample[0].Value.Uint64()
			peak := base
			stop := make(chan struct{})
			done := make(chan struct{})
			go func() {
				defer close(done)
				for {
					select {
					case <-stop:
						return
					case <-time.After(time.Millisecond):
					}
					metrics.Read(sample)
					peak = max(peak, sample[0].Value.Uint64())
				}
			}()
			err = r.Once(context.Background()) // the base reads big.bin live
			close(stop)
			<-done
			if err != nil {
				t.Fatal(err)
			}
			if grew := int64(peak) - int64(base); grew > size/2 {
				t.Errorf("uploading a %d-byte file grew the heap by %d bytes: it was held in memory", size, grew)
			} else {
				t.Logf("uploading a %d-byte file grew the heap by at most %d bytes", size, grew)
			}
			data[0], data[size-1] = 'x', 'y'
			write() // its before-state, a blob in the store
			if _, err := w.eng.BeginStep(context.Background(), "changed", nil); err != nil {
				t.Fatal(err)
			}
			if err := r.Once(context.Background()); err != nil {
				t.Fatal(err)
			}
			if n := r.State().Streamed; n < 2 {
				t.Errorf("%d objects streamed, want both versions of big.bin", n)
			}
			for _, at := range []rewind.Seq{first.Seq, r.State().Base} {
				b, _ := OpenS3(context.Background(), u)
				dst := filepath.Join(t.TempDir(), "r")
				if _, err := Restore(context.Background(), b, u, dst, RestoreOptions{At: at, HasAt: true, Key: key, Logger: quiet}); err != nil {
					t.Fatal(err)
				}
				sameTree(t, "restore --at "+itoa(at), treeOf(t, dst), stateAt(t, w.eng, at))
			}
		})
	}
}
