package fs

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/zerofs/zerofs/record"
)

// stepSeqOf is the sequence of the current step (its tool_call), from
// .zero/step. After a step it can be below the head: with passthrough, the
// boundary captures files held open for writing in checkpoints of its own.
func stepSeqOf(t fatalT, mp string) record.Seq {
	t.Helper()
	line := strings.TrimSpace(ctlRead(t, mp, "step"))
	s, _, _ := strings.Cut(line, " ")
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		t.Fatalf(".zero/step = %q: %v", line, err)
	}
	return record.Seq(n)
}

// With passthrough, reads and writes of workspace files never reach the
// daemon, and a file held open for writing across a step is captured at the
// boundary, so @step shows it as it was then. With the boundary captures
// switched off (the seam), the same test sees the later write at @step: the
// capture is what keeps @T exact.
func TestPassthroughHeldWriterAcrossStep(t *testing.T) {
	for _, off := range []bool{false, true} {
		t.Run(fmt.Sprintf("captures-off=%v", off), func(t *testing.T) {
			m := mountT(t, Options{})
			if !m.Passthrough() {
				t.Skip("FUSE passthrough is not available here (kernel 6.9+ and root needed)")
			}
			m.fs.writers.off.Store(off)
			mp := m.Mountpoint()
			p := filepath.Join(mp, "held")
			f, err := os.OpenFile(p, os.O_RDWR|os.O_CREATE, 0o644)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			t1, t2 := writeAcrossBoundaries(t, mp, f, f)
			if n := m.fs.served.Load(); n != 0 {
				t.Errorf("%d reads and writes reached the daemon, want 0 with passthrough", n)
			}
			if off {
				// Without them the view shows a later state, or, as it
				// can tell the present file changed after the step
				// without a capture, refuses it (EIO).
				b1, _ := os.ReadFile(filepath.Join(view(mp, t1), "held"))
				b2, _ := os.ReadFile(filepath.Join(view(mp, t2), "held"))
				if got1, got2 := string(b1), string(b2); got1 == "A" && got2 == "AB" {
					t.Fatalf("without boundary captures @%d = %q and @%d = %q: the test cannot tell", t1, got1, t2, got2)
				}
				return
			}
			got1 := readFile(t, filepath.Join(view(mp, t1), "held"))
			got2 := readFile(t, filepath.Join(view(mp, t2), "held"))
			if got1 != "A" || got2 != "AB" {
				t.Fatalf("@%d/held = %q, @%d/held = %q; want A and AB", t1, got1, t2, got2)
			}
		})
	}
}

// A rewind invalidates exactly what it changed behind the kernel's back;
// the mount keeps entries and attributes for an hour and listings across
// opens, so each part is needed. Each case runs with its part on (the mount
// must show the rewound state) and off (it must show a stale one: otherwise
// the case would not prove the part).
func TestRewindInvalidates(t *testing.T) {
	for _, tc := range []struct {
		name string
		part invalidateParts
		// setup makes the state at the returned sequence, changes it in a
		// later step, and reads what the kernel then caches; check returns
		// "" when the mount shows the state at that sequence.
		setup func(t *testing.T, mp string) (record.Seq, func() string)
		check func(t *testing.T, mp string, after func() string) string
	}{
		{
			// A name that is another object after the rewind: a file
			// that was a directory.
			name: "entry", part: invalEntry,
			setup: func(t *testing.T, mp string) (record.Seq, func() string) {
				x := filepath.Join(mp, "x")
				os.Mkdir(x, 0o755)
				writeFile(t, filepath.Join(x, "in"), "in")
				at := stepT(t, mp, "to file")
				os.RemoveAll(x)
				writeFile(t, x, "file")
				if fi, err := os.Stat(x); err != nil || fi.IsDir() {
					t.Fatalf("stat x: %v %v", fi, err)
				}
				return at, nil
			},
			check: func(t *testing.T, mp string, _ func() string) string {
				fi, err := os.Stat(filepath.Join(mp, "x"))
				if err != nil || !fi.IsDir() {
					return fmt.Sprintf("stat x: %v %v, want a directory", fi, err)
				}
				return ""
			},
		},
		{
			// A name the rewind brings back that the kernel keeps as
			// absent (a negative entry, left by the unlink).
			name: "negative", part: invalEntry,
			setup: func(t *testing.T, mp string) (record.Seq, func() string) {
				n := filepath.Join(mp, "n")
				writeFile(t, n, "n")
				at := stepT(t, mp, "remove")
				if err := os.Remove(n); err != nil {
					t.Fatal(err)
				}
				if _, err := os.Stat(n); !os.IsNotExist(err) {
					t.Fatalf("stat n after rm: %v", err)
				}
				return at, nil
			},
			check: func(t *testing.T, mp string, _ func() string) string {
				if b, err := os.ReadFile(filepath.Join(mp, "n")); err != nil || string(b) != "n" {
					return fmt.Sprintf("n after the rewind: %q, %v; want n", b, err)
				}
				return ""
			},
		},
		{
			// A mode restored in place, seen through a descriptor opened
			// before the rewind (no lookup refreshes it).
			name: "node", part: invalNode,
			setup: func(t *testing.T, mp string) (record.Seq, func() string) {
				p := filepath.Join(mp, "m")
				writeFile(t, p, "m")
				os.Chmod(p, 0o644)
				at := stepT(t, mp, "chmod")
				if err := os.Chmod(p, 0o600); err != nil {
					t.Fatal(err)
				}
				f, err := os.Open(p)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { f.Close() })
				if fi, err := f.Stat(); err != nil || fi.Mode().Perm() != 0o600 {
					t.Fatalf("fstat m: %v %v", fi, err)
				}
				return at, func() string {
					fi, err := f.Stat()
					if err != nil {
						return err.Error()
					}
					return fi.Mode().Perm().String()
				}
			},
			check: func(t *testing.T, mp string, after func() string) string {
				if got := after(); got != os.FileMode(0o644).String() {
					return "fstat m after the rewind: " + got + ", want -rw-r--r--"
				}
				return ""
			},
		},
		{
			// A name the rewind brings back into a directory whose listing
			// the kernel keeps, and of which it knows no entry (the name
			// was renamed away, not removed).
			name: "listing", part: invalListing,
			setup: func(t *testing.T, mp string) (record.Seq, func() string) {
				d := filepath.Join(mp, "d")
				os.Mkdir(d, 0o755)
				writeFile(t, filepath.Join(d, "a"), "a")
				writeFile(t, filepath.Join(d, "b"), "b")
				at := stepT(t, mp, "move")
				if err := os.Rename(filepath.Join(d, "b"), filepath.Join(mp, "moved")); err != nil {
					t.Fatal(err)
				}
				if got := names(t, d); got != "a" {
					t.Fatalf("ls d = %q, want a", got)
				}
				return at, nil
			},
			check: func(t *testing.T, mp string, _ func() string) string {
				if got := names(t, filepath.Join(mp, "d")); got != "a b" {
					return fmt.Sprintf("ls d after the rewind = %q, want \"a b\"", got)
				}
				return ""
			},
		},
	} {
		for _, off := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/off=%v", tc.name, off), func(t *testing.T) {
				m := mountT(t, Options{})
				mp := m.Mountpoint()
				at, after := tc.setup(t, mp)
				if off {
					m.fs.noInvalidate.Store(uint32(tc.part))
				}
				rewindT(t, mp, at)
				msg := tc.check(t, mp, after)
				switch {
				case !off && msg != "":
					t.Fatal(msg)
				case off && msg == "":
					t.Fatalf("with the %s invalidation off the mount still shows the rewound state: the case proves nothing", tc.name)
				}
			})
		}
	}
}

// names lists directory d, sorted, space-separated.
func names(t *testing.T, d string) string {
	t.Helper()
	ents, err := os.ReadDir(d)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		out = append(out, e.Name())
	}
	return strings.Join(out, " ")
}

// A process holding a file open across a rewind keeps the file it opened,
// as the README says: it reads the old content, its writes go nowhere
// visible, and opening the path again gives the rewound content. With and
// without passthrough.
func TestOpenAcrossRewind(t *testing.T) {
	for _, nopt := range []bool{false, true} {
		t.Run(fmt.Sprintf("no-passthrough=%v", nopt), func(t *testing.T) {
			m := mountT(t, Options{NoPassthrough: nopt})
			mp := m.Mountpoint()
			p := filepath.Join(mp, "f")
			writeFile(t, p, "one")
			at := stepT(t, mp, "edit")
			writeFile(t, p, "two")
			r, err := os.Open(p)
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			w, err := os.OpenFile(p, os.O_RDWR, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer w.Close()
			rewindT(t, mp, at)

			if got := readFile(t, p); got != "one" {
				t.Fatalf("f after the rewind = %q, want one", got)
			}
			buf := make([]byte, 8)
			if k, err := r.ReadAt(buf, 0); string(buf[:k]) != "two" {
				t.Fatalf("the reader opened before the rewind reads %q (%v), want two", buf[:k], err)
			}
			if _, err := w.WriteAt([]byte("XYZ"), 0); err != nil {
				t.Fatalf("write through the old handle: %v", err)
			}
			if k, err := w.ReadAt(buf, 0); string(buf[:k]) != "XYZ" {
				t.Fatalf("the old handle reads back %q (%v), want XYZ", buf[:k], err)
			}
			if got := readFile(t, p); got != "one" {
				t.Fatalf("f after a write through the old handle = %q, want one", got)
			}
			if fi, err := os.Stat(p); err != nil || fi.Size() != 3 {
				t.Fatalf("stat f: %v %v", fi, err)
			}
		})
	}
}

// Readers and writers of one small file open and close it back to back. A
// reader of a small file would use the kernel's page cache and a writer
// passthrough; go-fuse drops a backing-file reference on every release of a
// node, so a reader's RELEASE racing a writer's OPEN closed the backing file
// the writer had just been given, and the kernel failed the writer's open
// with EIO. Every open must succeed: a node keeps the mode of its first open
// (openMode).
func TestOpenModesDoNotRace(t *testing.T) {
	ws := t.TempDir()
	files := make([]string, 4)
	for i := range files {
		files[i] = fmt.Sprintf("f%d", i)
		writeFile(t, filepath.Join(ws, files[i]), "v0")
	}
	m := mountT(t, Options{Workspace: ws})
	if !m.Passthrough() {
		t.Skip("FUSE passthrough is not available here (kernel 6.9+ and root needed)")
	}
	for i := range files {
		files[i] = filepath.Join(m.Mountpoint(), files[i])
		readFile(t, files[i]) // the first open of the node is a cached reader
	}
	stop := time.Now().Add(2 * time.Second)
	var wg sync.WaitGroup
	errs := make(chan error, 2*len(files))
	for _, p := range files {
		wg.Go(func() {
			for time.Now().Before(stop) {
				if _, err := os.ReadFile(p); err != nil {
					errs <- fmt.Errorf("read: %w", err)
					return
				}
			}
		})
		wg.Go(func() {
			for k := 0; time.Now().Before(stop); k++ {
				if err := os.WriteFile(p, fmt.Appendf(nil, "v%d", k), 0o644); err != nil {
					errs <- fmt.Errorf("write: %w", err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// A read-only open sends no FLUSH at its close (FOPEN_NOFLUSH: a grep
// costs two requests per file, not three), and neither does a writer's
// (a create or an open for writing) where the backing file's close cannot
// fail, as on the local filesystem the tests run on (flush.go).
func TestReadersSendNoFlush(t *testing.T) {
	m := mountT(t, Options{})
	p := filepath.Join(m.Mountpoint(), "f")
	writeFile(t, p, "data")
	before := m.fs.flushed.Load()
	for range 10 {
		readFile(t, p)
	}
	if m.fs.noOpen {
		// Without OPEN (noopen.go) the first close sends one, answered
		// ENOSYS; the kernel then sends none for the connection.
		writeFile(t, p, "more")
		writeFile(t, filepath.Join(m.Mountpoint(), "g"), "new")
		if n := m.fs.flushed.Load(); n != 1 {
			t.Errorf("%d FLUSH requests in all, want the first only", n)
		}
		return
	}
	if n := m.fs.flushed.Load() - before; n != 0 {
		t.Errorf("10 read-only opens and closes sent %d FLUSH requests, want 0", n)
	}
	var st unix.Statfs_t
	if err := unix.Statfs(m.fs.workspace, &st); err != nil {
		t.Fatal(err)
	}
	want := int64(1)
	if flushlessFS[int64(st.Type)] {
		want = 0
	}
	writeFile(t, p, "more")                                 // an open for writing
	writeFile(t, filepath.Join(m.Mountpoint(), "g"), "new") // a create
	if n := m.fs.flushed.Load() - before; n != 2*want {
		t.Errorf("two writers' closes on a filesystem of type %#x sent %d FLUSH requests, want %d", st.Type, n, 2*want)
	}
}

// writeAcrossBoundaries writes the file held open as first and later (the
// same file: one descriptor or two) across two step boundaries: "A"
// through first, a step (t1), "B" at 1 through later, a rewind that
// changes something (t2: a rewind is a boundary too; one that changes
// nothing records nothing), "C" at 0 through later; and checks that first
// reads back "CB". @t1 must then show "A", @t2 "AB".
func writeAcrossBoundaries(t *testing.T, mp string, first, later *os.File) (t1, t2 record.Seq) {
	t.Helper()
	if _, err := first.WriteAt([]byte("A"), 0); err != nil {
		t.Fatal(err)
	}
	t1 = stepT(t, mp, "one")
	if _, err := later.WriteAt([]byte("B"), 1); err != nil {
		t.Fatal(err)
	}
	pre := headOf(t, mp)
	if err := os.WriteFile(filepath.Join(mp, "other"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	rewindT(t, mp, pre)
	t2 = stepSeqOf(t, mp)
	if _, err := later.WriteAt([]byte("C"), 0); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 2)
	if _, err := first.ReadAt(buf, 0); err != nil || string(buf) != "CB" {
		t.Fatalf("read back %q, %v; want CB", buf, err)
	}
	return t1, t2
}
