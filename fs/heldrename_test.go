package fs

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/zerofs/zerofs/record"
)

// TestHeldOpenAcrossDirRename: a file held open for writing across the
// rename of its directory keeps being its file under the new name, as
// natively. Its writes after the rename land in dst/f, each step's view
// shows it under the name it had then (src/f before the rename, dst/f
// after) with the content it had at that step's start, and a rewind to
// before the rename puts back src/f as it was, while the held descriptor
// keeps the file it opened (as across any rewind: it reads it, and its
// writes go nowhere visible). With and without passthrough and OPEN, with
// and without rename records; with records the rename stays one record.
// When written before the mv in the same step, the file is captured under
// its old name there, and its write after the mv captures nothing more.
func TestHeldOpenAcrossDirRename(t *testing.T) {
	for _, mode := range []struct {
		name string
		opts Options
	}{
		{"passthrough", Options{}},
		{"no-passthrough", Options{NoPassthrough: true}},
		{"no-open", Options{NoOpen: true}},
	} {
		for _, records := range []bool{true, false} {
			for _, early := range []bool{false, true} {
				t.Run(fmt.Sprintf("%s/records=%v/written-before-mv=%v", mode.name, records, early), func(t *testing.T) {
					m := mountEnvT(t, mode.opts, !records)
					if mode.name == "passthrough" && !m.Passthrough() && !m.fs.noOpen {
						t.Skip("FUSE passthrough is not available here (kernel 6.9+ and root needed)")
					}
					heldAcrossDirRename(t, m, records, early)
				})
			}
		}
	}
}

func heldAcrossDirRename(t *testing.T, m *Mounted, records, early bool) {
	mp := m.Mountpoint()
	src, dst := filepath.Join(mp, "src"), filepath.Join(mp, "dst")
	if err := os.Mkdir(src, 0o755); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(filepath.Join(src, "f"), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString("A"); err != nil {
		t.Fatal(err)
	}
	t1 := stepT(t, mp, "mv")
	if early {
		if _, err := f.WriteAt([]byte("A"), 0); err != nil {
			t.Fatal(err)
		}
	}
	before := m.Engine().Head() // past t1 when the boundary captured src/f
	if err := os.Rename(src, dst); err != nil {
		t.Fatal(err)
	}
	after := m.Engine().Head()
	checkRenameEvents(t, m, before, after, records)
	if _, err := f.WriteString("B"); err != nil {
		t.Fatal(err)
	}
	t2 := stepT(t, mp, "two")
	if _, err := f.WriteString("C"); err != nil {
		t.Fatal(err)
	}
	t3 := stepT(t, mp, "three")

	absent := func(p string) {
		t.Helper()
		if _, err := os.Lstat(p); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s exists (%v), want it absent", p, err)
		}
	}
	if got := readFile(t, filepath.Join(dst, "f")); got != "ABC" {
		t.Errorf("dst/f = %q, want ABC", got)
	}
	absent(src)
	for _, c := range []struct {
		at       record.Seq
		rel, has string
		gone     string
	}{
		{t1, "src/f", "A", "dst"},
		{t2, "dst/f", "AB", "src"},
		{t3, "dst/f", "ABC", "src"},
	} {
		if got := readFile(t, filepath.Join(view(mp, c.at), c.rel)); got != c.has {
			t.Errorf("@%d/%s = %q, want %q", c.at, c.rel, got, c.has)
		}
		absent(filepath.Join(view(mp, c.at), c.gone))
	}

	rewindT(t, mp, t1)
	if got := readFile(t, filepath.Join(src, "f")); got != "A" {
		t.Errorf("after the rewind to %d, src/f = %q, want A", t1, got)
	}
	absent(dst)
	// The held descriptor keeps the file it opened: it reads what it
	// wrote, and its writes go nowhere visible.
	buf := make([]byte, 8)
	if k, err := f.ReadAt(buf, 0); string(buf[:k]) != "ABC" {
		t.Errorf("the held descriptor reads %q (%v) after the rewind, want ABC", buf[:k], err)
	}
	if _, err := f.WriteAt([]byte("XYZW"), 0); err != nil {
		t.Fatalf("write through the held descriptor after the rewind: %v", err)
	}
	if k, err := f.ReadAt(buf, 0); string(buf[:k]) != "XYZW" {
		t.Errorf("the held descriptor reads back %q (%v), want XYZW", buf[:k], err)
	}
	if got := readFile(t, filepath.Join(src, "f")); got != "A" {
		t.Errorf("src/f after a write through the held descriptor = %q, want A", got)
	}
	absent(dst)
	if got := readFile(t, filepath.Join(view(mp, t3), "dst", "f")); got != "ABC" {
		t.Errorf("after the rewind, @%d/dst/f = %q, want ABC", t3, got)
	}
}

// checkRenameEvents checks the events the rename of src to dst appended
// (after before, up to after): with rename records one checkpoint, the
// record; without, captures and no record.
func checkRenameEvents(t *testing.T, m *Mounted, before, after record.Seq, records bool) {
	t.Helper()
	if records && after != before+1 {
		t.Fatalf("head %d after the mv, want one record after %d", after, before)
	}
	if after <= before {
		t.Fatalf("head %d after the mv, want past %d", after, before)
	}
	var recorded bool
	for ev, err := range m.Engine().Log().Events(before + 1) {
		if err != nil {
			t.Fatal(err)
		}
		if ev.Seq > after {
			break
		}
		if ev.Type != record.TypeCheckpoint {
			t.Fatalf("event %d after the mv is %s, want a checkpoint", ev.Seq, ev.Type)
		}
		var cp record.Checkpoint
		if err := json.Unmarshal(ev.Payload, &cp); err != nil {
			t.Fatal(err)
		}
		for _, fs := range cp.Files {
			if fs.RenamedTo == "dst" && fs.Path == "src" {
				recorded = true
			}
		}
	}
	if recorded != records {
		t.Fatalf("a rename record src -> dst in %d..%d: %v, want %v", before+1, after, recorded, records)
	}
}
