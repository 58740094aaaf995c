package wsdir

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// TestCreateRefusesASwappedDirectory: whoever owns the parent can swap the
// new directory between mkdir and open; Create must not hand out what was
// put there (issue 14, defect 5).
func TestCreateRefusesASwappedDirectory(t *testing.T) {
	for _, tc := range []struct {
		name string
		swap func(t *testing.T, path, elsewhere string)
	}{
		{"symlink", func(t *testing.T, path, elsewhere string) {
			os.Rename(path, path+".moved")
			if err := os.Symlink(elsewhere, path); err != nil {
				t.Fatal(err)
			}
		}},
		{"another user's directory", func(t *testing.T, path, elsewhere string) {
			if os.Geteuid() != 0 {
				t.Skip("needs root to chown")
			}
			os.Rename(path, path+".moved")
			os.Mkdir(path, 0o700)
			os.Chown(path, 65534, 65534)
		}},
		{"a non-empty directory", func(t *testing.T, path, elsewhere string) {
			os.Rename(path, path+".moved")
			os.Mkdir(path, 0o700)
			os.WriteFile(filepath.Join(path, "planted"), nil, 0o600)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			parent := t.TempDir()
			elsewhere := t.TempDir()
			path := filepath.Join(parent, "fork")
			defer func(f func(string)) { afterMkdir = f }(afterMkdir)
			afterMkdir = func(p string) { tc.swap(t, p, elsewhere) }
			d, err := Create(path)
			if err == nil {
				d.Close()
				t.Fatalf("Create(%s) accepted the swapped directory", path)
			}
			if !errors.Is(err, ErrReplaced) {
				t.Errorf("Create: %v, want ErrReplaced", err)
			}
		})
	}
}

// TestCreateWritesBeneathItsDescriptor: once Create returns, a rename of
// the directory and a symlink in its place change nothing about where
// writes through the Dir go.
func TestCreateWritesBeneathItsDescriptor(t *testing.T) {
	parent, elsewhere := t.TempDir(), t.TempDir()
	path := filepath.Join(parent, "fork")
	d, err := Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if err := os.Rename(path, path+".moved"); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(elsewhere, path); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mkdirat(d.Fd(), "sub", 0o700); err != nil {
		t.Fatal(err)
	}
	err = d.WithParent("sub/f", func(fd int, name string) error {
		nfd, err := unix.Openat(fd, name, unix.O_CREAT|unix.O_WRONLY|unix.O_EXCL|unix.O_NOFOLLOW, 0o600)
		if err == nil {
			unix.Close(nfd)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(path+".moved", "sub", "f")); err != nil {
		t.Errorf("the file is not in the directory Create made: %v", err)
	}
	if ents, _ := os.ReadDir(elsewhere); len(ents) != 0 {
		t.Errorf("something was written where the symlink points: %v", ents)
	}
	if _, err := Create(filepath.Join(parent, "fork.moved")); !errors.Is(err, os.ErrExist) {
		t.Errorf("Create of an existing directory: %v, want ErrExist", err)
	}
}
