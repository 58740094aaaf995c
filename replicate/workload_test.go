package replicate

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/zerofs/zerofs/record"
	"github.com/zerofs/zerofs/rewind"
)

// quiet drops the engine's warnings (a random history overwrites
// changes made between steps all the time).
var quiet = slog.New(slog.DiscardHandler)

// workspace is an engine over a temporary workspace, changed the way the
// mount changes it: Begin (the capture) before each change.
type workspace struct {
	dir   string
	store string
	root  *os.File
	eng   *rewind.Engine
}

func openWorkspace(t testing.TB, dir string) *workspace {
	t.Helper()
	root, err := os.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	store := filepath.Join(dir, record.StoreName)
	eng, err := rewind.Open(context.Background(), root, rewind.Options{StoreDir: store, Logger: quiet})
	if err != nil {
		root.Close()
		t.Fatal(err)
	}
	return &workspace{dir: dir, store: store, root: root, eng: eng}
}

func (w *workspace) close() {
	w.eng.Close()
	w.root.Close()
}

var names = []string{"a.txt", "b.go", "d", "d/c.txt", "d/e", "d/e/f.bin", "link", "d/l2", "x y", "run.sh"}

// change makes one random change (or a step, or a rewind).
func (w *workspace) change(t testing.TB, rng *rand.Rand) {
	t.Helper()
	ctx := context.Background()
	p := names[rng.IntN(len(names))]
	abs := filepath.Join(w.dir, p)
	do := func(fn func() error, changes ...rewind.Change) {
		release, _, err := w.eng.Begin(ctx, rewind.Caller{PID: 1, Comm: "test"}, changes...)
		if err != nil {
			t.Fatal(err)
		}
		fn() // it may fail (a missing parent): the capture stays, harmlessly
		release()
	}
	// The mount resolves every name itself, so a change through a
	// symlink is captured under the path it reaches; these plain calls
	// follow symlinks, so a path through one (or, for a write or a
	// chmod, to one) is left alone.
	k := rng.IntN(20)
	if throughSymlink(w.dir, p, k >= 3 && k < 10 || k >= 14 && k < 16) {
		return
	}
	switch {
	case k < 2:
		if _, err := w.eng.BeginStep(ctx, fmt.Sprintf("step %d", rng.IntN(1000)), nil); err != nil {
			t.Fatal(err)
		}
	case k < 3:
		if head := w.eng.Head(); head > 2 {
			target := record.Seq(rng.IntN(int(head)))
			if w.eng.HasState(target) {
				if _, err := w.eng.Rewind(ctx, target); err != nil {
					t.Fatal(err)
				}
			}
		}
	case k < 10:
		data := make([]byte, rng.IntN(3000))
		for i := range data {
			data[i] = byte('a' + rng.IntN(26))
		}
		do(func() error { return os.WriteFile(abs, data, 0o644) }, rewind.Change{Path: p})
	case k < 12:
		do(func() error { return os.Mkdir(abs, 0o755) }, rewind.Change{Path: p})
	case k < 14:
		do(func() error { return os.Symlink(names[rng.IntN(len(names))], abs) }, rewind.Change{Path: p})
	case k < 16:
		do(func() error { return os.Chmod(abs, os.FileMode(0o600|rng.IntN(0o200))) }, rewind.Change{Path: p})
	case k < 18:
		fi, err := os.Lstat(abs)
		if err == nil && fi.IsDir() {
			do(func() error { return os.RemoveAll(abs) }, rewind.Change{Path: p, Tree: true, Removed: true})
		} else {
			// As the mount unlinks: the file is stashed, and named later
			// (a stash_named event).
			do(func() error { return os.Remove(abs) }, rewind.Change{Path: p, Removed: true, Stash: true})
		}
	default:
		q := names[rng.IntN(len(names))]
		if q == p || strings.HasPrefix(q, p+"/") || strings.HasPrefix(p, q+"/") {
			return
		}
		fi, err := os.Lstat(abs)
		if err != nil || fi.IsDir() || throughSymlink(w.dir, q, false) {
			return
		}
		do(func() error { return os.Rename(abs, filepath.Join(w.dir, q)) },
			rewind.Change{Path: p}, rewind.Change{Path: q, Removed: true})
	}
}

// throughSymlink reports whether a parent of p (or p itself, if last) is
// a symlink.
func throughSymlink(dir, p string, last bool) bool {
	parts := strings.Split(p, "/")
	n := len(parts) - 1
	if last {
		n++
	}
	for i := 1; i <= n; i++ {
		fi, err := os.Lstat(filepath.Join(dir, filepath.Join(parts[:i]...)))
		if err == nil && fi.Mode()&os.ModeSymlink != 0 {
			return true
		}
	}
	return false
}

// stateAt describes the workspace at t as the engine (so @t) shows it:
// path -> kind, mode, content hash or target.
func stateAt(t testing.TB, eng *rewind.Engine, at record.Seq) map[string]string {
	t.Helper()
	out := map[string]string{}
	var walk func(dir string)
	walk = func(dir string) {
		ents, err := eng.ReadDirAt(dir, at)
		if err != nil {
			t.Fatalf("state at %d: %v", at, err)
		}
		for _, de := range ents {
			p := filepath.Join(dir, de.Name)
			st := de.Entry.State
			switch st.Kind {
			case record.KindDir:
				out[p] = fmt.Sprintf("dir %#o", st.Mode&0o7777)
				walk(p)
			case record.KindSymlink:
				target, err := eng.ReadLink(de.Entry)
				if err != nil {
					t.Fatal(err)
				}
				out[p] = "symlink -> " + target
			case record.KindFile:
				f, err := eng.OpenContent(de.Entry)
				if err != nil {
					t.Fatal(err)
				}
				h := sha256.New()
				io.Copy(h, f)
				f.Close()
				out[p] = fmt.Sprintf("file %#o %s", st.Mode&0o7777, hex.EncodeToString(h.Sum(nil))[:16])
			}
		}
	}
	walk("")
	return out
}

// treeOf describes a directory on disk the same way (its store left out).
func treeOf(t testing.TB, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.Walk(dir, func(abs string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		p, _ := filepath.Rel(dir, abs)
		if p == "." {
			return nil
		}
		if p == record.StoreName {
			return filepath.SkipDir
		}
		mode := uint32(fi.Mode().Perm())
		switch {
		case fi.IsDir():
			out[p] = fmt.Sprintf("dir %#o", mode)
		case fi.Mode()&os.ModeSymlink != 0:
			target, err := os.Readlink(abs)
			if err != nil {
				return err
			}
			out[p] = "symlink -> " + target
		default:
			data, err := os.ReadFile(abs)
			if err != nil {
				return err
			}
			s := sha256.Sum256(data)
			out[p] = fmt.Sprintf("file %#o %s", mode, hex.EncodeToString(s[:])[:16])
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// sameTree fails t where got and want differ.
func sameTree(t testing.TB, what string, got, want map[string]string) {
	t.Helper()
	var diffs []string
	for p, w := range want {
		if got[p] != w {
			diffs = append(diffs, fmt.Sprintf("%s: got %q, want %q", p, got[p], w))
		}
	}
	for p, g := range got {
		if _, ok := want[p]; !ok {
			diffs = append(diffs, fmt.Sprintf("%s: got %q, want nothing", p, g))
		}
	}
	sort.Strings(diffs)
	if len(diffs) > 0 {
		t.Errorf("%s differs:\n%s", what, strings.Join(diffs, "\n"))
	}
}
