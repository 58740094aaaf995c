package testsupport

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// Binary is the zerofs command built by BuildZerofs.
type Binary struct {
	// Path is the executable, empty when the build failed.
	Path string
	// Err says why the build failed.
	Err error
	dir string
}

// BuildZerofs builds cmd/zerofs once into a fresh temporary directory (call
// it from TestMain; Remove it when the tests are done). It is built without
// -race even under `go test -race`: the daemon is the system under test, not
// the test process, and a race build would make every FUSE request several
// times slower on a small machine.
func BuildZerofs() *Binary {
	dir, err := os.MkdirTemp("", "zerofs-test-bin-")
	if err != nil {
		return &Binary{Err: err}
	}
	b := &Binary{Path: filepath.Join(dir, "zerofs"), dir: dir}
	out, err := exec.Command("go", "build", "-o", b.Path, "github.com/zerofs/zerofs/cmd/zerofs").CombinedOutput()
	if err != nil {
		b.Path, b.Err = "", fmt.Errorf("go build cmd/zerofs: %v\n%s", err, out)
	}
	return b
}

// Dir is the temporary directory the binary is in: a place for other
// per-run files (a GOCACHE, say) that Remove deletes with it.
func (b *Binary) Dir() string { return b.dir }

// Remove deletes the binary and its directory.
func (b *Binary) Remove() {
	if b.dir != "" {
		os.RemoveAll(b.dir)
	}
}

// Need fails t when the binary did not build: the code is broken, which is
// never a reason to skip.
func (b *Binary) Need(t testing.TB) {
	t.Helper()
	switch {
	case b == nil:
		t.Fatal("the zerofs binary was not built (BuildZerofs in TestMain)")
	case b.Path == "":
		t.Fatal(b.Err)
	}
}

// NeedFUSE is Need, then RequireFUSE: a test that mounts with the binary.
func (b *Binary) NeedFUSE(t testing.TB) {
	t.Helper()
	b.Need(t)
	RequireFUSE(t)
}

// CopyTo copies the binary into dir as dir/zerofs, mode 0755, and returns
// its path: a copy another user can run, where the build directory is
// root's and closed to them.
func (b *Binary) CopyTo(t testing.TB, dir string) string {
	t.Helper()
	b.Need(t)
	data, err := os.ReadFile(b.Path)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, "zerofs")
	if err := os.WriteFile(p, data, 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}
