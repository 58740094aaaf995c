package fs

import (
	"os"
	"path/filepath"
	"testing"
)

// The kernel keeps "no such name": asking ten times for a missing name
// reaches the daemon once. A view of a sequence above the head is never
// kept as missing: it comes to exist as history grows.
func TestNegativeEntries(t *testing.T) {
	m := mountT(t, Options{})
	mp := m.Mountpoint()
	missing := filepath.Join(mp, "no-such-file")
	before := m.fs.missed.Load()
	for range 10 {
		if _, err := os.Stat(missing); !os.IsNotExist(err) {
			t.Fatalf("stat %s: %v, want ENOENT", missing, err)
		}
	}
	if n := m.fs.missed.Load() - before; n != 1 {
		t.Errorf("10 stats of a missing name sent %d LOOKUPs answered ENOENT, want 1", n)
	}
	// Creating it through the mount is seen at once.
	writeFile(t, missing, "here")
	if got := readFile(t, missing); got != "here" {
		t.Fatalf("read after create = %q", got)
	}

	future := headOf(t, mp) + 3
	if _, err := os.Stat(view(mp, future)); !os.IsNotExist(err) {
		t.Fatalf("stat @%d above the head: %v, want ENOENT", future, err)
	}
	for i := range 4 {
		stepT(t, mp, "grow")
		writeFile(t, filepath.Join(mp, "f"), string(rune('a'+i)))
	}
	if headOf(t, mp) < future {
		t.Fatalf("head %d did not reach %d", headOf(t, mp), future)
	}
	if _, err := os.Stat(view(mp, future)); err != nil {
		t.Errorf("stat @%d once the head passed it: %v", future, err)
	}
}
