package e2e

import (
	"fmt"
	iofs "io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/zerofs/zerofs/internal/testsupport"
)

// The tree snapshots of these tests are testsupport's (Snapshot, DiffTrees,
// SameTree), under the names the tests use.
type (
	entry = testsupport.Entry
	tree  = testsupport.Tree
)

func snapshot(t *testing.T, root string) tree { t.Helper(); return testsupport.Snapshot(t, root) }

func diffTrees(want, got tree) []string { return testsupport.DiffTrees(want, got) }

func sameTree(t *testing.T, what string, want, got tree) {
	t.Helper()
	testsupport.SameTree(t, what, want, got)
}

// materialize writes tr under root (which must exist), with its modes; a
// copy of a snapshot that `diff -r` can compare a view with.
func materialize(t *testing.T, root string, tr tree) {
	t.Helper()
	paths := make([]string, 0, len(tr))
	for p := range tr {
		paths = append(paths, p)
	}
	sort.Strings(paths) // parents before children
	for _, p := range paths {
		e, full := tr[p], filepath.Join(root, p)
		var err error
		switch e.Kind {
		case "dir":
			err = os.Mkdir(full, 0o755)
		case "file":
			err = os.WriteFile(full, []byte(e.Content), 0o644)
		case "symlink":
			err = os.Symlink(e.Content, full)
		default:
			t.Fatalf("materialize %s: cannot make a %s", p, e.Kind)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	// Modes last and deepest first, so a read-only directory is filled
	// before it becomes read-only.
	for i := len(paths) - 1; i >= 0; i-- {
		if e := tr[paths[i]]; e.Kind != "symlink" {
			if err := os.Chmod(filepath.Join(root, paths[i]), e.Mode); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// genTree makes a deterministic source-like tree of about n files in
// nested directories: several sizes (empty to 64 KiB), executable and
// read-only files, relative symlinks (one dangling), and empty
// directories.
func genTree(seed uint64, n int) tree {
	r := rand.New(rand.NewPCG(seed, 1))
	tr := tree{}
	dirs := []string{""}
	addDir := func(parent, name string, mode iofs.FileMode) string {
		p := strings.TrimPrefix(parent+"/"+name, "/")
		tr[p] = entry{Kind: "dir", Mode: mode}
		dirs = append(dirs, p)
		return p
	}
	for i := 0; len(dirs) < n/8; i++ {
		parent := dirs[r.IntN(len(dirs))]
		if strings.Count(parent, "/") > 6 { // keep depth around 8
			parent = ""
		}
		addDir(parent, fmt.Sprintf("pkg%d", i), 0o755)
	}
	join := func(dir, name string) string { return strings.TrimPrefix(dir+"/"+name, "/") }
	for i := 0; i < n; i++ {
		dir := dirs[r.IntN(len(dirs))]
		size := []int{0, 1, 100, 1000, 5000, 70000}[r.IntN(6)]
		var b strings.Builder
		for b.Len() < size {
			fmt.Fprintf(&b, "line %d of file %d in %s\n", b.Len(), i, dir)
		}
		mode := []iofs.FileMode{0o644, 0o644, 0o755, 0o600, 0o444}[r.IntN(5)]
		tr[join(dir, fmt.Sprintf("f%03d.go", i))] = entry{Kind: "file", Mode: mode, Content: b.String()[:size]}
	}
	for i := 0; i < n/20; i++ {
		dir := dirs[r.IntN(len(dirs))]
		tr[join(dir, fmt.Sprintf("link%d", i))] = entry{Kind: "symlink", Content: fmt.Sprintf("f%03d.go", r.IntN(n))}
	}
	tr[join(dirs[len(dirs)-1], "dangling")] = entry{Kind: "symlink", Content: "../no/such/file"}
	addDir(dirs[len(dirs)/2], "empty", 0o755)
	addDir(dirs[len(dirs)/3], "private", 0o700)
	return tr
}
