package testsupport

import (
	"crypto/sha256"
	"fmt"
	iofs "io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// Entry is what a tree snapshot keeps of one path: what a rewind must
// restore (SPEC "Rewind": contents, which paths exist, permission bits).
// Times, owners and inode numbers are not part of the contract.
type Entry struct {
	Kind    string // "file", "dir", "symlink" or "other"
	Mode    iofs.FileMode
	Content string // file content or symlink target
}

func (e Entry) String() string {
	c := e.Content
	if len(c) > 40 {
		// A hash, so two long contents that differ past the cut still
		// print differently.
		c = fmt.Sprintf("%.40q...(%d bytes, sha256 %.8x)", c, len(c), sha256.Sum256([]byte(c)))
	} else {
		c = fmt.Sprintf("%q", c)
	}
	return fmt.Sprintf("%s %v %s", e.Kind, e.Mode, c)
}

// Tree maps a slash-separated path relative to the root to its entry.
type Tree map[string]Entry

// Sub is the part of tr under dir, with paths relative to dir.
func (tr Tree) Sub(dir string) Tree {
	out := Tree{}
	for p, e := range tr {
		if rel, ok := strings.CutPrefix(p, dir+"/"); ok {
			out[rel] = e
		}
	}
	return out
}

// PermBits are the mode bits a rewind restores, and a snapshot keeps.
const PermBits = iofs.ModePerm | iofs.ModeSetuid | iofs.ModeSetgid | iofs.ModeSticky

// Fataler is what Snapshot needs of a test: *testing.T offers it, and so
// does *rapid.T, so a property test's failure shrinks.
type Fataler interface {
	Helper()
	Fatalf(format string, args ...any)
}

// Snapshot walks root with Lstat (never following a symlink) and records
// every path under it but the top-level names in skip (".zero", for an
// unmounted workspace's store). Through a mount `.zero` and @T are not
// listed: a snapshot there skips nothing, and if they ever were listed
// the comparison would show it.
func Snapshot(t Fataler, root string, skip ...string) Tree {
	t.Helper()
	tr := Tree{}
	err := filepath.WalkDir(root, func(p string, d iofs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p == root {
			return nil
		}
		rel, _ := filepath.Rel(root, p)
		for _, s := range skip {
			if rel == s {
				if d.IsDir() {
					return filepath.SkipDir
				}
				return nil
			}
		}
		e, err := ReadEntry(p)
		if err != nil {
			return err
		}
		tr[filepath.ToSlash(rel)] = e
		return nil
	})
	if err != nil {
		t.Fatalf("snapshot %s: %v", root, err)
	}
	return tr
}

// ReadEntry reads the one path p (never following a symlink) the way
// Snapshot records it.
func ReadEntry(p string) (Entry, error) {
	fi, err := os.Lstat(p)
	if err != nil {
		return Entry{}, err
	}
	e := Entry{Mode: fi.Mode() & PermBits}
	switch {
	case fi.Mode().IsRegular():
		b, err := os.ReadFile(p)
		if err != nil {
			return Entry{}, err
		}
		e.Kind, e.Content = "file", string(b)
	case fi.IsDir():
		e.Kind = "dir"
	case fi.Mode()&iofs.ModeSymlink != 0:
		target, err := os.Readlink(p)
		if err != nil {
			return Entry{}, err
		}
		e.Kind, e.Content, e.Mode = "symlink", target, 0
	default:
		e.Kind = "other"
	}
	return e, nil
}

// DiffTrees lists how got differs from want, one line a path, sorted.
func DiffTrees(want, got Tree) []string {
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

// SameTree fails the test, listing at most 20 differences, unless got
// equals want exactly.
func SameTree(t testing.TB, what string, want, got Tree) {
	t.Helper()
	d := DiffTrees(want, got)
	if len(d) == 0 {
		return
	}
	n := len(d)
	more := ""
	if n > 20 {
		more = fmt.Sprintf("\n... and %d more", n-20)
		d = d[:20]
	}
	t.Errorf("%s: %d paths differ (got %d paths, want %d):\n%s%s", what, n, len(got), len(want), strings.Join(d, "\n"), more)
}
