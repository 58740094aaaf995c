package e2e

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// TestStepFlushesMmapWrites (issue 27, section 4): pages a shared writable
// mapping dirtied before a step began reached the daemon only after it
// (at the next writeback, msync or munmap), so they were captured as the
// new step's before-state: @T and rewind T missed them (AAAA where BAAA was
// written before T). A step boundary flushes dirty pages first, with and
// without OPEN.
func TestStepFlushesMmapWrites(t *testing.T) {
	for _, mode := range []struct {
		name  string
		flags []string
	}{{"open", nil}, {"no-open", []string{"--no-open"}}} {
		t.Run(mode.name, func(t *testing.T) {
			ws := filepath.Join(t.TempDir(), "ws")
			if err := os.Mkdir(ws, 0o755); err != nil {
				t.Fatal(err)
			}
			mountWS(t, ws, mode.flags...)
			p := filepath.Join(ws, "f")
			writeFile(t, p, "AAAA", 0o644)
			f, err := os.OpenFile(p, os.O_RDWR, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			m, err := unix.Mmap(int(f.Fd()), 0, 4, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
			if err != nil {
				t.Fatal(err)
			}
			defer unix.Munmap(m)
			m[0] = 'B' // BAAA, dirty in the page cache
			// The step is begun without a fork: a fork of the process that
			// maps the file writes its dirty pages back.
			if err := os.WriteFile(filepath.Join(ws, ".zero", "step"), []byte("after the mmap write\n"), 0); err != nil {
				t.Fatal(err)
			}
			b, err := os.ReadFile(filepath.Join(ws, ".zero", "step"))
			if err != nil {
				t.Fatal(err)
			}
			seq, _, _ := strings.Cut(string(b), " ")
			s, err := strconv.ParseInt(seq, 10, 64)
			if err != nil {
				t.Fatalf(".zero/step: %q", b)
			}
			m[1] = 'C' // BCAA, in the new step
			if err := unix.Msync(m, unix.MS_SYNC); err != nil {
				t.Fatal(err)
			}
			zerofsOK(t, ws, "step", "later")
			if b, err := os.ReadFile(filepath.Join(view(ws, s), "f")); err != nil || string(b) != "BAAA" {
				t.Errorf("@%d/f = %q, %v; want BAAA (written before the step)", s, b, err)
			}
			if err := unix.Munmap(m); err != nil {
				t.Fatal(err)
			}
			m = nil
			f.Close()
			zerofsOK(t, ws, "rewind", itoa(s))
			if b, err := os.ReadFile(p); err != nil || string(b) != "BAAA" {
				t.Errorf("f after rewind %d = %q, %v; want BAAA", s, b, err)
			}
		})
	}
}
