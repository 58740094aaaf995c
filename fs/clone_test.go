package fs

import (
	"bytes"
	"crypto/rand"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/zerofs/zerofs/internal/testsupport"
)

// TestCloneThroughMount: on XFS with reflinks, a large file opened with
// O_TRUNC through the mount and one truncated by path are captured as
// clones in the store (kept/<sha256>, inodes of their own), and @T gives
// their old content back byte for byte.
func TestCloneThroughMount(t *testing.T) {
	requireFUSE(t)
	x := testsupport.MountXFS(t)
	ws := filepath.Join(x, "ws")
	if err := os.Mkdir(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	m := mountT(t, Options{Workspace: ws})
	mp := m.Mountpoint()
	old := map[string][]byte{"opened": make([]byte, 5<<20), "truncated": make([]byte, 3<<20)}
	for n, b := range old {
		rand.Read(b)
		if err := os.WriteFile(filepath.Join(mp, n), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	T := stepT(t, mp, "edit")
	writeFile(t, filepath.Join(mp, "opened"), "rewritten\n") // O_TRUNC
	if err := os.Truncate(filepath.Join(mp, "truncated"), 10); err != nil {
		t.Fatal(err)
	}
	if err := m.Engine().Sync(); err != nil {
		t.Fatal(err)
	}
	var st struct {
		Captures string `json:"captures"`
	}
	readJSON(t, ctlRead(t, mp, "status"), &st)
	if !strings.Contains(st.Captures, "clone large files about to be written") {
		t.Errorf(".zero/status captures %q, want clones named", st.Captures)
	}
	for n, b := range old {
		p := filepath.Join(ws, ".zero", "blobs", "kept", sumHex(string(b)))
		if got := inoOf(t, p); got == inoOf(t, filepath.Join(ws, n)) {
			t.Errorf("kept %s is the workspace file's own inode, want a clone", n)
		}
		got, err := os.ReadFile(filepath.Join(view(mp, T), n))
		if err != nil || !bytes.Equal(got, b) {
			t.Errorf("@%d/%s: %d bytes (%v), want its %d bytes before the write", T, n, len(got), err, len(b))
		}
	}
}
