package e2e

import (
	"fmt"
	"github.com/zerofs/zerofs/internal/testsupport"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestCrashDuringKeptRemove: SIGKILL the daemon while `rm -rf` removes a
// tree of files whose before-states are kept (their inodes linked into the
// store, not copied), in each --sync mode. After the crash the store holds
// kept blobs, `zerofs verify` finds every blob every checkpoint names
// present and good, @T shows every file byte for byte, a rewind brings
// them all back, and gc absorbs the kept blobs into packs (removing any
// that nothing names, as a crash between a link and its checkpoint leaves)
// with every blob still verifying.
func TestCrashDuringKeptRemove(t *testing.T) {
	for _, sync := range []string{"always", "batch"} {
		t.Run(sync, func(t *testing.T) {
			built.NeedFUSE(t)
			ws := filepath.Join(t.TempDir(), "ws")
			tree := filepath.Join(ws, "tree")
			rng := rand.New(rand.NewPCG(7, uint64(len(sync))))
			want := map[string][]byte{}
			const files = 600
			for i := range files {
				p := fmt.Sprintf("d%02d/f%03d", i%20, i)
				var b []byte
				switch {
				case i%50 == 0:
					b = make([]byte, 1<<20+rng.IntN(1<<20)) // chunked when copied
				case i%7 == 0:
					b = []byte("the same content in many files\n") // dedup
				default:
					b = make([]byte, rng.IntN(20<<10))
				}
				if len(b) > 0 && b[0] != 't' {
					for j := range b {
						b[j] = byte(rng.Uint32())
					}
				}
				want[p] = b
				if err := os.MkdirAll(filepath.Join(tree, filepath.Dir(p)), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(filepath.Join(tree, p), b, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			m := mountForeground(t, ws, "--sync", sync)
			T := step(t, ws, "rm -rf")
			rm := exec.Command("rm", "-rf", tree)
			if err := rm.Start(); err != nil {
				t.Fatal(err)
			}
			// Kill once a third of the files are gone (each unlink's
			// checkpoint is one event).
			if err := testsupport.Poll(60*time.Second, func() bool { return head(t, ws) >= T+files/3 }); err != nil {
				t.Fatalf("rm -rf made no progress: head %d, step %d", head(t, ws), T)
			}
			m.crash(t, ws)
			rm.Wait() // fails: the mount is gone
			kept, _ := os.ReadDir(filepath.Join(ws, ".zero", "blobs", "kept"))
			left := 0
			filepath.Walk(tree, func(_ string, fi os.FileInfo, err error) error {
				if err == nil && fi.Mode().IsRegular() {
					left++
				}
				return nil
			})
			stashes := 0
			for _, e := range kept {
				if strings.HasPrefix(e.Name(), "p-") {
					stashes++
				}
			}
			t.Logf("killed with %d of %d files left, %d kept blobs in the store, %d of them stashes not yet named", left, files, len(kept), stashes)
			if len(kept) == 0 {
				t.Fatalf("no kept blobs in the store: the removed files were copied")
			}
			// The kill falls between removals' stashes and their naming
			// (the namer waits for a pause in the removals): the
			// next mount names them.
			if stashes == 0 {
				t.Fatalf("no stash in the store at the kill: the crash did not fall between a removal's stash and its name")
			}
			if left == files {
				t.Fatalf("no file was removed before the kill")
			}
			// Offline: every blob every checkpoint names is present and
			// verifies.
			if out, err := zerofs(t, ws, "verify"); err != nil {
				t.Fatalf("zerofs verify after the crash: %v\n%s", err, out)
			}

			mountForeground(t, ws, "--sync", sync)
			for p, b := range want {
				got, err := os.ReadFile(filepath.Join(view(ws, T), "tree", p))
				if err != nil || string(got) != string(b) {
					t.Fatalf("@%d/tree/%s: %d bytes (%v), want %d bytes, its before-state", T, p, len(got), err, len(b))
				}
			}
			rewindTo(t, ws, T)
			for p, b := range want {
				got, err := os.ReadFile(filepath.Join(tree, p))
				if err != nil || string(got) != string(b) {
					t.Fatalf("after the rewind tree/%s: %d bytes (%v), want %d bytes", p, len(got), err, len(b))
				}
			}
			zerofsOK(t, "/", "umount", ws)
			zerofsOK(t, ws, "gc")
			if out, err := zerofs(t, ws, "verify"); err != nil {
				t.Fatalf("zerofs verify after gc: %v\n%s", err, out)
			}
			if kept, _ = os.ReadDir(filepath.Join(ws, ".zero", "blobs", "kept")); len(kept) != 0 {
				t.Errorf("%d kept blobs left after gc, want all absorbed into packs", len(kept))
			}
			// Remove the tree again and rewind to T: the state at T comes
			// from the first rm's checkpoints, whose blobs are packed now.
			mountForeground(t, ws, "--sync", sync)
			step(t, ws, "rm -rf again")
			if out, err := exec.Command("rm", "-rf", tree).CombinedOutput(); err != nil {
				t.Fatalf("rm -rf: %v\n%s", err, out)
			}
			rewindTo(t, ws, T)
			for p, b := range want {
				got, err := os.ReadFile(filepath.Join(tree, p))
				if err != nil || string(got) != string(b) {
					t.Fatalf("after gc and a second rewind tree/%s: %d bytes (%v), want %d bytes", p, len(got), err, len(b))
				}
			}
		})
	}
}
