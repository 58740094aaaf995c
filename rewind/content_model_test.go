package rewind

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"pgregory.net/rapid"

	"github.com/zerofs/zerofs/record"
	"github.com/zerofs/zerofs/rewind/internal/index"
)

// TestContentModel is a property test of what the store keeps: files of
// random contents (empty, small, compressible text, incompressible bytes,
// and several MiB, so chunked) go through random edit patterns (overwrite
// a range, insert, delete a range, truncate, append, replace whole) over
// random steps; after that, at every step boundary, each file's recorded
// state reads back byte for byte, streamed and at random offsets (as @T/
// reads it), and a rewind to a random step boundary makes the workspace
// equal to it. 12 cases by default (each moves megabytes); more with
// -rapid.checks. The mount's @T/ reads go through the same OpenContent.
func TestContentModel(t *testing.T) {
	if f := flag.Lookup("rapid.checks"); f != nil && !flagSetByUser("rapid.checks") {
		old := f.Value.String()
		f.Value.Set("12")
		defer f.Value.Set(old)
	}
	rapid.Check(t, func(rt *rapid.T) {
		ctx := context.Background()
		renames := rapid.Bool().Draw(rt, "rename records")
		e, ws := openRapid(rt, Options{Sync: rapid.Bool().Draw(rt, "sync"), NoCompress: rapid.Bool().Draw(rt, "nocompress"), RenameRecords: renames})
		names := []string{"a", "b", "d/c"}
		// With rename records, the directory holding c is renamed between
		// d and e (one record each way) among the edits.
		all := []string{"a", "b", "d/c", "e/c"}
		os.MkdirAll(filepath.Join(ws, "d"), 0o755)
		cur := map[string][]byte{}
		states := map[record.Seq]map[string][]byte{} // step boundary → contents
		snapshot := func() map[string][]byte {
			m := map[string][]byte{}
			for k, v := range cur {
				m[k] = bytes.Clone(v)
			}
			return m
		}
		steps := rapid.IntRange(1, 6).Draw(rt, "steps")
		for range steps {
			s, err := e.BeginStep(ctx, "s", nil)
			if err != nil {
				rt.Fatal(err)
			}
			states[s.Seq] = snapshot()
			for range rapid.IntRange(1, 4).Draw(rt, "edits") {
				if renames && rapid.IntRange(0, 2).Draw(rt, "mv") == 0 {
					from, _ := index.SplitPath(names[2])
					to := map[string]string{"d": "e", "e": "d"}[from]
					release, _, err := e.Begin(ctx, Caller{})
					if err != nil {
						rt.Fatal(err)
					}
					handled, err := e.RenameDir(ctx, Caller{}, from, to, func() error {
						return os.Rename(filepath.Join(ws, from), filepath.Join(ws, to))
					})
					release()
					if !handled || err != nil {
						rt.Fatalf("RenameDir(%s, %s) = %v, %v", from, to, handled, err)
					}
					if c, ok := cur[names[2]]; ok {
						delete(cur, names[2])
						cur[to+"/c"] = c
					}
					names[2] = to + "/c"
					continue
				}
				p := rapid.SampledFrom(names).Draw(rt, "path")
				next := edit(rt, cur[p])
				release, _, err := e.Begin(ctx, Caller{}, Change{Path: p})
				if err != nil {
					rt.Fatal(err)
				}
				if err := os.WriteFile(filepath.Join(ws, p), next, 0o644); err != nil {
					rt.Fatal(err)
				}
				release()
				cur[p] = next
			}
		}
		for seq, want := range states {
			for _, p := range all {
				checkContentAt(rt, e, p, seq, want[p])
			}
		}
		// A rewind to one boundary brings every file back.
		seqs := make([]record.Seq, 0, len(states))
		for s := range states {
			seqs = append(seqs, s)
		}
		target := rapid.SampledFrom(seqs).Draw(rt, "target")
		if _, err := e.Rewind(ctx, target); err != nil {
			rt.Fatal(err)
		}
		for _, p := range all {
			got, err := os.ReadFile(filepath.Join(ws, p))
			want, existed := states[target][p]
			if !existed {
				if err == nil {
					rt.Fatalf("%s exists after a rewind to %d, want it absent", p, target)
				}
				continue
			}
			if err != nil || !bytes.Equal(got, want) {
				rt.Fatalf("%s after a rewind to %d: got %d bytes (%v), want %d", p, target, len(got), err, len(want))
			}
		}
	})
}

// flagSetByUser reports whether the flag was given on the command line.
func flagSetByUser(name string) bool {
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set && !rapidChecksDefaulted
}

// openRapid is openT for a rapid case.
func openRapid(rt *rapid.T, opts Options) (*Engine, string) {
	dir, err := os.MkdirTemp("", "content-model-")
	if err != nil {
		rt.Fatal(err)
	}
	rt.Cleanup(func() { os.RemoveAll(dir) })
	ws := filepath.Join(dir, "ws")
	os.Mkdir(ws, 0o755)
	root, err := os.Open(ws)
	if err != nil {
		rt.Fatal(err)
	}
	rt.Cleanup(func() { root.Close() })
	opts.StoreDir = filepath.Join(dir, "store")
	e, err := Open(context.Background(), root, opts)
	if err != nil {
		rt.Fatal(err)
	}
	rt.Cleanup(func() { e.Close() })
	return e, ws
}

// content draws new content: empty, small, text, noise, or large.
func content(rt *rapid.T) []byte {
	seed := rapid.Uint64().Draw(rt, "seed")
	r := rand.New(rand.NewPCG(seed, 1))
	var n int
	switch rapid.IntRange(0, 4).Draw(rt, "kind") {
	case 0:
		return nil
	case 1:
		n = r.IntN(300)
	case 2:
		n = r.IntN(200 << 10)
	default:
		n = 1<<20 + r.IntN(3<<19) // chunked
	}
	b := make([]byte, n)
	if rapid.Bool().Draw(rt, "text") {
		words := []string{"func ", "return ", "nil", " {\n", "}\n", "\t", "x := y\n"}
		var buf bytes.Buffer
		for buf.Len() < n {
			buf.WriteString(words[r.IntN(len(words))])
		}
		copy(b, buf.Bytes())
		return b
	}
	var key [32]byte
	key[0], key[1] = byte(seed), byte(seed>>8)
	rand.NewChaCha8(key).Read(b)
	return b
}

// edit applies one random edit pattern to old.
func edit(rt *rapid.T, old []byte) []byte {
	n := len(old)
	pos := func(label string) int { return rapid.IntRange(0, n).Draw(rt, label) }
	switch rapid.IntRange(0, 5).Draw(rt, "edit") {
	case 0: // overwrite a range in place
		at := pos("at")
		patch := content(rt)
		out := bytes.Clone(old)
		end := min(n, at+len(patch))
		copy(out[at:end], patch)
		return out
	case 1: // insert
		at := pos("at")
		return append(append(bytes.Clone(old[:at]), []byte(fmt.Sprintf("inserted %d\n", at))...), old[at:]...)
	case 2: // delete a range
		a, b := pos("from"), pos("to")
		if a > b {
			a, b = b, a
		}
		return append(bytes.Clone(old[:a]), old[b:]...)
	case 3: // truncate
		return bytes.Clone(old[:pos("size")])
	case 4: // append
		return append(bytes.Clone(old), content(rt)...)
	}
	return content(rt) // replace whole
}

// checkContentAt reads p at seq streamed and at random offsets.
func checkContentAt(rt *rapid.T, e *Engine, p string, seq record.Seq, want []byte) {
	ent, err := e.StateAt(p, seq)
	if err != nil {
		rt.Fatal(err)
	}
	if want == nil && !ent.Exists {
		return
	}
	if !ent.Exists {
		rt.Fatalf("%s at %d: absent, want %d bytes", p, seq, len(want))
	}
	f, err := e.OpenContent(ent)
	if err != nil {
		rt.Fatalf("%s at %d: %v", p, seq, err)
	}
	defer f.Close()
	got, err := io.ReadAll(f)
	if err != nil || !bytes.Equal(got, want) {
		rt.Fatalf("%s at %d streamed: got %d bytes (%v), want %d", p, seq, len(got), err, len(want))
	}
	r := rand.New(rand.NewPCG(uint64(seq), uint64(len(want))))
	for range 8 {
		off := r.IntN(len(want) + 1)
		buf := make([]byte, r.IntN(600<<10)+1)
		k, err := f.ReadAt(buf, int64(off))
		exp := want[off:min(len(want), off+len(buf))]
		if !bytes.Equal(buf[:k], exp) || (k < len(buf) && err != io.EOF) {
			rt.Fatalf("%s at %d: ReadAt(%d, %d) got %d bytes (%v), want %d", p, seq, len(buf), off, k, err, len(exp))
		}
	}
}
