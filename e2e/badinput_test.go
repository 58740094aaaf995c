package e2e

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestBadInput: what the contract refuses, it refuses with the right errno
// and without changing anything, both for the test's own syscalls and for
// a shell's error messages.
func TestBadInput(t *testing.T) {
	ws := mountT(t)
	writeFile(t, filepath.Join(ws, "f"), "v0\n", 0o644)
	os.Mkdir(filepath.Join(ws, "d"), 0o755)
	T := step(t, ws, "edit")
	writeFile(t, filepath.Join(ws, "f"), "v1\n", 0o644)
	h := head(t, ws)
	before := snapshot(t, ws)
	at := view(ws, T)

	// Writes into a view: every kind of change fails with EROFS.
	rofs := []struct {
		name string
		op   func() error
	}{
		{"write existing", func() error { return os.WriteFile(filepath.Join(at, "f"), []byte("x"), 0o644) }},
		{"create", func() error { return os.WriteFile(filepath.Join(at, "new"), []byte("x"), 0o644) }},
		{"mkdir", func() error { return os.Mkdir(filepath.Join(at, "d2"), 0o755) }},
		{"remove", func() error { return os.Remove(filepath.Join(at, "f")) }},
		{"rmdir", func() error { return syscall.Rmdir(filepath.Join(at, "d")) }},
		{"rename", func() error { return os.Rename(filepath.Join(at, "f"), filepath.Join(at, "g")) }},
		{"chmod", func() error { return os.Chmod(filepath.Join(at, "f"), 0o777) }},
		{"truncate", func() error { return os.Truncate(filepath.Join(at, "f"), 0) }},
		{"symlink", func() error { return os.Symlink("f", filepath.Join(at, "l")) }},
		{"link", func() error { return os.Link(filepath.Join(at, "f"), filepath.Join(at, "l")) }},
		{"setxattr", func() error { return syscall.Setxattr(filepath.Join(at, "f"), "user.x", []byte("1"), 0) }},
		{"open O_RDWR and write", func() error {
			// A mount without OPEN (--no-open) never sees the open:
			// there the write is refused.
			f, err := os.OpenFile(filepath.Join(at, "f"), os.O_RDWR, 0)
			if err != nil {
				return err
			}
			defer f.Close()
			_, err = f.Write([]byte("x"))
			return err
		}},
	}
	for _, c := range rofs {
		t.Run("view/"+c.name, func(t *testing.T) {
			if err := c.op(); !errors.Is(err, syscall.EROFS) {
				t.Errorf("%s in @%d: got %v, want EROFS", c.name, T, err)
			}
		})
	}

	// The same through a shell, as an agent sees it. bash, not sh: dash
	// reports every failed write of echo as "I/O error", whatever the errno.
	shells := []struct {
		script, want string
	}{
		{"echo x > @" + itoa(T) + "/f", "Read-only file system"},
		{"echo abc > .zero/rewind", "Invalid argument"},
		{"echo -1 > .zero/rewind", "Invalid argument"},
		{"echo " + itoa(h+1) + " > .zero/rewind", "Invalid argument"},
		{"echo 99999999999999999999999 > .zero/rewind", "Invalid argument"},
		{"echo > .zero/rewind", "Invalid argument"},
		{"mkdir @5", "Operation not permitted"},
		// A view or .zero that exists is, for mkdir, a name that
		// exists: POSIX's EEXIST comes first.
		{"mkdir @" + itoa(T), "File exists"},
		{"mkdir .zero", "File exists"},
		{"echo x > @77", "Operation not permitted"},
		{"ln -s f @8", "Operation not permitted"},
		{"mv f @9", "Operation not permitted"},
		{"mv f .zero", "Operation not permitted"},
	}
	for _, c := range shells {
		t.Run("sh/"+c.script, func(t *testing.T) {
			out, err := runCmd(t, cmdTimeout, ws, []string{"LC_ALL=C"}, "bash", "-c", c.script)
			if err == nil || !strings.Contains(out, c.want) {
				t.Errorf("bash -c %q: got %v: %q, want failure %q", c.script, err, out, c.want)
			}
		})
	}

	// @T above head does not exist, below it does, and neither is listed.
	if _, err := os.Stat(view(ws, h+1)); !errors.Is(err, syscall.ENOENT) {
		t.Errorf("stat @%d (head+1): got %v, want ENOENT", h+1, err)
	}
	if _, err := os.Stat(view(ws, 0)); err != nil {
		t.Errorf("stat @0: %v", err)
	}

	// Nothing changed: no rewind happened, no event was written.
	if got := head(t, ws); got != h {
		t.Errorf("head after refused requests: got %d, want %d", got, h)
	}
	sameTree(t, "workspace after refused requests", before, snapshot(t, ws))
	sameTree(t, "@"+itoa(T)+" after refused requests", tree{"f": {Kind: "file", Mode: 0o644, Content: "v0\n"}, "d": {Kind: "dir", Mode: 0o755}}, snapshot(t, at))
}

// TestChangeControlDir: changing the attributes of .zero (touch, chmod) is
// refused with EPERM like every other change to a reserved name, as it is
// for the files inside .zero and for the views (EROFS).
func TestChangeControlDir(t *testing.T) {
	ws := mountT(t)
	for _, script := range []string{"touch .zero", "chmod 700 .zero"} {
		out, err := runCmd(t, cmdTimeout, ws, []string{"LC_ALL=C"}, "bash", "-c", script)
		if err == nil || !strings.Contains(out, "Operation not permitted") {
			t.Errorf("bash -c %q: got %v: %q, want failure \"Operation not permitted\"", script, err, out)
		}
	}
}
