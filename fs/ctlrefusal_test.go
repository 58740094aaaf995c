package fs

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/zerofs/zerofs/control"
	"github.com/zerofs/zerofs/record"
)

// ctlRefused writes req to the control file name through one handle open
// for reading and writing, wants the write (or, for a step, the close of a
// duplicate: the request runs then) to fail with errno, and returns the
// refusal read back from the same handle.
func ctlRefused(t *testing.T, mp, name, req string, errno syscall.Errno) control.Refusal {
	t.Helper()
	f, err := os.OpenFile(filepath.Join(mp, ".zero", name), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	_, err = f.Write([]byte(req))
	if err == nil && name == control.Step {
		fd, derr := syscall.Dup(int(f.Fd()))
		if derr != nil {
			t.Fatal(derr)
		}
		err = syscall.Close(fd)
	}
	if !errors.Is(err, errno) {
		t.Fatalf("%s %q: got %v, want %v", name, req, err, errno)
	}
	b := make([]byte, 1<<16)
	n, _ := f.ReadAt(b, 0)
	var r control.Refusal
	if err := json.Unmarshal(b[:n], &r); err != nil || r.Error == "" {
		t.Fatalf("%s %q: no refusal read back: %q (%v)", name, req, b[:n], err)
	}
	return r
}

// TestCtlRefusals: every refusal of .zero/rewind, .zero/gc and .zero/step
// on a real mount reads back, on the handle that wrote the request, as a
// typed refusal with its details; the errnos are those the requests always
// had.
func TestCtlRefusals(t *testing.T) {
	m := mountT(t, Options{})
	mp := m.Mountpoint()
	at := func(p string) string { return filepath.Join(mp, p) }
	seq := func(s record.Seq) string { return strconv.FormatUint(uint64(s), 10) }
	want := func(r control.Refusal, name string) {
		t.Helper()
		if r.Error != name || r.Message == "" {
			t.Fatalf("refusal %+v, want %s with a message", r, name)
		}
	}
	want(ctlRefused(t, mp, "rewind", `{"undo": true}`+"\n", syscall.ENOENT), "nothing-to-undo")
	want(ctlRefused(t, mp, "rewind", `{"redo": true}`+"\n", syscall.ENOENT), "nothing-to-redo")
	want(ctlRefused(t, mp, "rewind", "abc\n", syscall.EINVAL), "bad-request")
	want(ctlRefused(t, mp, "rewind", `{"undo": true, "target": 1}`+"\n", syscall.EINVAL), "bad-request")
	want(ctlRefused(t, mp, "gc", "-1\n", syscall.EINVAL), "bad-request")

	s1 := stepT(t, mp, "one")
	writeFile(t, at("a"), "1")
	stepT(t, mp, "two")
	writeFile(t, at("b"), "2")
	stepT(t, mp, "three")
	writeFile(t, at("a"), "3")
	head := headOf(t, mp)

	r := ctlRefused(t, mp, "rewind", "999\n", syscall.EINVAL)
	want(r, "no-such-seq")
	if r.Requested != 999 || r.Head != head {
		t.Fatalf("no-such-seq details: %+v (head %d)", r, head)
	}
	want(ctlRefused(t, mp, "rewind", `{"revert": 999}`+"\n", syscall.EINVAL), "no-such-seq")
	want(ctlRefused(t, mp, "gc", "999\n", syscall.EINVAL), "no-such-seq")

	// A revert over a later change: the conflicts, in the rewind report.
	rep, err := ctlRequest(t, mp, `{"revert": `+seq(s1)+`}`)
	if !errors.Is(err, syscall.EBUSY) || rep.Error != control.ErrorConflict || strings.Join(rep.Conflicts, ",") != "a" {
		t.Fatalf("conflict: %+v, %v", rep, err)
	}

	// Pruned: a rewind below the cut, and an undo whose state went.
	if _, err := ctlRequestRaw(t, mp, "gc", seq(s1+2)+"\n"); err != nil {
		t.Fatal(err)
	}
	r = ctlRefused(t, mp, "rewind", seq(s1)+"\n", syscall.EINVAL)
	want(r, "pruned")
	if r.Requested != s1 || r.PrunedBefore != s1+2 {
		t.Fatalf("pruned details: %+v", r)
	}
	for range 2 {
		if _, err := ctlRequest(t, mp, `{"undo": true}`); err != nil {
			t.Fatal(err)
		}
	}
	r = ctlRefused(t, mp, "rewind", `{"undo": true}`+"\n", syscall.EINVAL)
	want(r, "pruned")
	if r.Op != "undo" || r.Step == nil || r.Step.Sequence != s1 || r.Step.Label != "one" {
		t.Fatalf("undo of a pruned step: %+v", r)
	}

	// A step label over 1 MiB: refused whole.
	want(ctlRefused(t, mp, "step", strings.Repeat("x", control.MaxRequest+1), syscall.EINVAL), "bad-request")
}
