package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/zerofs/zerofs/internal/testsupport"
)

// TestZeroignoreUnreadableAsUser: a daemon of nobody's that may not read
// the .zeroignore root put there records everything but what --ignore
// matches, and says why at mount and in status; a readable one works for
// it as for root.
func TestZeroignoreUnreadableAsUser(t *testing.T) {
	ws, bin, asUser := userMount(t)
	must := mustAs(t, asUser)
	must(bin, "umount", ws)
	if err := testsupport.Poll(10*time.Second, func() bool { return !testsupport.FUSEMounted(ws) }); err != nil {
		t.Fatalf("still mounted after umount: %v", err)
	}
	ign := filepath.Join(ws, ".zeroignore")
	if err := os.WriteFile(ign, []byte("*.o\n"), 0o600); err != nil { // root's, unreadable to nobody
		t.Fatal(err)
	}
	out := must(bin, "mount", "--ignore", "*.tmp", ws)
	if !strings.Contains(out, "zerofs: warning: .zeroignore not used (.zeroignore: permission denied)") {
		t.Errorf("mount with an unreadable .zeroignore said:\n%s", out)
	}
	if st := must(bin, "status"); !strings.Contains(st, "ignoring:  .zeroignore not used (.zeroignore: permission denied): everything is recorded but what --ignore matches (1 pattern)") {
		t.Errorf("status:\n%s", st)
	}
	must(bin, "step", "build")
	must("sh", "-c", "echo x > a.o && echo y > b.tmp")
	log := must(bin, "log", "--stat")
	if !strings.Contains(log, "a.o") || strings.Contains(log, "b.tmp") {
		t.Errorf("log --stat: want a.o recorded (the file is not used) and b.tmp not (--ignore):\n%s", log)
	}
	// Made readable (through the backing directory: the file is root's),
	// it is used from the next mount on.
	must(bin, "umount", ws)
	if err := testsupport.Poll(10*time.Second, func() bool { return !testsupport.FUSEMounted(ws) }); err != nil {
		t.Fatalf("still mounted after umount: %v", err)
	}
	if err := os.Chmod(ign, 0o644); err != nil {
		t.Fatal(err)
	}
	must(bin, "mount", ws)
	if st := must(bin, "status"); !strings.Contains(st, "ignoring:  on, 1 pattern (1 from .zeroignore)") {
		t.Errorf("status with a readable .zeroignore:\n%s", st)
	}
	must(bin, "step", "rebuild")
	must("sh", "-c", "echo z > c.o")
	if log := must(bin, "log", "--stat"); strings.Contains(log, "c.o") {
		t.Errorf("c.o was recorded:\n%s", log)
	}
}
