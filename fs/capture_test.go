package fs

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/zerofs/zerofs/control"
	"github.com/zerofs/zerofs/internal/testsupport"
	"github.com/zerofs/zerofs/record"
)

// TestEveryChangeShowsInViews makes each kind of change through the mount,
// each in its own step, recording the head and the whole tree before each,
// then checks that every
// @T shows exactly the tree recorded at T, and that rewinds restore them.
func TestEveryChangeShowsInViews(t *testing.T) {
	m := mountT(t, Options{})
	mp := m.Mountpoint()
	p := func(name string) string { return filepath.Join(mp, name) }

	type recorded struct {
		what string
		head record.Seq
		tree testsupport.Tree
	}
	var records []recorded
	// Within a step only the first change to a path is captured, so @T is
	// exact at step boundaries: each change gets its own step.
	change := func(what string, fn func() error) {
		t.Helper()
		stepT(t, mp, what)
		// The step's sequence, not the head: a boundary may capture a
		// file whose RELEASE (asynchronous after close) is still on its
		// way, in a checkpoint after the tool_call.
		records = append(records, recorded{what, stepSeqOf(t, mp), testsupport.Snapshot(t, mp)})
		if err := fn(); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}

	change("create", func() error { return os.WriteFile(p("a.txt"), []byte("v1"), 0o644) })
	change("overwrite (O_TRUNC)", func() error { return os.WriteFile(p("a.txt"), []byte("v2"), 0o644) })
	stepT(t, mp, "second")
	change("append (O_APPEND)", func() error {
		f, err := os.OpenFile(p("a.txt"), os.O_WRONLY|os.O_APPEND, 0)
		if err != nil {
			return err
		}
		defer f.Close()
		_, err = f.WriteString("+more")
		return err
	})
	change("mkdir", func() error { return os.Mkdir(p("d"), 0o750) })
	change("create in dir", func() error { return os.WriteFile(p("d/f"), []byte("in d"), 0o600) })
	change("nested mkdir", func() error { return os.MkdirAll(p("d/e/g"), 0o755) })
	change("nested file", func() error { return os.WriteFile(p("d/e/g/deep"), []byte("deep"), 0o644) })
	stepT(t, mp, "third")
	change("symlink", func() error { return os.Symlink("a.txt", p("l")) })
	change("hard link", func() error { return os.Link(p("a.txt"), p("b.txt")) })
	// A change through one name of a hard-linked file changes the other
	// names too, and only the name written through is captured (a known
	// limitation), so the second name goes before a.txt changes.
	change("unlink", func() error { return os.Remove(p("b.txt")) })
	change("chmod", func() error { return os.Chmod(p("a.txt"), 0o600) })
	change("truncate", func() error { return os.Truncate(p("a.txt"), 1) })
	stepT(t, mp, "fourth")
	change("rename dir", func() error { return os.Rename(p("d"), p("renamed")) })
	change("rmdir", func() error { return os.Remove(p("renamed/e/g/deep")) })
	change("rmdir 2", func() error { return os.Remove(p("renamed/e/g")) })
	change("rename over file", func() error {
		if err := os.WriteFile(p("x"), []byte("x"), 0o644); err != nil {
			return err
		}
		return os.Rename(p("x"), p("a.txt"))
	})
	change("exchange", func() error {
		return unix.Renameat2(unix.AT_FDCWD, p("a.txt"), unix.AT_FDCWD, p("renamed"), unix.RENAME_EXCHANGE)
	})
	change("noreplace", func() error {
		err := unix.Renameat2(unix.AT_FDCWD, p("l"), unix.AT_FDCWD, p("a.txt"), unix.RENAME_NOREPLACE)
		if err != unix.EEXIST {
			t.Errorf("RENAME_NOREPLACE onto an existing name: got %v, want EEXIST", err)
		}
		return unix.Renameat2(unix.AT_FDCWD, p("l"), unix.AT_FDCWD, p("l2"), unix.RENAME_NOREPLACE)
	})
	change("remove tree", func() error { return os.RemoveAll(p("a.txt")) })
	final := recorded{"final", headOf(t, mp), testsupport.Snapshot(t, mp)}

	for _, r := range records {
		if d := diffTrees(testsupport.Snapshot(t, view(mp, r.head)), r.tree); d != "" {
			t.Errorf("@%d (before %s) differs from the tree then:\n%s", r.head, r.what, d)
		}
	}
	if d := diffTrees(testsupport.Snapshot(t, view(mp, final.head)), final.tree); d != "" {
		t.Errorf("@%d (head) differs from the workspace:\n%s", final.head, d)
	}
	if t.Failed() {
		return
	}

	// Rewind to the middle, then undo that rewind.
	mid := records[len(records)/2]
	rewindT(t, mp, mid.head)
	if d := diffTrees(testsupport.Snapshot(t, mp), mid.tree); d != "" {
		t.Fatalf("after rewind to %d (before %s):\n%s", mid.head, mid.what, d)
	}
	var rep control.RewindReport
	readJSON(t, ctlRead(t, mp, "rewind"), &rep)
	if rep.TargetSequence != mid.head || rep.CheckpointSequence == 0 || rep.Sequence != headOf(t, mp) {
		t.Fatalf(".zero/rewind = %+v; want target %d, a checkpoint, sequence = head", rep, mid.head)
	}
	rewindT(t, mp, rep.CheckpointSequence-1)
	if d := diffTrees(testsupport.Snapshot(t, mp), final.tree); d != "" {
		t.Fatalf("after undoing the rewind (to %d):\n%s", rep.CheckpointSequence-1, d)
	}
	// Views before the rewinds still show the same trees.
	for _, r := range records {
		if d := diffTrees(testsupport.Snapshot(t, view(mp, r.head)), r.tree); d != "" {
			t.Errorf("after rewinds, @%d (before %s) differs:\n%s", r.head, r.what, d)
		}
	}
	// Rewind to 0: nothing the mount created is left.
	rewindT(t, mp, 0)
	if d := diffTrees(testsupport.Snapshot(t, mp), testsupport.Tree{}); d != "" {
		t.Fatalf("after rewind to 0:\n%s", d)
	}
}

// TestHeldOpenAcrossStep: a file kept open for writing across a step is
// captured again at its first write in the new step.
func TestHeldOpenAcrossStep(t *testing.T) {
	m := mountT(t, Options{})
	mp := m.Mountpoint()
	f, err := os.OpenFile(filepath.Join(mp, "held"), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString("A"); err != nil {
		t.Fatal(err)
	}
	t1 := stepT(t, mp, "boundary")
	if _, err := f.WriteString("B"); err != nil {
		t.Fatal(err)
	}
	t2 := stepT(t, mp, "boundary 2")
	if _, err := f.WriteAt([]byte("C"), 0); err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(1); err != nil {
		t.Fatal(err)
	}
	if got := readFile(t, filepath.Join(view(mp, t1), "held")); got != "A" {
		t.Errorf("@%d/held = %q, want %q", t1, got, "A")
	}
	if got := readFile(t, filepath.Join(view(mp, t2), "held")); got != "AB" {
		t.Errorf("@%d/held = %q, want %q", t2, got, "AB")
	}
	if got := readFile(t, filepath.Join(mp, "held")); got != "C" {
		t.Errorf("held = %q, want %q", got, "C")
	}
}

// TestOpenFileSemantics: O_EXCL, unlink of an open file, writes to it, mknod.
func TestOpenFileSemantics(t *testing.T) {
	m := mountT(t, Options{})
	mp := m.Mountpoint()
	p := filepath.Join(mp, "f")
	writeFile(t, p, "one")
	_, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	wantErrno(t, "O_EXCL on an existing file", err, syscall.EEXIST)

	f, err := os.OpenFile(p, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	before := stepT(t, mp, "unlink")
	if err := os.Remove(p); err != nil {
		t.Fatal(err)
	}
	stepT(t, mp, "after unlink")
	if _, err := f.WriteAt([]byte("TWO"), 0); err != nil {
		t.Fatalf("write to an unlinked open file: %v", err)
	}
	buf := make([]byte, 3)
	if _, err := f.ReadAt(buf, 0); err != nil || string(buf) != "TWO" {
		t.Fatalf("read back from an unlinked open file: %q, %v", buf, err)
	}
	if st, err := f.Stat(); err != nil || st.Size() != 3 {
		t.Fatalf("fstat of an unlinked open file: %v, %v", st, err)
	}
	if _, err := os.Lstat(p); !os.IsNotExist(err) {
		t.Fatalf("unlinked file still visible: %v", err)
	}
	if got := readFile(t, filepath.Join(view(mp, before), "f")); got != "one" {
		t.Errorf("@%d/f = %q, want %q", before, got, "one")
	}

	fifo := filepath.Join(mp, "fifo")
	if err := unix.Mkfifo(fifo, 0o640); err != nil {
		t.Fatalf("mkfifo: %v", err)
	}
	if st, err := os.Lstat(fifo); err != nil || st.Mode()&os.ModeNamedPipe == 0 || st.Mode().Perm() != 0o640 {
		t.Fatalf("fifo: %v, %v", st, err)
	}
}

func TestXattrs(t *testing.T) {
	m := mountT(t, Options{})
	p := filepath.Join(m.Mountpoint(), "x")
	writeFile(t, p, "x")
	if err := unix.Setxattr(p, "user.zerofs", []byte("yes"), 0); err != nil {
		if err == unix.EOPNOTSUPP {
			t.Skipf("backing filesystem has no user xattrs")
		}
		t.Fatalf("setxattr: %v", err)
	}
	buf := make([]byte, 64)
	n, err := unix.Getxattr(p, "user.zerofs", buf)
	if err != nil || string(buf[:n]) != "yes" {
		t.Fatalf("getxattr: %q, %v", buf[:n], err)
	}
	n, err = unix.Listxattr(p, buf)
	if err != nil || !containsName(buf[:n], "user.zerofs") {
		t.Fatalf("listxattr: %q, %v", buf[:n], err)
	}
	if err := unix.Removexattr(p, "user.zerofs"); err != nil {
		t.Fatalf("removexattr: %v", err)
	}
	_, err = unix.Getxattr(p, "user.zerofs", buf)
	wantErrno(t, "getxattr after removexattr", err, unix.ENODATA)
}

func containsName(list []byte, name string) bool {
	for _, s := range splitNul(list) {
		if s == name {
			return true
		}
	}
	return false
}

func splitNul(b []byte) []string {
	var out []string
	start := 0
	for i, c := range b {
		if c == 0 {
			out = append(out, string(b[start:i]))
			start = i + 1
		}
	}
	return out
}

// TestSparseFile: a 5 GiB sparse file stays sparse through the mount.
func TestSparseFile(t *testing.T) {
	m := mountT(t, Options{})
	p := filepath.Join(m.Mountpoint(), "sparse")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	const size = 5 << 30
	if err := f.Truncate(size); err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte("end"), size-3); err != nil {
		t.Fatal(err)
	}
	var st unix.Stat_t
	if err := unix.Stat(p, &st); err != nil {
		t.Fatal(err)
	}
	if st.Size != size {
		t.Errorf("size = %d, want %d", st.Size, size)
	}
	if st.Blocks > 1024 {
		t.Errorf("st_blocks = %d: the file is not sparse", st.Blocks)
	}
	buf := make([]byte, 3)
	if _, err := f.ReadAt(buf, size-3); err != nil || string(buf) != "end" {
		t.Errorf("read at the end: %q, %v", buf, err)
	}
	off, err := unix.Seek(int(f.Fd()), 0, unix.SEEK_DATA)
	if err != nil || off < 4<<30 {
		t.Errorf("SEEK_DATA from 0 = %d, %v; want the data near the end", off, err)
	}
}

func TestStatfs(t *testing.T) {
	m := mountT(t, Options{})
	var a, b unix.Statfs_t
	if err := unix.Statfs(m.Mountpoint(), &a); err != nil {
		t.Fatal(err)
	}
	if err := unix.Statfs(m.fs.workspace, &b); err != nil {
		t.Fatal(err)
	}
	if a.Blocks != b.Blocks || a.Bsize != b.Bsize || a.Files != b.Files {
		t.Errorf("statfs through the mount = %+v, backing = %+v", a, b)
	}
}

// TestRewindInvalidatesCaches: right after a rewind, content, sizes and
// names the kernel cached show the rewound workspace.
func TestRewindInvalidatesCaches(t *testing.T) {
	m := mountT(t, Options{})
	mp := m.Mountpoint()
	f := filepath.Join(mp, "f")
	writeFile(t, f, "AAAA")
	t1 := stepT(t, mp, "s")
	writeFile(t, f, "BBBBBBBB")
	if err := os.Mkdir(filepath.Join(mp, "later"), 0o755); err != nil {
		t.Fatal(err)
	}
	for range 3 { // warm the caches
		readFile(t, f)
		os.Stat(filepath.Join(mp, "later"))
	}
	rewindT(t, mp, t1)
	if st, err := os.Stat(f); err != nil || st.Size() != 4 {
		t.Errorf("stat f after rewind: %v, %v; want size 4", st, err)
	}
	if got := readFile(t, f); got != "AAAA" {
		t.Errorf("f after rewind = %q, want AAAA", got)
	}
	if _, err := os.Stat(filepath.Join(mp, "later")); !os.IsNotExist(err) {
		t.Errorf("later after rewind: %v, want ENOENT", err)
	}
}
