package fs

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"golang.org/x/sys/unix"

	"github.com/zerofs/zerofs/eventlog"

	"github.com/zerofs/zerofs/internal/testsupport"
)

// TestRemountKeepsHistory: unmount and mount the same store again; every
// view and the head survive.
func TestRemountKeepsHistory(t *testing.T) {
	ws := t.TempDir()
	m := mountT(t, Options{Workspace: ws})
	mp := m.Mountpoint()
	writeFile(t, filepath.Join(mp, "f"), "one")
	t1 := stepT(t, mp, "two")
	writeFile(t, filepath.Join(mp, "f"), "two")
	h := headOf(t, mp)
	if err := m.Unmount(); err != nil {
		t.Fatalf("Unmount: %v", err)
	}
	if isMounted(mp) {
		t.Fatalf("%s still mounted after Unmount", mp)
	}
	m.Wait() // returns at once after Unmount

	m2 := mountT(t, Options{Workspace: ws, Mountpoint: mp})
	if got := headOf(t, m2.Mountpoint()); got < h {
		t.Errorf("head after remount = %d, want >= %d", got, h)
	}
	if got := readFile(t, filepath.Join(view(mp, t1), "f")); got != "one" {
		t.Errorf("@%d/f after remount = %q, want one", t1, got)
	}
	if got := readFile(t, filepath.Join(mp, "f")); got != "two" {
		t.Errorf("f after remount = %q, want two", got)
	}
}

// TestInPlaceMount: mounting over the workspace itself works, and the store
// (under the workspace) is out of reach through the mount.
func TestInPlaceMount(t *testing.T) {
	requireFUSE(t)
	ws := t.TempDir()
	writeFile(t, filepath.Join(ws, "pre"), "existing")
	m, err := Mount(context.Background(), Options{Workspace: ws, Logger: testLogger(), SelfOpens: true})
	if err != nil {
		t.Fatalf("Mount in place: %v", err)
	}
	track(m)
	t.Cleanup(func() { unmountT(t, m) })
	if m.Mountpoint() != ws || !isMounted(ws) {
		t.Fatalf("mountpoint %q, mounted %v; want the workspace %q", m.Mountpoint(), isMounted(ws), ws)
	}
	if got := readFile(t, filepath.Join(ws, "pre")); got != "existing" {
		t.Errorf("pre = %q", got)
	}
	writeFile(t, filepath.Join(ws, "pre"), "changed")
	stepT(t, ws, "s")
	h := headOf(t, ws)
	writeFile(t, filepath.Join(ws, "new"), "new")
	if got := readFile(t, filepath.Join(view(ws, h), "pre")); got != "changed" {
		t.Errorf("@%d/pre = %q, want changed", h, got)
	}
	if got := readFile(t, filepath.Join(view(ws, 0), "pre")); got != "existing" {
		t.Errorf("@0/pre = %q, want existing", got)
	}
	for _, p := range []string{".zero/events.jsonl", ".zero/blobs"} {
		if _, err := os.Stat(filepath.Join(ws, p)); !os.IsNotExist(err) {
			t.Errorf("store file %s reachable through the mount: %v", p, err)
		}
	}
	rewindT(t, ws, 0)
	if _, err := os.Stat(filepath.Join(ws, "new")); !os.IsNotExist(err) {
		t.Errorf("new after rewind to 0: %v", err)
	}
	if got := readFile(t, filepath.Join(ws, "pre")); got != "existing" {
		t.Errorf("pre after rewind to 0 = %q", got)
	}
	if err := m.Unmount(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(ws, ".zero", "events.jsonl")); err != nil {
		t.Errorf("store after unmount: %v", err)
	}
}

// TestSecondMountOfStoreRefused: the store's lock refuses a second mount
// with a clear error.
func TestSecondMountOfStoreRefused(t *testing.T) {
	ws := t.TempDir()
	mountT(t, Options{Workspace: ws})
	m2, err := Mount(context.Background(), Options{Workspace: ws, Mountpoint: t.TempDir(), Logger: testLogger(), SelfOpens: true})
	if err == nil {
		track(m2)
		unmountT(t, m2)
		t.Fatal("second mount of the same store succeeded")
	}
	if !errors.Is(err, eventlog.ErrLocked) || !strings.Contains(err.Error(), "in use by another zerofs") {
		t.Errorf("second mount: %v; want ErrLocked, \"in use by another zerofs\"", err)
	}
}

// TestUnmountWhileBusy: a file left open does not keep Unmount from
// finishing (it detaches lazily and ends the connection).
func TestUnmountWhileBusy(t *testing.T) {
	m := mountT(t, Options{})
	f, err := os.Create(filepath.Join(m.Mountpoint(), "open"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	done := make(chan error, 1)
	go func() { done <- m.Unmount() }()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Unmount with a file open: %v", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("Unmount with a file open did not return")
	}
	if isMounted(m.Mountpoint()) {
		t.Errorf("still mounted")
	}
}

// TestViewFS runs testing/fstest on a view.
func TestViewFS(t *testing.T) {
	m := mountT(t, Options{})
	mp := m.Mountpoint()
	if err := os.MkdirAll(filepath.Join(mp, "src/pkg"), 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(mp, "src/pkg/a.go"), "package pkg\n")
	writeFile(t, filepath.Join(mp, "src/b.txt"), strings.Repeat("b", 100000))
	writeFile(t, filepath.Join(mp, "top"), "top")
	h := stepT(t, mp, "change")
	writeFile(t, filepath.Join(mp, "src/pkg/a.go"), "package changed\n")
	if err := os.RemoveAll(filepath.Join(mp, "src")); err != nil {
		t.Fatal(err)
	}
	if err := fstest.TestFS(os.DirFS(view(mp, h)), "src/pkg/a.go", "src/b.txt", "top"); err != nil {
		t.Error(err)
	}
}

// TestExternalUnmount: Wait returns when someone else unmounts (umount(8)),
// and the store is released.
func TestExternalUnmount(t *testing.T) {
	ws := t.TempDir()
	m := mountT(t, Options{Workspace: ws})
	if m.fs.noOpen {
		// The control directory is a mount inside it (ctlmount.go).
		if err := unix.Unmount(filepath.Join(m.Mountpoint(), ".zero"), 0); err != nil {
			t.Fatalf("umount .zero: %v", err)
		}
	}
	if err := unix.Unmount(m.Mountpoint(), 0); err != nil {
		t.Fatalf("umount: %v", err)
	}
	waitT(t, m)
	m2 := mountT(t, Options{Workspace: ws})
	writeFile(t, filepath.Join(m2.Mountpoint(), "f"), "after")
}

// TestDeadMountDetached: a mount whose daemon is gone (ENOTCONN) is
// detached and replaced.
func TestDeadMountDetached(t *testing.T) {
	ws := t.TempDir()
	m := mountT(t, Options{Workspace: ws})
	mp := m.Mountpoint()
	var st unix.Stat_t
	if err := unix.Stat(mp, &st); err != nil {
		t.Fatal(err)
	}
	abortConnection(st.Dev, testLogger())
	waitT(t, m)
	var sfs unix.Statfs_t
	if err := unix.Statfs(mp, &sfs); err != unix.ENOTCONN {
		t.Fatalf("statfs of an aborted mount: %v, want ENOTCONN", err)
	}
	m2 := mountT(t, Options{Workspace: ws, Mountpoint: mp})
	writeFile(t, filepath.Join(m2.Mountpoint(), "f"), "alive")
	if got := readFile(t, filepath.Join(ws, "f")); got != "alive" {
		t.Errorf("backing f = %q", got)
	}
}

func waitT(t *testing.T, m *Mounted) {
	t.Helper()
	done := make(chan struct{})
	go func() { m.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Wait did not return after the mount went away")
	}
}

// deadMount stacks a dead FUSE mount at dir, as a killed zerofs leaves
// one: its daemon side is closed, so every request fails with ENOTCONN.
func deadMount(t *testing.T, dir string) {
	t.Helper()
	fd, err := unix.Open("/dev/fuse", unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	opts := fmt.Sprintf("fd=%d,rootmode=40000,user_id=0,group_id=0", fd)
	err = unix.Mount("zerofs", dir, "fuse.zerofs", unix.MS_NOSUID|unix.MS_NODEV, opts)
	unix.Close(fd)
	if err != nil {
		t.Fatalf("mount a dead FUSE mount at %s: %v", dir, err)
	}
	t.Cleanup(func() {
		for range 16 {
			if unix.Unmount(dir, unix.MNT_DETACH) != nil {
				return
			}
		}
	})
}

// Two killed daemons left two dead mounts stacked at the mountpoint: Mount
// detaches both and mounts in their place, never over them.
func TestMountReplacesStackedDeadMounts(t *testing.T) {
	requireFUSE(t)
	mp := t.TempDir()
	deadMount(t, mp)
	deadMount(t, mp)
	m := mountT(t, Options{Mountpoint: mp})
	if n := len(testsupport.MountsAt(mp)); n != 1 {
		t.Fatalf("%d mounts at %s, want the new one only", n, mp)
	}
	if _, err := os.ReadDir(m.Mountpoint()); err != nil {
		t.Fatalf("the new mount: %v", err)
	}
}
