package fs

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// Directories are served without OPENDIR and RELEASEDIR: after the
// kernel's first OPENDIR (answered ENOSYS) none reaches the daemon,
// however many directories are listed, and every listing is whole: a
// directory of 3,000 names (many READDIR requests, each through a handle of
// its own that seeks to the request's offset), the root (the store and the
// views left out), a view of that directory and the control directory.
// fsync(2) of a directory works without a handle.
func TestDirsWithoutOpendir(t *testing.T) {
	m := mountT(t, Options{})
	if !m.dirs.on.Load() {
		t.Skip("the kernel does not offer FUSE_NO_OPENDIR_SUPPORT")
	}
	mp := m.Mountpoint()
	big := filepath.Join(mp, "big")
	if err := os.Mkdir(big, 0o755); err != nil {
		t.Fatal(err)
	}
	var want []string
	for i := range 3000 {
		name := fmt.Sprintf("file-with-a-longish-name-%05d", i)
		want = append(want, name)
		writeFile(t, filepath.Join(big, name), "x")
	}
	t1 := stepT(t, mp, "after")
	if err := os.Remove(filepath.Join(big, want[0])); err != nil {
		t.Fatal(err)
	}

	list := func(dir string) []string {
		t.Helper()
		es, err := os.ReadDir(dir)
		if err != nil {
			t.Fatalf("ReadDir %s: %v", dir, err)
		}
		var names []string
		for _, e := range es {
			names = append(names, e.Name())
		}
		return names
	}
	list(mp) // the kernel's first OPENDIR, if it had not sent it yet
	before := m.dirs.opendirs.Load()
	for range 3 {
		if got := list(big); !slices.Equal(got, want[1:]) {
			t.Fatalf("big/ lists %d names, want %d", len(got), len(want)-1)
		}
		if got := list(filepath.Join(view(mp, t1), "big")); !slices.Equal(got, want) {
			t.Fatalf("@%d/big/ lists %d names, want %d", t1, len(got), len(want))
		}
		if got := list(mp); !slices.Equal(got, []string{"big"}) {
			t.Fatalf("the root lists %q, want [big]", got)
		}
		if got := list(filepath.Join(mp, ".zero")); !slices.Contains(got, "head") {
			t.Fatalf(".zero lists %q, want head among them", got)
		}
	}
	if n := m.dirs.opendirs.Load() - before; n != 0 {
		t.Errorf("%d OPENDIR requests reached the daemon after the first, want 0", n)
	}
	d, err := os.Open(big)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		t.Errorf("fsync of a directory: %v", err)
	}
}
