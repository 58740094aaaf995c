package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// protectedHardlinksOff sets fs.protected_hardlinks to 0 for the test (so
// a user may link a file it does not own, as on systems without it) and
// restores the old value in cleanup, also when the test fails.
func protectedHardlinksOff(t *testing.T) {
	t.Helper()
	const knob = "/proc/sys/fs/protected_hardlinks"
	old, err := os.ReadFile(knob)
	if err != nil {
		t.Skipf("cannot read %s: %v", knob, err)
	}
	if err := os.WriteFile(knob, []byte("0\n"), 0o644); err != nil {
		t.Fatalf("set %s: %v", knob, err)
	}
	t.Cleanup(func() {
		if err := os.WriteFile(knob, old, 0o644); err != nil {
			t.Errorf("restore %s to %q: %v", knob, old, err)
		}
	})
}

// With fs.protected_hardlinks=0 nobody links root's files into its own
// directory (issue 14, defect 2). Root's later changes through its own
// names must be restorable under those names (they were captured under
// nobody's link only, so a rewind restored 0 files), and the rewind must
// not leave a setuid-root copy of root's program in nobody's directory
// (restoring the link's name as a file of its own split one off there).
func TestHardLinksOfAnotherUserKeepRootsChangesRecoverable(t *testing.T) {
	protectedHardlinksOff(t)
	ws := sharedWS(t)
	writeFile(t, filepath.Join(ws, "secret"), "v1\n", 0o600)
	tool, err := os.ReadFile("/bin/true")
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(ws, "suid"), string(tool), 0o755)
	if err := unix.Chmod(filepath.Join(ws, "suid"), 0o4755); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(ws, "nb"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(filepath.Join(ws, "nb"), nobody, nobody); err != nil {
		t.Fatal(err)
	}
	mountWS(t, ws, "--allow-other")
	// Root knows its files by their names (the kernel caches the entries).
	sh(t, ws, "cat secret >/dev/null && ls -l suid >/dev/null")
	mustNobody(t, ws, "ln secret nb/link && ln suid nb/suidlink")
	s := step(t, ws, "root's changes")
	sh(t, ws, "echo v2 > secret && chmod 755 suid")

	out := zerofsOK(t, ws, "rewind", itoa(s))
	if b, _ := os.ReadFile(filepath.Join(ws, "secret")); string(b) != "v1\n" {
		t.Fatalf("secret after zerofs rewind %d (%s): %q, want the v1 it had", s, strings.TrimSpace(out), b)
	}
	if got := lstatOwned(t, filepath.Join(ws, "suid")); got.uid != 0 || got.mode != 0o4755 {
		t.Fatalf("suid after the rewind: %d %04o, want root's, 4755", got.uid, got.mode)
	}
	entries, err := os.ReadDir(filepath.Join(ws, "nb"))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		got := lstatOwned(t, filepath.Join(ws, "nb", e.Name()))
		if got.mode&(unix.S_ISUID|unix.S_ISGID) != 0 && got.uid != nobody {
			t.Errorf("nb/%s after the rewind: %d:%d %04o, a set-id file of another user in nobody's directory", e.Name(), got.uid, got.gid, got.mode)
		}
	}
	// Nobody reads no more than before: its link of root's secret is
	// root's 0600 file.
	deniedNobody(t, ws, "cat nb/link")
}
