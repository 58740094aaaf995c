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
)

// entry is what a snapshot keeps of one path: what a rewind must restore
// (SPEC "Rewind": contents, which paths exist, permission bits). Times,
// owners and inode numbers are not part of the contract.
type entry struct {
	Kind    string // "file", "dir", "symlink" or "other"
	Mode    iofs.FileMode
	Content string // file content or symlink target
}

func (e entry) String() string {
	c := e.Content
	if len(c) > 40 {
		c = fmt.Sprintf("%.40q...(%d bytes)", c, len(c))
	} else {
		c = fmt.Sprintf("%q", c)
	}
	return fmt.Sprintf("%s %v %s", e.Kind, e.Mode, c)
}

// tree maps a slash-separated path relative to the root to its entry.
type tree map[string]entry

// permBits are the mode bits a rewind restores.
const permBits = iofs.ModePerm | iofs.ModeSetuid | iofs.ModeSetgid | iofs.ModeSticky

// snapshot walks root with Lstat (never following a symlink) and records
// every path under it. It skips nothing: through the mount `.zero` and @T
// are not listed, and if they ever were the comparison would show it.
func snapshot(t *testing.T, root string) tree {
	t.Helper()
	tr := tree{}
	err := filepath.WalkDir(root, func(p string, d iofs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p == root {
			return nil
		}
		rel, _ := filepath.Rel(root, p)
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		e := entry{Mode: fi.Mode() & permBits}
		switch {
		case fi.Mode().IsRegular():
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			e.Kind, e.Content = "file", string(b)
		case fi.IsDir():
			e.Kind = "dir"
		case fi.Mode()&iofs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			e.Kind, e.Content, e.Mode = "symlink", target, 0
		default:
			e.Kind = "other"
		}
		tr[filepath.ToSlash(rel)] = e
		return nil
	})
	if err != nil {
		t.Fatalf("snapshot %s: %v", root, err)
	}
	return tr
}

// diffTrees lists how got differs from want, one line a path, sorted.
func diffTrees(want, got tree) []string {
	var d []string
	for p, w := range want {
		g, ok := got[p]
		switch {
		case !ok:
			d = append(d, fmt.Sprintf("%s: missing, want %v", p, w))
		case g != w:
			d = append(d, fmt.Sprintf("%s: got %v, want %v", p, g, w))
		}
	}
	for p, g := range got {
		if _, ok := want[p]; !ok {
			d = append(d, fmt.Sprintf("%s: got %v, want it absent", p, g))
		}
	}
	sort.Strings(d)
	return d
}

// sameTree fails the test, listing at most 20 differences, unless got
// equals want exactly.
func sameTree(t *testing.T, what string, want, got tree) {
	t.Helper()
	d := diffTrees(want, got)
	if len(d) == 0 {
		return
	}
	more := ""
	if len(d) > 20 {
		more = fmt.Sprintf("\n... and %d more", len(d)-20)
		d = d[:20]
	}
	t.Errorf("%s: %d paths differ (got %d paths, want %d):\n%s%s", what, len(diffTrees(want, got)), len(got), len(want), strings.Join(d, "\n"), more)
}

// sub is the part of tr under dir, with paths relative to dir.
func (tr tree) sub(dir string) tree {
	out := tree{}
	for p, e := range tr {
		if rel, ok := strings.CutPrefix(p, dir+"/"); ok {
			out[rel] = e
		}
	}
	return out
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
