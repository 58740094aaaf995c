package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestStatusSaysWhereTheDaemonLogIs: an in-place mount hides its store,
// daemon.log included: status names the daemon's own descriptor of the
// log, which reads as the log does; with the mount elsewhere, the log's
// path in the store.
func TestStatusSaysWhereTheDaemonLogIs(t *testing.T) {
	t.Run("in place", func(t *testing.T) {
		ws := filepath.Join(t.TempDir(), "ws")
		os.Mkdir(ws, 0o755)
		mountT(t, ws)
		pid := daemonPIDOf(t, ws)
		fd := "/proc/" + strconv.Itoa(pid) + "/fd/2"
		want := "log:       " + fd + " (the daemon's " + ws + "/.zero/daemon.log, which the mount hides)\n"
		if out := binOK(t, ws, "status"); !strings.Contains(out, want) {
			t.Fatalf("status lacks %q:\n%s", want, out)
		}
		var st struct {
			DaemonLog string `json:"daemonLog"`
		}
		if err := json.Unmarshal([]byte(binOK(t, ws, "status", "--json")), &st); err != nil || st.DaemonLog != fd {
			t.Errorf("status --json: daemonLog %q (%v), want %q", st.DaemonLog, err, fd)
		}
		if b, err := os.ReadFile(fd); err != nil || !strings.Contains(string(b), `msg="zerofs: mounted"`) {
			t.Errorf("reading %s: %v\n%s", fd, err, b)
		}
	})
	t.Run("elsewhere", func(t *testing.T) {
		built.NeedFUSE(t)
		dir := t.TempDir()
		ws, mp := filepath.Join(dir, "ws"), filepath.Join(dir, "mnt")
		os.Mkdir(ws, 0o755)
		os.Mkdir(mp, 0o755)
		r := bin(t, "/", "", "mount", ws, mp)
		t.Cleanup(func() { unmountT(t, mp) })
		if r.code != 0 {
			t.Fatalf("zerofs mount: exit %d: %s", r.code, r.stderr)
		}
		if out, want := binOK(t, mp, "status"), "log:       "+ws+"/.zero/daemon.log\n"; !strings.Contains(out, want) {
			t.Errorf("status lacks %q:\n%s", want, out)
		}
	})
}
