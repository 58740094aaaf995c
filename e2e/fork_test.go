package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// TestForkIntoAnotherUsersDirectoryWritesNowhereElse: issue 14, defect 5.
// Root forks into a directory whose parent is nobody's; nobody keeps
// renaming the new directory away and putting a symlink to a root-only
// directory in its place. On 10f7db6 the fork wrote its files and .zero/
// into the root-only directory and chmodded it 0755. Now the fork writes
// beneath the directory it made, whatever the name points to, or fails;
// the root-only directory never changes.
func TestForkIntoAnotherUsersDirectoryWritesNowhereElse(t *testing.T) {
	ws := sharedWS(t)
	for i := range 1000 {
		d := filepath.Join(ws, fmt.Sprintf("d%02d", i%30))
		os.MkdirAll(d, 0o755)
		if err := os.WriteFile(filepath.Join(d, fmt.Sprintf("f%d", i)), []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	mountWS(t, ws, "--allow-other")
	seq := step(t, ws, "fork me")
	top := filepath.Dir(ws)
	nb := filepath.Join(top, "nbparent")
	rootOnly := filepath.Join(top, "rootonly")
	if err := os.Mkdir(nb, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(nb, nobody, nobody); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(rootOnly, 0o700); err != nil {
		t.Fatal(err)
	}
	swapped := 0
	for round := range 3 {
		target := filepath.Join(nb, fmt.Sprintf("fork%d", round))
		// nobody swaps the fork's new directory for a symlink to the
		// root-only directory, as fast as it can, until killed.
		racer := exec.Command("setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "/bin/sh", "-c",
			fmt.Sprintf(`cd %s; i=0; while :; do if [ -d %s ] && [ ! -L %s ]; then mv %s m.$i 2>/dev/null && ln -s %s %s; i=$((i+1)); fi; done`,
				nb, filepath.Base(target), filepath.Base(target), filepath.Base(target), rootOnly, filepath.Base(target)))
		racer.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if err := racer.Start(); err != nil {
			t.Fatal(err)
		}
		stop := func() {
			syscall.Kill(-racer.Process.Pid, syscall.SIGKILL)
			racer.Wait()
		}
		time.Sleep(50 * time.Millisecond)
		out, err := zerofs(t, ws, "fork", itoa(seq), target)
		stop()
		t.Logf("round %d: fork: %v %s", round, err, out)
		if m, _ := filepath.Glob(filepath.Join(nb, "m.*")); len(m) > swapped {
			swapped = len(m)
		}
		ents, rerr := os.ReadDir(rootOnly)
		fi, serr := os.Stat(rootOnly)
		if rerr != nil || serr != nil || len(ents) != 0 || fi.Mode().Perm() != 0o700 {
			names := []string{}
			for _, e := range ents {
				names = append(names, e.Name())
			}
			t.Fatalf("round %d: the root-only directory changed: %d entries %v, mode %v (%v %v)", round, len(ents), names[:min(5, len(names))], fi.Mode(), rerr, serr)
		}
	}
	if swapped == 0 {
		t.Errorf("nobody never managed to swap the new directory: the race was not tried")
	}
}
