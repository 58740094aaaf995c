package main

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/zerofs/zerofs/history"
	"github.com/zerofs/zerofs/internal/testsupport"
)

// holder starts script under sh -ec in dir as a process that uses the
// mount (its working directory or an open file there), as root or, with
// asNobody, as uid 65534, and waits until ready (a path the script
// creates when it holds what it should) exists. Cleanup kills it and
// waits for it, before the mount's own cleanup unmounts.
func holder(t *testing.T, asNobody bool, dir, ready, script string) *exec.Cmd {
	t.Helper()
	var cmd *exec.Cmd
	if asNobody {
		if _, err := exec.LookPath("setpriv"); err != nil {
			t.Fatal("no setpriv: the second user's holder cannot be run")
		}
		cmd = exec.Command("setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "/bin/sh", "-ec", script)
	} else {
		cmd = exec.Command("/bin/sh", "-ec", script)
	}
	cmd.Dir = dir
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	if err := testsupport.Poll(10*time.Second, func() bool { _, err := os.Lstat(ready); return err == nil }); err != nil {
		t.Fatalf("the holder never got ready (%s)", ready)
	}
	return cmd
}

// TestUmountBusyNamesHolders: a mount that processes use (a root shell's
// working directory in a directory whose name holds a newline, a sleep of
// nobody's with a file open in the mount, a file mapped) is refused: umount exits 1
// naming each process (pid, command, what of it is in the mount, quoted)
// and the next command, and the mount, its daemon and the processes go on
// as before. `umount --lazy` then detaches it: the daemon exits, the mount
// is gone, and umount names the processes left in the dead mount, where
// reading and writing fail.
func TestUmountBusyNamesHolders(t *testing.T) {
	built.NeedFUSE(t)
	// Under a directory the second user may pass through (t.TempDir's are
	// root's alone).
	dir, err := os.MkdirTemp("", "zerofs-umountbusy-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	os.Chmod(dir, 0o755)
	ws := filepath.Join(dir, "ws")
	os.Mkdir(ws, 0o755)
	mountT(t, ws, "--allow-other")
	odd := "sub\nzerofs: forged"
	sh(t, ws, "mkdir -p 'shared' && chmod 0777 shared && echo held > shared/f && chmod 0666 shared/f")
	if err := os.Mkdir(filepath.Join(ws, odd), 0o755); err != nil {
		t.Fatal(err)
	}
	ready := filepath.Join(t.TempDir(), "ready")
	rootHolder := holder(t, false, filepath.Join(ws, odd), ready, "touch "+ready+"; exec sleep 300")
	shared := filepath.Join(ws, "shared")
	nobodyHolder := holder(t, true, "/", filepath.Join(shared, "ready"), "exec 3<"+shared+"/f; touch "+shared+"/ready; exec sleep 300")
	// A file mapped and closed: only the mapping holds it.
	mapper := holder(t, false, "/", ready+"2", "exec python3 -c 'import mmap, sys, time; f = open(sys.argv[1], \"rb\"); m = mmap.mmap(f.fileno(), 0, prot=mmap.PROT_READ); f.close(); open(sys.argv[2], \"w\").close(); time.sleep(300)' "+shared+"/f "+ready+"2")
	daemon := daemonPIDOf(t, ws)

	r := bin(t, "/", "", "umount", ws)
	if r.code != 1 {
		t.Fatalf("umount of a busy mount: exit %d, stderr %q; want 1", r.code, r.stderr)
	}
	line := strings.TrimSuffix(r.stderr, "\n")
	for _, want := range []string{
		"zerofs: " + ws + " is busy: ",
		"pid " + strconv.Itoa(rootHolder.Process.Pid) + " (sleep: working directory \"" + ws + "/sub\\nzerofs: forged\")",
		"pid " + strconv.Itoa(nobodyHolder.Process.Pid) + " (sleep: open file " + ws + "/shared/f)",
		"pid " + strconv.Itoa(mapper.Process.Pid) + " (python3: ", // python's mmap keeps a descriptor too
		"mapped file " + ws + "/shared/f)",
		"'zerofs umount " + ws + "' again",
		"'zerofs umount --lazy " + ws + "'",
	} {
		if !strings.Contains(line, want) {
			t.Errorf("umount's refusal lacks %q:\n%s", want, r.stderr)
		}
	}
	if strings.Contains(line, "\n") {
		t.Errorf("umount's refusal is more than one line (a name printed raw):\n%s", r.stderr)
	}
	if st, ok := history.ReadStatus(ws); !ok || st.PID != daemon {
		t.Fatalf("after the refusal the mount's daemon is %+v, %v; want pid %d still serving", st, ok, daemon)
	}
	if got := readTrim(t, "/proc/"+strconv.Itoa(rootHolder.Process.Pid)+"/cwd/../shared/f"); got != "held" {
		t.Errorf("after the refusal the holder reads %q through its working directory; want held", got)
	}

	r = bin(t, "/", "", "umount", "--lazy", ws)
	if r.code != 0 {
		t.Fatalf("umount --lazy: exit %d, stderr %q", r.code, r.stderr)
	}
	for _, want := range []string{
		"zerofs: detached " + ws + " lazily; left in the dead mount, where reading and writing fail until they leave it: ",
		"pid " + strconv.Itoa(rootHolder.Process.Pid) + " (sleep: working directory",
		"pid " + strconv.Itoa(nobodyHolder.Process.Pid) + " (sleep: open file",
	} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("umount --lazy's stderr lacks %q:\n%s", want, r.stderr)
		}
	}
	if testsupport.FUSEMounted(ws) {
		t.Errorf("%s still mounted after umount --lazy", ws)
	}
	if history.ProcessAlive(daemon) {
		t.Errorf("the daemon %d still runs after umount --lazy", daemon)
	}
	if _, err := os.ReadDir("/proc/" + strconv.Itoa(rootHolder.Process.Pid) + "/cwd"); !errors.Is(err, syscall.ENOTCONN) {
		t.Errorf("reading the holder's working directory after umount --lazy: %v; want ENOTCONN (a dead mount, as umount said)", err)
	}
	if _, err := os.ReadFile("/proc/" + strconv.Itoa(nobodyHolder.Process.Pid) + "/fd/3"); !errors.Is(err, syscall.ENOTCONN) {
		t.Errorf("reading the holder's open file after umount --lazy: %v; want ENOTCONN (a dead mount, as umount said)", err)
	}
}

// TestUmountFromAShellInsideTheMount: `zerofs umount` run from a shell
// standing in the workspace (its default: the workspace around the current
// directory) is refused, naming that shell and saying to cd out, and the
// mount stays; from outside it then unmounts.
func TestUmountFromAShellInsideTheMount(t *testing.T) {
	ws := mountedWS(t)
	// "; true" keeps sh from exec-ing zerofs: sh is its parent.
	cmd := exec.Command("/bin/sh", "-c", binary+" umount; true")
	cmd.Dir = ws
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"zerofs: " + ws + " is busy: pid ", "(sh: working directory " + ws + ")", "is the shell this umount runs from: cd out of the mount first"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("umount from a shell in the mount lacks %q:\n%s", want, out)
		}
	}
	if _, ok := history.ReadStatus(ws); !ok {
		t.Fatalf("the refused umount left %s unmounted", ws)
	}
	binOK(t, "/", "umount", ws)
	if testsupport.FUSEMounted(ws) {
		t.Errorf("%s still mounted after umount from outside", ws)
	}
}

// TestUmountBusyControlMount: with --no-open, .zero is a mount of its own
// beneath the workspace's; a process standing in it holds the workspace
// busy too, and is named.
func TestUmountBusyControlMount(t *testing.T) {
	ws := mountedWS(t, "--no-open")
	ready := filepath.Join(t.TempDir(), "ready")
	h := holder(t, false, filepath.Join(ws, ".zero"), ready, "touch "+ready+"; exec sleep 300")
	r := bin(t, "/", "", "umount", ws)
	if want := "pid " + strconv.Itoa(h.Process.Pid) + " (sleep: working directory " + ws + "/.zero)"; r.code != 1 || !strings.Contains(r.stderr, want) {
		t.Fatalf("umount with a process in .zero: exit %d, stderr %q; want 1 naming %q", r.code, r.stderr, want)
	}
	if _, ok := history.ReadStatus(ws); !ok {
		t.Fatalf("the refused umount left %s unmounted", ws)
	}
}
