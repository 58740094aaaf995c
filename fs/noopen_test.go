package fs

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestNoOpenSendsNoOpen: on a mount without OPEN (noopen.go) reading a tree
// costs the daemon no request per file once the pages are cached: at most
// one OPEN in all (the one answered ENOSYS), no FLUSH but the first, and
// no READ on the second pass. Writes through a descriptor the daemon never
// saw opened land in the file.
func TestNoOpenSendsNoOpen(t *testing.T) {
	ws := t.TempDir()
	const files = 40
	for i := range files {
		writeFile(t, filepath.Join(ws, fmt.Sprint(i)), strings.Repeat("x", i+1))
	}
	m := mountT(t, Options{Workspace: ws, NoOpen: true})
	mp := m.Mountpoint()
	if m.Passthrough() {
		t.Fatal("passthrough on a mount without OPEN")
	}
	read := func() {
		for i := range files {
			if got := readFile(t, filepath.Join(mp, fmt.Sprint(i))); len(got) != i+1 {
				t.Fatalf("%d: read %d bytes, want %d", i, len(got), i+1)
			}
		}
	}
	read()
	served := m.fs.served.Load()
	read()
	if got := m.fs.served.Load() - served; got != 0 {
		t.Errorf("the second pass sent %d READs, want 0 (pages kept)", got)
	}
	if got := m.fs.opens.Load(); got > 1 {
		t.Errorf("%d OPEN requests, want at most the first", got)
	}
	if got := m.fs.flushed.Load(); got > 1 {
		t.Errorf("%d FLUSH requests, want at most the first", got)
	}

	f, err := os.OpenFile(filepath.Join(mp, "0"), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString("yz"); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{filepath.Join(mp, "0"), filepath.Join(ws, "0")} {
		if got := readFile(t, p); got != "xyz" {
			t.Errorf("%s = %q, want xyz", p, got)
		}
	}
	if got := m.fs.opens.Load(); got > 1 {
		t.Errorf("%d OPEN requests after a write, want at most the first", got)
	}
}

// TestNoOpenHeldWriterAcrossStep: a file held open for writing across a
// step boundary (a step, and a rewind that changes nothing) is captured
// again in the new step at its first write there, though the daemon never
// saw it opened: each view shows the state at its step's start.
func TestNoOpenHeldWriterAcrossStep(t *testing.T) {
	m := mountT(t, Options{NoOpen: true})
	mp := m.Mountpoint()
	f, err := os.OpenFile(filepath.Join(mp, "held"), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	// A second descriptor, opened without CREATE, writes with no handle.
	g, err := os.OpenFile(filepath.Join(mp, "held"), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	t1, t2 := writeAcrossBoundaries(t, mp, f, g)
	got1 := readFile(t, filepath.Join(view(mp, t1), "held"))
	got2 := readFile(t, filepath.Join(view(mp, t2), "held"))
	if got1 != "A" || got2 != "AB" {
		t.Fatalf("@%d/held = %q, @%d/held = %q; want A and AB", t1, got1, t2, got2)
	}
}

// TestNoOpenControlMount: .zero is a FUSE mount of its own over the
// workspace mount (ctlmount.go), and unmounting takes both.
func TestNoOpenControlMount(t *testing.T) {
	m := mountT(t, Options{NoOpen: true})
	mp := m.Mountpoint()
	ctl := filepath.Join(mp, ".zero")
	if !isMounted(ctl) {
		t.Fatalf("nothing mounted at %s", ctl)
	}
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), " "+ctl+" ") || !strings.Contains(string(b), "fuse."+ctlFsName) {
		t.Errorf("mountinfo has no fuse.%s at %s", ctlFsName, ctl)
	}
	stepT(t, mp, "works")
	unmountT(t, m)
	if isMounted(ctl) || isMounted(mp) {
		t.Errorf("still mounted after Unmount: %s %v, %s %v", ctl, isMounted(ctl), mp, isMounted(mp))
	}
}

// TestNoOpenDescriptorAcrossRewind: a descriptor whose file the daemon
// read or wrote before a rewind replaced it keeps reading that file, with
// its size, as natively (the node kept its descriptor). One whose file the
// daemon never read or wrote (only truncated, by path) cannot reach the
// replaced file any more and fails with ESTALE rather than read the new
// one. The path gives the rewound content.
func TestNoOpenDescriptorAcrossRewind(t *testing.T) {
	ws := t.TempDir()
	for _, n := range []string{"used", "unused"} {
		writeFile(t, filepath.Join(ws, n), "old")
	}
	m := mountT(t, Options{Workspace: ws, NoOpen: true})
	mp := m.Mountpoint()
	T := stepT(t, mp, "edit")
	writeFile(t, filepath.Join(mp, "used"), "new content")
	if err := os.Truncate(filepath.Join(mp, "unused"), 1); err != nil {
		t.Fatal(err)
	}
	used, err := os.Open(filepath.Join(mp, "used"))
	if err != nil {
		t.Fatal(err)
	}
	defer used.Close()
	unused, err := os.Open(filepath.Join(mp, "unused"))
	if err != nil {
		t.Fatal(err)
	}
	defer unused.Close()
	rewindT(t, mp, T)
	buf := make([]byte, 64)
	if k, err := used.ReadAt(buf, 0); string(buf[:k]) != "new content" {
		t.Errorf("the used descriptor reads %q, %v after the rewind; want the file it opened", buf[:k], err)
	}
	if k, err := unused.ReadAt(buf, 0); !errors.Is(err, syscall.ESTALE) {
		t.Errorf("the unused descriptor reads %q, %v after the rewind; want ESTALE", buf[:k], err)
	}
	for n, want := range map[string]string{"used": "old", "unused": "old"} {
		if got := readFile(t, filepath.Join(mp, n)); got != want {
			t.Errorf("%s = %q after the rewind, want %q", n, got, want)
		}
	}
}

// TestNoOpenUnlinkedWhileOpen: a file removed while a process holds it
// open (the daemon never saw the open) is still read, written and
// fstat'ed through the descriptor, with no links, as natively, though the
// store keeps its inode linked for the removal's before-state.
func TestNoOpenUnlinkedWhileOpen(t *testing.T) {
	m := mountT(t, Options{NoOpen: true})
	mp := m.Mountpoint()
	p := filepath.Join(mp, "f")
	writeFile(t, p, "before")
	stepT(t, mp, "rm")
	f, err := os.OpenFile(p, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := os.Remove(p); err != nil {
		t.Fatal(err)
	}
	var st syscall.Stat_t
	if err := syscall.Fstat(int(f.Fd()), &st); err != nil || st.Nlink != 0 {
		t.Errorf("fstat after the unlink: %d links, %v; want 0", st.Nlink, err)
	}
	if _, err := f.WriteAt([]byte("after"), 0); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 16)
	if k, err := f.ReadAt(buf, 0); string(buf[:k]) != "aftere" {
		t.Errorf("read back %q, %v; want aftere", buf[:k], err)
	}
	if err := syscall.Fstat(int(f.Fd()), &st); err != nil || st.Nlink != 0 || st.Size != 6 {
		t.Errorf("fstat after the write: %d links, %d bytes, %v; want 0 and 6", st.Nlink, st.Size, err)
	}
}
