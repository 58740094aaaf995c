package fs

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/zerofs/zerofs/record"
)

// countEvents counts the events of type typ in .zero/log.
func countEvents(t *testing.T, mp, typ string) int {
	t.Helper()
	n := 0
	for _, line := range strings.Split(strings.TrimSpace(ctlRead(t, mp, "log")), "\n") {
		var ev struct{ Type string }
		if json.Unmarshal([]byte(line), &ev) == nil && ev.Type == typ {
			n++
		}
	}
	return n
}

// writeChunks writes data to .zero/name through one open file in chunks of
// size bytes, one write(2) each, and returns the first write's error and
// close's error.
func writeChunks(t *testing.T, mp, name string, data []byte, size int) (werr, cerr error) {
	t.Helper()
	f, err := os.OpenFile(filepath.Join(mp, ".zero", name), os.O_WRONLY|os.O_TRUNC, 0)
	if err != nil {
		t.Fatal(err)
	}
	for len(data) > 0 && werr == nil {
		n := min(size, len(data))
		_, werr = f.Write(data[:n])
		data = data[n:]
	}
	return werr, f.Close()
}

// A label over ~1 MB written to .zero/step became several steps and lost
// its name. Everything written through one open file, up to 1 MiB, is one
// label, however many write calls carry it; more is EINVAL and nothing is
// recorded.
func TestStepLabelOverManyWritesIsOneLabel(t *testing.T) {
	m := mountT(t, Options{})
	mp := m.Mountpoint()
	label := strings.Repeat("0123456789abcdef", (maxRequest-1)/16) // just under 1 MiB with the newline
	steps := countEvents(t, mp, "tool_call")
	if werr, cerr := writeChunks(t, mp, "step", []byte(label+"\n"), 4096); werr != nil || cerr != nil {
		t.Fatalf("writing a %d-byte label in 4 KiB writes: write %v, close %v", len(label)+1, werr, cerr)
	}
	if got := countEvents(t, mp, "tool_call"); got != steps+1 {
		t.Fatalf("a label in %d writes made %d steps, want 1", len(label)/4096+1, got-steps)
	}
	got := strings.TrimSuffix(ctlRead(t, mp, "step"), "\n")
	if _, l, _ := strings.Cut(got, " "); l != label {
		t.Fatalf(".zero/step has a label of %d bytes, want the whole %d-byte label", len(l), len(label))
	}

	// Over 1 MiB: EINVAL, and no step at all, not even at close.
	head := headOf(t, mp)
	werr, cerr := writeChunks(t, mp, "step", []byte(strings.Repeat("x", maxRequest+1)), 64<<10)
	wantErrno(t, "write of a label over 1 MiB", werr, syscall.EINVAL)
	if cerr != nil {
		t.Errorf("close after a refused label: %v", cerr)
	}
	if h := headOf(t, mp); h != head {
		t.Fatalf("a label over 1 MiB recorded something: head %d -> %d", head, h)
	}
}

// Two writes on one descriptor to .zero/rewind were two rewinds. Everything
// written through one open file is one request: the write that completes it
// (a line) carries it out and returns when the rewind is done; a later
// write fails with EINVAL and changes nothing. A request without a newline
// is carried out at close, which returns its error.
func TestRewindOneRequestPerOpenFile(t *testing.T) {
	m := mountT(t, Options{})
	mp := m.Mountpoint()
	var at []record.Seq // the step at which f held "v<i>"
	for i := range 12 {
		stepT(t, mp, "s"+strconv.Itoa(i))
		at = append(at, stepSeqOf(t, mp))
		writeFile(t, filepath.Join(mp, "f"), "v"+strconv.Itoa(i))
	}
	if at[11] < 10 {
		t.Fatalf("history too short: %v", at)
	}
	rewinds := func() int { return countEvents(t, mp, "session_rewind") }

	// Two lines through one descriptor: one rewind, the second write EINVAL.
	f, err := os.OpenFile(filepath.Join(mp, ".zero", "rewind"), os.O_WRONLY|os.O_TRUNC, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write([]byte(strconv.FormatUint(uint64(at[5]), 10) + "\n")); err != nil {
		t.Fatalf("first write: %v", err)
	}
	if got := readFile(t, filepath.Join(mp, "f")); got != "v4" {
		t.Fatalf("after the write returned, f = %q, want v4 (the rewind is done when the write returns)", got)
	}
	_, err = f.Write([]byte(strconv.FormatUint(uint64(at[2]), 10) + "\n"))
	wantErrno(t, "second write on the same descriptor", err, syscall.EINVAL)
	if err := f.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	if n := rewinds(); n != 1 {
		t.Fatalf("two writes on one descriptor made %d rewinds, want 1", n)
	}
	if got := readFile(t, filepath.Join(mp, "f")); got != "v4" {
		t.Fatalf("f = %q, want v4", got)
	}

	// One number split over two writes is one request.
	seq := strconv.FormatUint(uint64(at[10]), 10)
	if len(seq) < 2 {
		t.Fatalf("want a sequence of two digits, got %s", seq)
	}
	if werr, cerr := writeChunks(t, mp, "rewind", []byte(seq+"\n"), 1); werr != nil || cerr != nil {
		t.Fatalf("a sequence written a byte at a time: write %v, close %v", werr, cerr)
	}
	if got := readFile(t, filepath.Join(mp, "f")); got != "v9" {
		t.Fatalf("after rewinding to %s written a byte at a time, f = %q, want v9", seq, got)
	}
	if n := rewinds(); n != 2 {
		t.Fatalf("%d rewinds, want 2", n)
	}

	// Without a newline (printf): carried out at close.
	if werr, cerr := writeChunks(t, mp, "rewind", []byte(strconv.FormatUint(uint64(at[3]), 10)), 100); werr != nil || cerr != nil {
		t.Fatalf("printf N > .zero/rewind: write %v, close %v", werr, cerr)
	}
	if got := readFile(t, filepath.Join(mp, "f")); got != "v2" {
		t.Fatalf("after printf %d, f = %q, want v2", at[3], got)
	}
	// Bad input without a newline: close fails with EINVAL, nothing changes.
	head := headOf(t, mp)
	werr, cerr := writeChunks(t, mp, "rewind", []byte("abc"), 100)
	if werr != nil {
		t.Fatalf("write: %v", werr)
	}
	wantErrno(t, "close after printf abc", cerr, syscall.EINVAL)
	// Bad input on a line: the write itself fails.
	werr, _ = writeChunks(t, mp, "rewind", []byte("abc\n"), 100)
	wantErrno(t, "echo abc", werr, syscall.EINVAL)
	if h := headOf(t, mp); h != head {
		t.Fatalf("bad requests changed head %d -> %d", head, h)
	}
}
