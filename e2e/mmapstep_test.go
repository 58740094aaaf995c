package e2e

import (
	"fmt"
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
// written before T). A step boundary flushes dirty pages first, and waits
// for the daemon to have them, with and without OPEN. Ten rounds each: the
// kernel's writeback also sends them by itself, at times in time.
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
			const rounds = 10
			var steps [rounds]int64
			for i := range rounds {
				steps[i] = mmapRound(t, ws, fmt.Sprintf("f%d", i))
			}
			zerofsOK(t, ws, "step", "later")
			for i, s := range steps {
				if b, err := os.ReadFile(filepath.Join(view(ws, s), fmt.Sprintf("f%d", i))); err != nil || string(b) != "BAAA" {
					t.Errorf("@%d/f%d = %q, %v; want BAAA (written before the step)", s, i, b, err)
				}
			}
			zerofsOK(t, ws, "rewind", itoa(steps[0]))
			if b, err := os.ReadFile(filepath.Join(ws, "f0")); err != nil || string(b) != "BAAA" {
				t.Errorf("f0 after rewind %d = %q, %v; want BAAA", steps[0], b, err)
			}
		})
	}
}

// mmapRound writes AAAA to name, maps it, writes B through the mapping,
// begins a step (returned) without a fork (a fork of the process that maps
// the file writes its dirty pages back), then writes C through the mapping
// and syncs and unmaps it.
func mmapRound(t *testing.T, ws, name string) int64 {
	t.Helper()
	p := filepath.Join(ws, name)
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
	label := "after the mmap write to " + name
	if err := os.WriteFile(filepath.Join(ws, ".zero", "step"), []byte(label+"\n"), 0); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(ws, ".zero", "step"))
	if err != nil {
		t.Fatal(err)
	}
	seq, got, _ := strings.Cut(strings.TrimSpace(string(b)), " ")
	s, err := strconv.ParseInt(seq, 10, 64)
	if err != nil || got != label {
		t.Fatalf(".zero/step: %q, want %q", b, label)
	}
	m[1] = 'C' // BCAA, in the new step
	if err := unix.Msync(m, unix.MS_SYNC); err != nil {
		t.Fatal(err)
	}
	return s
}
