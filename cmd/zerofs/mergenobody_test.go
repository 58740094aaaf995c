package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/zerofs/zerofs/internal/testsupport"
)

// TestMergeAsNobody: nobody (uid 65534) merges a fork of an unmounted
// workspace, both nobody's. A changed fork file nobody cannot read fails
// the merge with a clear error and changes nothing; a symlink the fork
// added to a file nobody cannot read (/etc/shadow) merges as a symlink,
// never as that file's content; and nobody may not merge into root's
// mounted workspace (its control files are root's).
func TestMergeAsNobody(t *testing.T) {
	testsupport.RequireNobody(t)
	built.Need(t)
	dir, err := os.MkdirTemp("", "merge-nobody-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chown(dir, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	os.Chmod(dir, 0o755)
	// The test binary's directory is root's: nobody runs a copy.
	z := built.CopyTo(t, dir)
	run := func(script string) (bool, string) {
		t.Helper()
		return asNobodyOK(t, "cd "+dir+" && Z="+z+" && "+script)
	}
	// A workspace with a store, made by root's engine, then given to nobody.
	ws := filepath.Join(dir, "ws")
	os.Mkdir(ws, 0o755)
	writeFile(t, filepath.Join(ws, "a.txt"), "a\n")
	writeFile(t, filepath.Join(ws, "b.txt"), "b\n")
	s := &store{t: t, ws: ws}
	s.open()
	s.close()
	filepath.Walk(ws, func(p string, _ os.FileInfo, err error) error {
		if err == nil {
			err = os.Lchown(p, 65534, 65534)
		}
		return err
	})
	if ok, out := run(`$Z -C ws fork 0 ../fork`); !ok {
		t.Fatalf("fork as nobody: %s", out)
	}
	if ok, out := run(`echo theirs > fork/a.txt && chmod 000 fork/a.txt && echo ours > ws/b.txt && ln -s /etc/shadow fork/leak`); !ok {
		t.Fatalf("changes as nobody: %s", out)
	}
	ok, out := run(`$Z -C ws merge ../fork`)
	if ok || !strings.Contains(out, "zerofs: ") || !strings.Contains(out, "a.txt") || !strings.Contains(out, "permission denied") {
		t.Fatalf("merge of an unreadable fork file: ok %v, %q", ok, out)
	}
	if _, err := os.Lstat(filepath.Join(dir, "ws/leak")); !os.IsNotExist(err) {
		t.Fatalf("a failed merge changed the workspace: leak is there (%v)", err)
	}
	if ok, out := run(`chmod 644 fork/a.txt && $Z -C ws merge ../fork`); !ok {
		t.Fatalf("merge as nobody: %s", out)
	}
	if target, err := os.Readlink(filepath.Join(dir, "ws/leak")); err != nil || target != "/etc/shadow" {
		t.Errorf("leak: got %q %v, want the symlink", target, err)
	}
	if got := readTrim(t, filepath.Join(dir, "ws/a.txt")); got != "theirs" {
		t.Errorf("a.txt: got %q", got)
	}

	// Root's mounted workspace: nobody cannot ask its daemon to merge.
	built.NeedFUSE(t)
	root := filepath.Join(dir, "rootws")
	os.Mkdir(root, 0o755)
	writeFile(t, filepath.Join(root, "x"), "x\n")
	mountT(t, root)
	binOK(t, root, "fork", "0", filepath.Join(dir, "rootfork"))
	if ok, out := run(`$Z -C rootws merge ../rootfork`); ok || !strings.Contains(out, "zerofs: ") {
		t.Errorf("nobody's merge into root's mount: ok %v, %q", ok, out)
	}
}
