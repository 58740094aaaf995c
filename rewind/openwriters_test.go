package rewind

import (
	"context"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/zerofs/zerofs/record"
)

// Files held open for writing whose writes bypass Begin (FUSE passthrough)
// are captured at every step boundary: a step, an auto step, a rewind's end.
// Each case writes the file without Begin after the boundary and checks that
// @boundary still shows the content it had then.
func TestOpenWritersCapturedAtBoundaries(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name     string
		boundary func(t *testing.T, e *Engine, ws string) record.Seq
	}{
		{"step", func(t *testing.T, e *Engine, ws string) record.Seq {
			ev, err := e.BeginStep(ctx, "s", nil)
			if err != nil {
				t.Fatal(err)
			}
			return ev.Seq
		}},
		{"rewind", func(t *testing.T, e *Engine, ws string) record.Seq {
			// A rewind that changes something (one that changes nothing
			// records nothing and ends no step).
			before := e.Head()
			change(t, e, func() error { return os.WriteFile(filepath.Join(ws, "g"), nil, 0o644) }, Change{Path: "g"})
			res, err := e.Rewind(ctx, before)
			if err != nil {
				t.Fatal(err)
			}
			return res.Seq
		}},
		{"auto", func(t *testing.T, e *Engine, ws string) record.Seq {
			before := e.Head()
			// Poll: the auto step begins at the first change after the idle time.
			for deadline := time.Now().Add(30 * time.Second); e.Step().Seq <= before; {
				if time.Now().After(deadline) {
					t.Fatal("no auto step")
				}
				time.Sleep(100 * time.Millisecond) // longer than the idle time
				change(t, e, func() error { return nil })
			}
			return e.Step().Seq
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var open atomic.Bool
			opts := Options{OpenWriters: func() []string {
				if open.Load() {
					return []string{"f"}
				}
				return nil
			}}
			if tc.name == "auto" {
				opts.AutoStep = 50 * time.Millisecond
			}
			e, ws := openT(t, opts)
			f := filepath.Join(ws, "f")
			change(t, e, func() error { return os.WriteFile(f, []byte("a"), 0o644) }, Change{Path: "f"})
			open.Store(true)
			at := tc.boundary(t, e, ws)
			// A passthrough write: no Begin.
			if err := os.WriteFile(f, []byte("ab"), 0o644); err != nil {
				t.Fatal(err)
			}
			if got, ok := readAt(t, e, "f", at); !ok || got != "a" {
				t.Fatalf("f at the boundary %d = %q %v, want a", at, got, ok)
			}
		})
	}
}
