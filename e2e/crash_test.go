package e2e

import (
	"bytes"
	"errors"
	"fmt"
	"github.com/zerofs/zerofs/internal/testsupport"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// fgMount is a child `zerofs mount -f`, which a test may SIGKILL.
type fgMount struct {
	cmd    *exec.Cmd
	stderr bytes.Buffer
	exited chan struct{}
}

// mountForeground starts `zerofs mount -f flags ws` as a child and waits,
// polling, until .zero/status in the mount names the child's pid. Cleanup
// detaches the mount and kills the child if the test has not.
func mountForeground(t *testing.T, ws string, flags ...string) *fgMount {
	t.Helper()
	built.NeedFUSE(t)
	m := &fgMount{exited: make(chan struct{})}
	m.cmd = exec.Command(binary, append(append([]string{"mount", "-f"}, recordsFlags(flags)...), ws)...)
	m.cmd.Stdout, m.cmd.Stderr = &m.stderr, &m.stderr
	if err := m.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { m.cmd.Wait(); close(m.exited) }()
	t.Cleanup(func() {
		if testsupport.FUSEMounted(ws) {
			testsupport.Detach(t, ws)
		}
		m.cmd.Process.Kill()
		<-m.exited
	})
	pid := m.cmd.Process.Pid
	err := testsupport.Poll(30*time.Second, func() bool {
		select {
		case <-m.exited:
			return true
		default:
		}
		b, err := os.ReadFile(filepath.Join(ws, ".zero/status"))
		return err == nil && bytes.Contains(b, []byte(fmt.Sprintf(`"pid":%d,`, pid)))
	})
	select {
	case <-m.exited:
		t.Fatalf("zerofs mount -f %s exited: %s", ws, m.stderr.String())
	default:
	}
	if err != nil {
		t.Fatalf("zerofs mount -f %s: not ready after 30 s: %s", ws, m.stderr.String())
	}
	return m
}

// crash SIGKILLs the daemon, waits for it to be gone (exited and reaped,
// within killedGoneTimeout: waitKilledGone) and detaches its dead mount,
// as an admin would with umount -l. It returns how long the daemon took
// to go.
func (m *fgMount) crash(t *testing.T, ws string) time.Duration {
	t.Helper()
	start := time.Now()
	m.cmd.Process.Signal(syscall.SIGKILL)
	waitKilledGone(t, m, ws)
	took := time.Since(start)
	testsupport.Detach(t, ws)
	return took
}

// TestCrashKeepsBeforeStates: with --sync always, SIGKILL the daemon just
// after a change went through the mount, or while a loop of writes runs,
// then remount: the log parses with sequences 1..n, and @T (T = the step
// the changes belong to) shows every file's before-state, whether or not
// its change reached the workspace. Ten rounds, the kill a little later in
// each.
func TestCrashKeepsBeforeStates(t *testing.T) {
	built.NeedFUSE(t)
	ws := filepath.Join(t.TempDir(), "ws")
	os.Mkdir(ws, 0o755)
	const files = 12
	name := func(i int) string { return fmt.Sprintf("f%02d", i) }
	for i := range files {
		writeFile(t, filepath.Join(ws, name(i)), "initial "+name(i)+"\n", 0o644)
	}

	type expect struct {
		T      int64
		before map[string]*string // nil: absent
	}
	var prev *expect
	check := func(round int) {
		t.Helper()
		evs := readLog(t, filepath.Join(ws, ".zero/log"))
		if prev == nil {
			return
		}
		if int64(len(evs)) < prev.T {
			t.Fatalf("round %d: the log has %d events, but step %d was acknowledged", round, len(evs), prev.T)
		}
		for f, want := range prev.before {
			got, err := os.ReadFile(filepath.Join(view(ws, prev.T), f))
			switch {
			case want == nil && !errors.Is(err, os.ErrNotExist):
				t.Errorf("round %d: @%d/%s: got %q (%v), want it absent", round, prev.T, f, got, err)
			case want != nil && (err != nil || string(got) != *want):
				t.Errorf("round %d: @%d/%s: got %q (%v), want the before-state %q", round, prev.T, f, got, err, *want)
			}
		}
	}

	for round := range 10 {
		m := mountForeground(t, ws, "--sync", "always")
		check(round)
		T := step(t, ws, fmt.Sprintf("round %d", round))
		e := &expect{T: T, before: map[string]*string{}}
		for i := range files {
			b := readFile(t, filepath.Join(ws, name(i)))
			e.before[name(i)] = &b
		}
		newFile := fmt.Sprintf("new%d", round)
		e.before[newFile] = nil
		content := func(f string) []byte { return []byte(fmt.Sprintf("round %d wrote %s\n", round, f)) }

		if round%2 == 0 {
			// Kill right after one write returned: its capture must be
			// in the store already.
			f := name(round % files)
			if err := os.WriteFile(filepath.Join(ws, f), content(f), 0o644); err != nil {
				t.Fatalf("round %d: write %s: %v", round, f, err)
			}
			m.crash(t, ws)
		} else {
			// Kill during a loop of writes, after round/2+1 of them: the
			// write in flight may or may not have reached the workspace.
			progress := make(chan int, files+1)
			stopped := make(chan error, 1)
			go func() {
				targets := []string{newFile}
				for i := range files {
					targets = append(targets, name(i))
				}
				for n, f := range targets {
					if err := os.WriteFile(filepath.Join(ws, f), content(f), 0o644); err != nil {
						stopped <- err
						return
					}
					progress <- n + 1
				}
				stopped <- nil
			}()
			for n := 0; n < round/2+1; n = <-progress {
			}
			m.cmd.Process.Signal(syscall.SIGKILL)
			// The writer must stop before the mount is detached: after
			// that its writes would reach the bare workspace.
			if err := <-stopped; err == nil {
				t.Logf("round %d: the writer finished before the kill landed", round)
			}
			m.crash(t, ws)
		}
		changed := 0
		for f, b := range e.before {
			now, err := os.ReadFile(filepath.Join(ws, f))
			if (b == nil) != (err != nil) || b != nil && string(now) != *b {
				changed++
			}
		}
		t.Logf("round %d: step %d, %d files changed before the kill", round, T, changed)
		if changed == 0 {
			t.Errorf("round %d: no change reached the workspace before the kill", round)
		}
		prev = e
	}
	mountForeground(t, ws, "--sync", "always")
	check(10)
	zerofsOK(t, "/", "umount", ws)
	if out, err := zerofs(t, ws, "verify"); err != nil {
		t.Errorf("zerofs verify after the crashes: %v\n%s", err, out)
	}
}
