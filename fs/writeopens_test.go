package fs

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/zerofs/zerofs/blobstore"
	"github.com/zerofs/zerofs/internal/testsupport"
	"github.com/zerofs/zerofs/record"
	"github.com/zerofs/zerofs/rewind"
)

func sumHex(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])
}

func inoOf(t *testing.T, p string) uint64 {
	t.Helper()
	var st syscall.Stat_t
	if err := syscall.Lstat(p, &st); err != nil {
		t.Fatal(err)
	}
	return st.Ino
}

// TestRemovedFilesKeptThroughMount: rm and mv-over through the mount keep
// the removed files' own inodes in the store (blobs/kept/<sha256>) instead
// of copying them; a file held open for writing through the mount and a
// file with a second link are copied; a kept file whose unlink failed is
// detached (copied) before a write reaches it; @T and a rewind give every
// file back byte for byte, and .zero/status says how removed files are
// captured.
func TestRemovedFilesKeptThroughMount(t *testing.T) {
	for _, sync := range []bool{false, true} {
		t.Run(map[bool]string{false: "batch", true: "always"}[sync], func(t *testing.T) {
			ws := t.TempDir()
			m := mountT(t, Options{Workspace: ws, Sync: sync})
			mp := m.Mountpoint()
			big := make([]byte, 3<<20)
			rand.Read(big)
			files := map[string]string{
				"a": "alpha\n", "b": "bravo\n", "c": "charlie\n", "held": "held open for writing\n",
				"twin": "two names\n", "victim": "its unlink fails\n", "big": string(big),
				"victim2": "its unlink fails after its stash\n",
			}
			for n, c := range files {
				writeFile(t, filepath.Join(mp, n), c)
			}
			if err := os.Link(filepath.Join(mp, "twin"), filepath.Join(mp, "twin2")); err != nil {
				t.Fatal(err)
			}
			ino := map[string]uint64{}
			for n := range files {
				ino[n] = inoOf(t, filepath.Join(ws, n))
			}
			// The kernel sends the RELEASE of each writeFile after
			// close(2) returned; until it is served the file is still open
			// for writing, and rightly copied rather than kept.
			var dev uint64
			if st, err := os.Stat(ws); err == nil {
				dev = st.Sys().(*syscall.Stat_t).Dev
			}
			for n := range files {
				if testsupport.Poll(10*time.Second, func() bool { return !m.fs.wopen.has(dev, ino[n]) }) != nil {
					t.Fatalf("the write handle of %s was never released", n)
				}
			}
			T := stepT(t, mp, "rm")

			held, err := os.OpenFile(filepath.Join(mp, "held"), os.O_WRONLY, 0)
			if err != nil {
				t.Fatal(err)
			}
			for _, n := range []string{"a", "held", "twin", "big"} {
				if err := os.Remove(filepath.Join(mp, n)); err != nil {
					t.Fatal(err)
				}
			}
			// A write after the removal goes to the removed inode, never
			// into a kept blob: with OPEN held was copied, not kept;
			// without (noopen.go) it was kept and this write detaches it.
			if _, err := held.Write([]byte("after")); err != nil {
				t.Fatal(err)
			}
			held.Close()
			if err := os.Rename(filepath.Join(mp, "c"), filepath.Join(mp, "b")); err != nil {
				t.Fatal(err)
			}
			// An unlink stashes its file: the same inode, linked into
			// kept/ unread under a stash name, until the namer names it.
			stashed := map[uint64]bool{}
			ents, _ := os.ReadDir(filepath.Join(ws, ".zero", "blobs", "kept"))
			for _, e := range ents {
				if record.IsStashName(e.Name()) {
					stashed[inoOf(t, filepath.Join(ws, ".zero", "blobs", "kept", e.Name()))] = true
				}
			}
			if err := m.Engine().NameStashes(context.Background()); err != nil {
				t.Fatal(err)
			}
			ents, _ = os.ReadDir(filepath.Join(ws, ".zero", "blobs", "kept"))
			for _, e := range ents {
				if record.IsStashName(e.Name()) {
					t.Errorf("stash %s left after NameStashes", e.Name())
				}
			}
			t.Logf("%d stashes seen before the namer ran", len(stashed))
			// The same for a stash: victim2's unlink fails after its
			// stash; an open for writing names it (its content copied)
			// before anything is written.
			release2, _, err := m.Engine().Begin(context.Background(), rewind.Caller{}, rewind.Change{Path: "victim2", Removed: true, Stash: true})
			if err != nil {
				t.Fatal(err)
			}
			release2()
			writeFile(t, filepath.Join(mp, "victim2"), "overwritten too\n")
			// An unlink that fails after its capture (EBUSY, EACCES):
			// victim is kept and still in the workspace. Opening it for
			// writing (O_TRUNC) detaches it before anything is written.
			release, _, err := m.Engine().Begin(context.Background(), rewind.Caller{}, rewind.Change{Path: "victim", Removed: true})
			if err != nil {
				t.Fatal(err)
			}
			release()
			if got := inoOf(t, filepath.Join(ws, ".zero", "blobs", "kept", sumHex(files["victim"]))); got != ino["victim"] {
				t.Fatalf("victim was not kept (kept inode %d, want %d)", got, ino["victim"])
			}
			writeFile(t, filepath.Join(mp, "victim"), "overwritten\n")
			if err := m.Engine().Sync(); err != nil {
				t.Fatal(err)
			}

			keptDir := filepath.Join(ws, ".zero", "blobs", "kept")
			for _, n := range []string{"a", "b", "big"} {
				p := filepath.Join(keptDir, sumHex(files[n]))
				if got := inoOf(t, p); got != ino[n] {
					t.Errorf("kept %s is inode %d, want the workspace file's own %d", n, got, ino[n])
				}
			}
			for _, c := range []string{files["held"], files["twin"], files["victim"], files["victim2"]} {
				if _, err := os.Lstat(filepath.Join(keptDir, sumHex(c))); !os.IsNotExist(err) {
					t.Errorf("%q was kept (%v); want it copied", c, err)
				}
				if err := m.Engine().Blobs().Verify(blobstore.MustParseID(sumHex(c))); err != nil {
					t.Errorf("%q's before-state: %v", c, err)
				}
			}
			for n, c := range files {
				if got := readFile(t, filepath.Join(view(mp, T), n)); got != c {
					t.Errorf("@%d/%s: %d bytes, want its before-state (%d bytes)", T, n, len(got), len(c))
				}
			}
			var st struct {
				Captures string `json:"captures"`
			}
			if err := json.Unmarshal([]byte(ctlRead(t, mp, "status")), &st); err != nil || st.Captures != "link removed files" {
				t.Errorf(".zero/status captures %q (%v), want %q", st.Captures, err, "link removed files")
			}
			rewindT(t, mp, T)
			for n, c := range files {
				if got := readFile(t, filepath.Join(mp, n)); got != c {
					t.Errorf("after the rewind %s: %d bytes, want %d", n, len(got), len(c))
				}
			}
		})
	}
}

// TestStoreElsewhereCopies: with --store on a tmpfs, removed files are
// copied and .zero/status says why.
func TestStoreElsewhereCopies(t *testing.T) {
	if st, err := os.Stat("/dev/shm"); err != nil || !st.IsDir() {
		t.Skip("no /dev/shm here")
	}
	store, err := os.MkdirTemp("/dev/shm", "zerofs-store")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(store) })
	ws := t.TempDir()
	m := mountT(t, Options{Workspace: ws, StoreDir: store})
	mp := m.Mountpoint()
	writeFile(t, filepath.Join(mp, "f"), "copied\n")
	T := stepT(t, mp, "rm")
	if err := os.Remove(filepath.Join(mp, "f")); err != nil {
		t.Fatal(err)
	}
	var st struct {
		Captures string `json:"captures"`
	}
	if err := json.Unmarshal([]byte(ctlRead(t, mp, "status")), &st); err != nil || st.Captures != "copy: store on another filesystem" {
		t.Errorf(".zero/status captures %q (%v), want the copy mode", st.Captures, err)
	}
	if ents, _ := os.ReadDir(filepath.Join(store, "blobs", "kept")); len(ents) != 0 {
		t.Errorf("kept/ holds %d files with the store on a tmpfs", len(ents))
	}
	if got := readFile(t, filepath.Join(view(mp, T), "f")); got != "copied\n" {
		t.Errorf("@%d/f: %q", T, got)
	}
}
