package durable

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"golang.org/x/sys/unix"
)

// tempFiles lists the names in dir that look like our temporary files.
func tempFiles(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), ".tmp-") {
			names = append(names, e.Name())
		}
	}
	return names
}

func TestWriteFileAtomicCreatesAndReplaces(t *testing.T) {
	dir := t.TempDir()
	for i, data := range [][]byte{[]byte("first version\n"), []byte("second, longer version\n"), {}} {
		if err := WriteFileAtomic(dir, "f", data, 0o600); err != nil {
			t.Fatalf("write %d: %v", i, err)
		}
		got, err := os.ReadFile(filepath.Join(dir, "f"))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, data) {
			t.Errorf("write %d: got %q, want %q", i, got, data)
		}
		fi, err := os.Stat(filepath.Join(dir, "f"))
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != 0o600 {
			t.Errorf("write %d: got mode %v, want 0600", i, fi.Mode().Perm())
		}
		if tmp := tempFiles(t, dir); len(tmp) != 0 {
			t.Errorf("write %d: temporary files left: %v", i, tmp)
		}
	}
}

// TestWriteFileAtomicReadersSeeOldOrNew races readers against a writer that
// alternates two contents of different lengths: every read must be one of
// them whole, never a mix or a truncated file.
func TestWriteFileAtomicReadersSeeOldOrNew(t *testing.T) {
	dir := t.TempDir()
	a := bytes.Repeat([]byte("a"), 64<<10)
	b := bytes.Repeat([]byte("b"), 3<<10)
	if err := WriteFileAtomic(dir, "f", a, 0o600); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	var bad error
	var badOnce sync.Once
	for range 2 {
		wg.Go(func() {
			for {
				select {
				case <-done:
					return
				default:
				}
				got, err := os.ReadFile(filepath.Join(dir, "f"))
				if err != nil || !(bytes.Equal(got, a) || bytes.Equal(got, b)) {
					badOnce.Do(func() {
						if err == nil {
							err = errors.New("read a mix of the two versions")
						}
						bad = err
					})
					return
				}
			}
		})
	}
	for i := range 50 {
		data := a
		if i%2 == 0 {
			data = b
		}
		if err := WriteFileAtomic(dir, "f", data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	close(done)
	wg.Wait()
	if bad != nil {
		t.Fatalf("reader: %v", bad)
	}
}

func TestWriteFileAtomicLeavesNoTempOnError(t *testing.T) {
	tests := []struct {
		name  string
		setup func(t *testing.T, dir string) // makes the write fail
		root  bool                           // false: skipped as root (root ignores permissions)
	}{
		{
			// The temporary file is written and fsynced; the rename fails.
			name: "target is a non-empty directory",
			setup: func(t *testing.T, dir string) {
				if err := os.MkdirAll(filepath.Join(dir, "f", "x"), 0o700); err != nil {
					t.Fatal(err)
				}
			},
			root: true,
		},
		{
			name: "read-only directory",
			setup: func(t *testing.T, dir string) {
				if err := os.Chmod(dir, 0o500); err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { os.Chmod(dir, 0o700) })
			},
		},
		{
			// Root ignores permissions but not the immutable flag.
			name: "immutable directory",
			setup: func(t *testing.T, dir string) {
				if err := os.WriteFile(filepath.Join(dir, "f"), []byte("old"), 0o600); err != nil {
					t.Fatal(err)
				}
				setImmutable(t, dir)
			},
			root: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if !tt.root && os.Geteuid() == 0 {
				t.Skip("root ignores directory permissions (the immutable case covers root)")
			}
			dir := t.TempDir()
			tt.setup(t, dir)
			err := WriteFileAtomic(dir, "f", []byte("data"), 0o600)
			if err == nil {
				t.Fatal("got no error, want one")
			}
			if tmp := tempFiles(t, dir); len(tmp) != 0 {
				t.Errorf("got temporary files %v after the error, want none", tmp)
			}
			if old, err := os.ReadFile(filepath.Join(dir, "f")); err == nil && string(old) != "old" {
				t.Errorf("got %q after the failed replace, want the old content", old)
			}
		})
	}
	t.Run("missing directory", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "missing")
		if err := WriteFileAtomic(dir, "f", []byte("data"), 0o600); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("got %v, want fs.ErrNotExist", err)
		}
	})
}

// setImmutable sets the immutable flag (chattr +i) on dir, or skips the test
// when it cannot (not root, or a filesystem without the flag).
func setImmutable(t *testing.T, dir string) {
	t.Helper()
	const immutable = 0x10 // FS_IMMUTABLE_FL
	d, err := os.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	flags, err := unix.IoctlGetInt(int(d.Fd()), unix.FS_IOC_GETFLAGS)
	if err == nil {
		err = unix.IoctlSetPointerInt(int(d.Fd()), unix.FS_IOC_SETFLAGS, flags|immutable)
	}
	if err != nil {
		t.Skipf("cannot make %s immutable: %v", dir, err)
	}
	t.Cleanup(func() {
		d, err := os.Open(dir)
		if err != nil {
			t.Error(err)
			return
		}
		defer d.Close()
		if err := unix.IoctlSetPointerInt(int(d.Fd()), unix.FS_IOC_SETFLAGS, flags&^immutable); err != nil {
			t.Errorf("clear the immutable flag: %v", err)
		}
	})
}

func TestCommitHook(t *testing.T) {
	dir := t.TempDir()
	var points []string
	TestHook = func(point, path string) {
		if _, err := os.Stat(path); err != nil {
			t.Errorf("at %q: %v, want the file under its final name", point, err)
		}
		points = append(points, point+" "+filepath.Base(path))
	}
	t.Cleanup(func() { TestHook = nil })
	if err := WriteFileAtomic(dir, "f", []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	if got, want := strings.Join(points, ","), "renamed f"; got != want {
		t.Errorf("got hook calls %q, want %q", got, want)
	}
}

func TestCreateExclusive(t *testing.T) {
	dir := t.TempDir()
	if err := CreateExclusive(dir, "f", []byte("one"), 0o600); err != nil {
		t.Fatal(err)
	}
	err := CreateExclusive(dir, "f", []byte("two"), 0o600)
	if !errors.Is(err, fs.ErrExist) {
		t.Errorf("second create: got %v, want fs.ErrExist", err)
	}
	got, err := os.ReadFile(filepath.Join(dir, "f"))
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != "one" {
		t.Errorf("got content %q after the refused create, want %q", got, "one")
	}
	fi, err := os.Stat(filepath.Join(dir, "f"))
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("got mode %v, want 0600", fi.Mode().Perm())
	}
}

func TestSyncHelpers(t *testing.T) {
	dir := t.TempDir()
	f, err := os.Create(filepath.Join(dir, "f"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString("x"); err != nil {
		t.Fatal(err)
	}
	if err := Sync(f); err != nil {
		t.Errorf("Sync: %v", err)
	}
	if err := Fdatasync(f); err != nil {
		t.Errorf("Fdatasync: %v", err)
	}
	if err := SyncDir(dir); err != nil {
		t.Errorf("SyncDir: %v", err)
	}
	f.Close()
	// Never report success for a file that is not open.
	if err := Fdatasync(f); err == nil {
		t.Error("Fdatasync of a closed file: got nil, want an error")
	}
	if err := Sync(f); err == nil {
		t.Error("Sync of a closed file: got nil, want an error")
	}
	if err := SyncDir(filepath.Join(dir, "missing")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("SyncDir of a missing directory: got %v, want fs.ErrNotExist", err)
	}
}

func TestRemove(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "f"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for i := range 2 { // the second time the file is already gone
		if err := Remove(dir, "f"); err != nil {
			t.Errorf("remove %d: %v", i, err)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "f")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("got %v after Remove, want fs.ErrNotExist", err)
	}
}

func TestTempName(t *testing.T) {
	seen := map[string]bool{}
	for range 100 {
		n := TempName("blob")
		if !strings.HasPrefix(n, ".tmp-blob-") || len(n) != len(".tmp-blob-")+16 {
			t.Fatalf("got %q, want .tmp-blob-<16 hex digits>", n)
		}
		if seen[n] {
			t.Fatalf("got %q twice", n)
		}
		seen[n] = true
	}
}

// One scheme for every temporary name: TempName's results are recognised
// by IsTemp and IsTempFor (for their own name only), and stay within
// NAME_MAX however long the final name is.
func TestTempNameScheme(t *testing.T) {
	long := strings.Repeat("n", 255)
	for _, name := range []string{"blob", "a.go", ".hidden", "with-dash-0123456789abcdef", long} {
		n := TempName(name)
		if len(n) > 255 {
			t.Errorf("TempName(%.20q...) is %d bytes, over NAME_MAX", name, len(n))
		}
		if !IsTemp(n) || !IsTempFor(n, name) {
			t.Errorf("TempName(%.20q) = %.40q: IsTemp %v, IsTempFor %v; want both", name, n, IsTemp(n), IsTempFor(n, name))
		}
		// (A name cut to fit shares its temporary names with every name
		// of the same first bytes.)
		if (len(name) < 200 && IsTempFor(n, name+"x")) || IsTempFor(n, "other") {
			t.Errorf("IsTempFor(%.40q) matches another name", n)
		}
	}
	for _, n := range []string{"a.go", ".tmp-", ".tmp-a.go", ".tmp-a.go-0123", ".tmp-a.go-0123456789ABCDEF", ".tmp-a.go_0123456789abcdef", "x.tmp-a-0123456789abcdef"} {
		if IsTemp(n) {
			t.Errorf("IsTemp(%q) = true, want false", n)
		}
	}
}

// TestStartWriteback: the hint leaves the file as it was, and an
// Fdatasync after it succeeds.
func TestStartWriteback(t *testing.T) {
	p := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(p, []byte("data"), 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	StartWriteback(f)
	if err := Fdatasync(f); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(p); err != nil || string(b) != "data" {
		t.Fatalf("after StartWriteback: %q, %v", b, err)
	}
}
