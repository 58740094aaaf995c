package eventlog

import (
	"errors"
	"hash/crc32"
	"os"
	"slices"
	"testing"

	"github.com/zerofs/zerofs/record"
)

// TestResumeSkipsCheckedPrefix: a Resume taken from a Log lets the next Open
// take over its head, size and index without re-reading them, and lines
// appended after it are read and checked as usual.
func TestResumeSkipsCheckedPrefix(t *testing.T) {
	path := t.TempDir() + "/events.jsonl"
	l := openT(t, path, Options{Logger: quietLogger()})
	appendN(t, l, 3000)
	r := l.Resume()
	appendN(t, l, 5)
	want := l.Resume()
	l.Close()

	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if got := crc32.Checksum(data, castagnoli); got != want.CRC {
		t.Fatalf("running CRC %08x, want the file's %08x", want.CRC, got)
	}
	if r.Head != 3000 || int64(len(data)) <= r.Size {
		t.Fatalf("resume at head %d size %d of a %d-byte log", r.Head, r.Size, len(data))
	}

	l2 := openT(t, path, Options{Logger: quietLogger(), Resume: &r})
	got := l2.Resume()
	if got.Head != want.Head || got.Size != want.Size || got.CRC != want.CRC || !slices.Equal(got.Offsets, want.Offsets) {
		t.Errorf("resumed open: got %+v, want %+v", got, want)
	}
	checkSeqs(t, readAll(t, path, 2990), 2990, 3005)
	appendN(t, l2, 1)
	if h := l2.Head(); h != 3006 {
		t.Errorf("append after a resumed open: head %d, want 3006", h)
	}
}

// TestResumeMismatchScansAll: a Resume that no longer describes the file (a
// byte changed inside the prefix, the file cut shorter, a wrong CRC) costs
// a full scan, which finds the damage or the true head: never trusted over
// the log.
func TestResumeMismatchScansAll(t *testing.T) {
	for _, tc := range []struct {
		name    string
		damage  func(t *testing.T, path string, r *Resume)
		corrupt bool
		head    record.Seq
	}{
		{"byte flipped inside the prefix", func(t *testing.T, path string, r *Resume) {
			f, _ := os.OpenFile(path, os.O_RDWR, 0)
			defer f.Close()
			f.WriteAt([]byte("X"), 100)
		}, true, 0},
		{"wrong CRC", func(t *testing.T, path string, r *Resume) { r.CRC++ }, false, 20},
		{"head claims more", func(t *testing.T, path string, r *Resume) { r.Head += 5000 }, false, 20},
		{"file shorter than the prefix", func(t *testing.T, path string, r *Resume) {
			r.Size += 1 << 20
		}, false, 20},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := t.TempDir() + "/events.jsonl"
			l := openT(t, path, Options{Logger: quietLogger()})
			appendN(t, l, 20)
			r := l.Resume()
			l.Close()
			tc.damage(t, path, &r)
			l2, err := Open(path, Options{Logger: quietLogger(), Resume: &r})
			if tc.corrupt {
				if !errors.Is(err, record.ErrCorrupt) {
					t.Fatalf("got %v, want ErrCorrupt", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer l2.Close()
			if h := l2.Head(); h != tc.head {
				t.Errorf("got head %d, want %d", h, tc.head)
			}
		})
	}
}

// TestResumeThenTornTail: a torn tail after the resumed prefix is cut as in
// a full scan.
func TestResumeThenTornTail(t *testing.T) {
	path := t.TempDir() + "/events.jsonl"
	l := openT(t, path, Options{Logger: quietLogger()})
	appendN(t, l, 10)
	r := l.Resume()
	l.Close()
	f, _ := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	f.WriteString(`{"id":"x","sequence":11,"ty`)
	f.Close()
	l2 := openT(t, path, Options{Logger: quietLogger(), Resume: &r})
	if h := l2.Head(); h != 10 {
		t.Errorf("got head %d, want 10", h)
	}
	if n := len(tornFiles(t, path)); n != 1 {
		t.Errorf("got %d torn files, want 1", n)
	}
}
