package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/zerofs/zerofs/internal/testsupport"
)

// Root's `zerofs mount` of a workspace nobody owns refused nobody's store
// ("belongs to uid 65534"), but appended its error line to whatever
// nobody's .zero/daemon.log pointed at first, creating it (0600) when it
// did not exist. Nothing may be written through a symlink in a store: the
// log is opened beneath the store's descriptor without following one, and
// a store root may not trust is refused before anything is written in it.
func TestDaemonLogNeverFollowsASymlink(t *testing.T) {
	for _, exists := range []bool{true, false} {
		name := "victim missing"
		if exists {
			name = "victim exists"
		}
		t.Run(name, func(t *testing.T) {
			ws := sharedWS(t)
			if err := os.Chown(ws, nobody, nobody); err != nil {
				t.Fatal(err)
			}
			victim := filepath.Join(t.TempDir(), "victim") // root's, 0700
			if exists {
				if err := os.WriteFile(victim, []byte("original\n"), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			mustNobody(t, ws, "mkdir -m700 .zero; ln -s "+victim+" .zero/daemon.log")
			out, err := zerofs(t, "/", "mount", ws)
			if testsupport.FUSEMounted(ws) {
				t.Cleanup(func() { unmountT(t, ws, 0) })
			}
			if err == nil || !strings.Contains(out, "belongs to uid 65534") {
				t.Errorf("zerofs mount of nobody's store: %v\n%s\nwant a refusal naming the owner", err, out)
			}
			b, rerr := os.ReadFile(victim)
			switch {
			case exists && string(b) != "original\n":
				t.Errorf("root's %s, pointed at by nobody's .zero/daemon.log, now holds %q, want %q", victim, b, "original\n")
			case !exists && rerr == nil:
				t.Errorf("root's mount created %s (%q), the target of nobody's .zero/daemon.log symlink", victim, b)
			}
		})
	}
}

// In a store of the user who mounts, a blobs/packs that is a symlink made
// new packs land where it pointed, outside the store. Nothing in a store
// is reached through a symlink: mount refuses it, and nothing is written
// where it points.
func TestStoreSymlinkedPacksRefused(t *testing.T) {
	ws := mountT(t)
	os.WriteFile(filepath.Join(ws, "a.txt"), []byte("one\n"), 0o644)
	zerofsOK(t, "/", "umount", ws)
	packs := filepath.Join(ws, ".zero", "blobs", "packs")
	outside := t.TempDir()
	if err := os.RemoveAll(packs); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, packs); err != nil {
		t.Fatal(err)
	}
	out, err := zerofs(t, "/", "mount", ws)
	if err == nil {
		pid := testsupport.DaemonPID(t, ws)
		// a.txt's content before this write is stored (in a pack).
		os.WriteFile(filepath.Join(ws, "a.txt"), []byte("two\n"), 0o644)
		step(t, ws, "more")
		unmountT(t, ws, pid)
	}
	if err == nil || !strings.Contains(out, "symlink") {
		t.Errorf("zerofs mount with a symlinked blobs/packs: %v\n%s\nwant a refusal naming the symlink", err, out)
	}
	if ents, _ := os.ReadDir(outside); len(ents) > 0 {
		t.Errorf("%d files written outside the store, where blobs/packs pointed: %v", len(ents), ents)
	}
}

// A directory inside root's store that another user owns (nobody made
// .zero/blobs before root took .zero over with chown, as the refusal of
// nobody's store suggests) lets that user swap what is in it for a
// symlink at any time: refused, like a store of theirs.
func TestStoreDirectoryOfAnotherUserRefused(t *testing.T) {
	ws := sharedWS(t)
	if err := os.Chown(ws, nobody, nobody); err != nil {
		t.Fatal(err)
	}
	mustNobody(t, ws, "mkdir -m700 .zero; mkdir -p -m700 .zero/blobs/packs")
	if err := os.Chown(filepath.Join(ws, ".zero"), 0, 0); err != nil {
		t.Fatal(err)
	}
	out, err := zerofs(t, "/", "mount", ws)
	if testsupport.FUSEMounted(ws) {
		t.Cleanup(func() { unmountT(t, ws, 0) })
	}
	if err == nil || !strings.Contains(out, "belongs to uid 65534") {
		t.Errorf("zerofs mount of a store whose blobs directory is nobody's: %v\n%s\nwant a refusal naming the owner", err, out)
	}
}
