package daemon

import (
	"bytes"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// startReporter starts sh -c script with the write end of a pipe as its
// descriptor 3, as startDaemon starts the daemon, and returns the read end.
func startReporter(t *testing.T, script string) (*exec.Cmd, *os.File) {
	t.Helper()
	rd, wr, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rd.Close() })
	cmd := exec.Command("sh", "-c", script)
	cmd.ExtraFiles = []*os.File{wr}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	wr.Close()
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	return cmd, rd
}

// A daemon that works (here: spends CPU) for longer than the stall bound is
// waited for, however long it takes, and the user is told why. One
// that does nothing for the stall bound is killed with a clear error.
func TestWaitReadyWaitsForWorkNotForTime(t *testing.T) {
	t.Run("working", func(t *testing.T) {
		defer func(d time.Duration) { mountNoteAfter = d }(mountNoteAfter)
		mountNoteAfter = time.Second
		// About 3 s of CPU: three stall bounds, and past the note.
		cmd, rd := startReporter(t, `end=$(( $(date +%s) + 3 )); while [ "$(date +%s)" -lt "$end" ]; do :; done; echo ok >&3`)
		var stderr bytes.Buffer
		s, err := waitReady(&stderr, cmd, rd, time.Second)
		if err != nil || s != "ok" {
			t.Fatalf("waitReady = %q, %v; want ok", s, err)
		}
		if !strings.Contains(stderr.String(), "still opening the store") {
			t.Errorf("stderr = %q; want the note saying what the mount waits for", stderr.String())
		}
	})
	t.Run("idle", func(t *testing.T) {
		cmd, rd := startReporter(t, `exec sleep 60`)
		start := time.Now()
		s, err := waitReady(&bytes.Buffer{}, cmd, rd, time.Second)
		if err == nil || !strings.Contains(err.Error(), "did no work") {
			t.Fatalf("waitReady = %q, %v; want the stall error", s, err)
		}
		if cmd.ProcessState == nil {
			t.Errorf("the idle daemon was not reaped")
		}
		t.Logf("gave up after %v", time.Since(start).Round(time.Millisecond))
	})
}
