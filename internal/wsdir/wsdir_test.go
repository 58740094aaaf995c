package wsdir

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/zerofs/zerofs/internal/testsupport"
)

// rootT opens a fresh directory as a Dir.
func rootT(t *testing.T) (Dir, string) {
	t.Helper()
	dir := t.TempDir()
	f, err := os.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return New(int(f.Fd())), dir
}

func TestClean(t *testing.T) {
	for _, tc := range []struct {
		p  string
		ok bool
	}{
		{"", true}, {"a", true}, {"a/b/c", true}, {"..a/b..", true},
		{"/a", false}, {"a/", false}, {"a//b", false}, {".", false},
		{"..", false}, {"a/./b", false}, {"a/../b", false}, {"a/..", false},
	} {
		err := Clean(tc.p)
		if (err == nil) != tc.ok {
			t.Errorf("Clean(%q) = %v, want ok %v", tc.p, err, tc.ok)
		}
		if err != nil && !errors.Is(err, ErrUnclean) {
			t.Errorf("Clean(%q) = %v, want ErrUnclean", tc.p, err)
		}
	}
	d, _ := rootT(t)
	if _, err := d.Open("a/../..", unix.O_PATH); !errors.Is(err, ErrUnclean) {
		t.Errorf("Open(a/../..): got %v, want ErrUnclean", err)
	}
}

// deepT makes a chain of directories named name under dir with mkdirat
// relative to the last one, so no call sees a long path, until the chain's
// path is at least length bytes. It returns the chain's relative path.
func deepT(t *testing.T, root int, name string, length int) string {
	t.Helper()
	fd, err := unix.Openat(root, ".", unix.O_PATH|unix.O_DIRECTORY, 0)
	if err != nil {
		t.Fatal(err)
	}
	var parts []string
	for len(strings.Join(parts, "/")) < length {
		if err := unix.Mkdirat(fd, name, 0o755); err != nil {
			t.Fatal(err)
		}
		next, err := unix.Openat(fd, name, unix.O_PATH|unix.O_DIRECTORY, 0)
		unix.Close(fd)
		if err != nil {
			t.Fatal(err)
		}
		fd = next
		parts = append(parts, name)
	}
	unix.Close(fd)
	return strings.Join(parts, "/")
}

// TestOpenPastPathMax: files whose whole path is just below PATH_MAX, at
// it, and far beyond it are created through WithParent and opened.
func TestOpenPastPathMax(t *testing.T) {
	d, _ := rootT(t)
	p := deepT(t, d.Fd(), strings.Repeat("d", 200), 3*4096)
	for _, n := range []int{4090, 4095, 4096, 8192, 3 * 4096} {
		// The deepest directory of the chain that leaves room for a
		// name, and a name that makes the path n bytes long.
		dir := p[:strings.LastIndexByte(p[:n-1], '/')]
		file := dir + "/" + strings.Repeat("f", n-len(dir)-1)
		if len(file) != n {
			t.Fatalf("built a %d-byte path, want %d", len(file), n)
		}
		err := d.WithParent(file, func(dirfd int, name string) error {
			fd, err := unix.Openat(dirfd, name, unix.O_CREAT|unix.O_WRONLY, 0o644)
			if err == nil {
				unix.Close(fd)
			}
			return err
		})
		if err != nil {
			t.Fatalf("WithParent of a %d-byte path: %v", n, err)
		}
		fd, err := d.Open(file, unix.O_RDONLY)
		if err != nil {
			t.Fatalf("Open of a %d-byte path: %v", n, err)
		}
		unix.Close(fd)
		fd, err = d.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY)
		if err != nil {
			t.Fatalf("Open of a %d-byte directory path: %v", len(dir), err)
		}
		unix.Close(fd)
	}
}

// TestSymlinksRefused: a symlink anywhere on the way is ELOOP, also one
// that points inside the root, and also past a chunk boundary.
func TestSymlinksRefused(t *testing.T) {
	d, dir := rootT(t)
	outside := t.TempDir()
	os.WriteFile(filepath.Join(outside, "secret"), []byte("x"), 0o600)
	os.Mkdir(filepath.Join(dir, "in"), 0o755)
	os.Symlink(outside, filepath.Join(dir, "out"))
	os.Symlink("in", filepath.Join(dir, "rel"))
	for _, p := range []string{"out/secret", "rel/x", "out"} {
		_, err := d.Open(p, unix.O_RDONLY)
		if !errors.Is(err, unix.ELOOP) {
			t.Errorf("Open(%q): got %v, want ELOOP", p, err)
		}
	}
	// O_PATH|O_NOFOLLOW opens a final symlink itself.
	fd, err := d.Open("out", unix.O_PATH|unix.O_NOFOLLOW)
	if err != nil {
		t.Fatalf("Open(out, O_PATH|O_NOFOLLOW): %v", err)
	}
	unix.Close(fd)

	// Past a chunk boundary: the chain's last name becomes a symlink
	// out of the root.
	deep := deepT(t, d.Fd(), strings.Repeat("e", 250), 3000)
	link := deep[:strings.LastIndexByte(deep, '/')]
	last := deep[len(link)+1:]
	err = d.WithParent(link+"/"+last, func(dirfd int, name string) error {
		if err := unix.Unlinkat(dirfd, name, unix.AT_REMOVEDIR); err != nil {
			return err
		}
		return unix.Symlinkat(outside, dirfd, name)
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.Open(deep+"/secret", unix.O_RDONLY); !errors.Is(err, unix.ELOOP) {
		t.Errorf("Open past a deep symlink: got %v, want ELOOP", err)
	}
}

// TestCrossesMountBelowRoot: a tmpfs mounted below the root is part of the
// workspace (no EXDEV), and its files open.
func TestCrossesMountBelowRoot(t *testing.T) {
	testsupport.RequireRoot(t, "mounting a tmpfs")
	d, dir := rootT(t)
	sub := filepath.Join(dir, "sub")
	os.Mkdir(sub, 0o755)
	if err := unix.Mount("tmpfs", sub, "tmpfs", 0, "size=1m"); err != nil {
		t.Fatalf("mount tmpfs: %v", err)
	}
	t.Cleanup(func() {
		if err := unix.Unmount(sub, 0); err != nil {
			unix.Unmount(sub, unix.MNT_DETACH)
		}
	})
	if err := os.WriteFile(filepath.Join(sub, "f"), []byte("on tmpfs"), 0o644); err != nil {
		t.Fatal(err)
	}
	fd, err := d.Open("sub/f", unix.O_RDONLY)
	if err != nil {
		t.Fatalf("Open(sub/f) across a mount point: %v", err)
	}
	b := make([]byte, 16)
	n, _ := unix.Read(fd, b)
	unix.Close(fd)
	if string(b[:n]) != "on tmpfs" {
		t.Errorf("sub/f: got %q, want %q", b[:n], "on tmpfs")
	}
	var st unix.Stat_t
	err = d.WithParent("sub/f", func(dirfd int, name string) error {
		return unix.Fstatat(dirfd, name, &st, unix.AT_SYMLINK_NOFOLLOW)
	})
	if err != nil {
		t.Errorf("WithParent(sub/f): %v", err)
	}
}
