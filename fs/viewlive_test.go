package fs

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// A view node first looked up while its path was unchanged ("live") must
// show the recorded state once the path changes, even when the kernel asks
// again for its attributes: after a rewind, and after the entry expired.
func TestViewOfLivePathAfterRewind(t *testing.T) {
	m := mountT(t, Options{})
	mp := m.Mountpoint()
	f := filepath.Join(mp, "f")
	writeFile(t, f, "a\n")
	stepT(t, mp, "s")
	writeFile(t, f, "bb\n")
	at := headOf(t, mp)
	v := filepath.Join(view(mp, at), "f")
	if fi, err := os.Stat(v); err != nil || fi.Size() != 3 {
		t.Fatalf("stat %s: %v %v, want size 3", v, fi, err)
	}
	rewindT(t, mp, at-1)
	if got := readFile(t, f); got != "a\n" {
		t.Fatalf("after the rewind f = %q, want a\\n", got)
	}
	// Let the view root's entry expire, so the kernel looks it up again
	// and asks for the attributes of the node it already knows.
	time.Sleep(wsTimeout + 200*time.Millisecond)
	for i := range 2 {
		fi, err := os.Stat(v)
		if err != nil || fi.Size() != 3 {
			t.Fatalf("stat %s (round %d): %v %v, want size 3", v, i, fi, err)
		}
		if got := readFile(t, v); got != "bb\n" {
			t.Fatalf("%s (round %d) = %q, want bb\\n", v, i, got)
		}
	}
}
