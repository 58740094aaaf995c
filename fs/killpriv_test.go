package fs

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/zerofs/zerofs/internal/testsupport"
)

// An open with O_TRUNC truncates in its OPEN (ATOMIC_O_TRUNC): the kernel
// sends no SETATTR of the size after it, so the set-id bits a native
// truncate by a caller without CAP_FSETID clears must be cleared there, and
// in a CREATE of a name the kernel held as missing but which exists (made
// behind the mount's back), which truncates the same way. Each case runs as
// root without CAP_FSETID (the kernel then asks for the bits to go) and as
// plain root (it does not), natively and through the mount, and the modes
// and sizes must match.
func TestTruncatingOpensClearSetIDBits(t *testing.T) {
	testsupport.RequireSetpriv(t)
	ws := t.TempDir()
	mp := mountT(t, Options{Workspace: ws}).Mountpoint()
	native := t.TempDir()
	const script = `import os, sys
flags = os.O_WRONLY | os.O_TRUNC
if sys.argv[2] == "create":
    flags |= os.O_CREAT
os.close(os.open(sys.argv[1], flags, 0o644))`
	type result struct {
		mode os.FileMode
		size int64
	}
	run := func(dir, backing, name, how string, dropFSetID bool) result {
		t.Helper()
		if how == "create" && dir == mp {
			// The kernel learns that name is missing (and keeps that)...
			if _, err := os.Lstat(filepath.Join(mp, name)); !os.IsNotExist(err) {
				t.Fatalf("lstat %s through the mount: %v, want it missing", name, err)
			}
		}
		// ...then the file appears behind its back (or, natively, just
		// appears).
		p := filepath.Join(backing, name)
		if err := os.WriteFile(p, []byte("content\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, 0o777|os.ModeSetuid|os.ModeSetgid); err != nil {
			t.Fatal(err)
		}
		args := []string{"python3", "-c", script, name, how}
		if dropFSetID {
			args = append([]string{"setpriv", "--bounding-set=-fsetid"}, args...)
		}
		cmd := exec.Command(args[0], args[1:]...)
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%v in %s: %v\n%s", args, dir, err, out)
		}
		fi, err := os.Lstat(p)
		if err != nil {
			t.Fatal(err)
		}
		return result{fi.Mode(), fi.Size()}
	}
	for _, how := range []string{"open", "create"} {
		for _, drop := range []bool{true, false} {
			name := how
			if drop {
				name += "-nofsetid"
			}
			want := run(native, native, name, how, drop)
			got := run(mp, ws, name, how, drop)
			if got != want {
				t.Errorf("%s: through the mount %v, size %d; natively %v, size %d", name, got.mode, got.size, want.mode, want.size)
			}
			if want.size != 0 || (drop && want.mode&os.ModeSetuid != 0) || (!drop && want.mode&os.ModeSetuid == 0) {
				t.Errorf("%s: natively %v, size %d: not what the test expects of the kernel", name, want.mode, want.size)
			}
		}
	}
}
