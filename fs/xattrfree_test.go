package fs

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// TestRemovalKeepsXattrsOfMountMadeFiles: a removal reads no xattrs of a
// file the mount created and knows to have none (xattrfree.go), so what
// makes it have some must be seen: an xattr set through the mount, and the
// access ACL a file inherits from its directory's default ACL. Each is in
// the removal's record (the view before the removal shows it).
func TestRemovalKeepsXattrsOfMountMadeFiles(t *testing.T) {
	m := mountT(t, Options{})
	mp := m.Mountpoint()
	if !m.fs.xattrFree {
		t.Skip("new files on the backing filesystem get xattrs of their own (a security module's label)")
	}
	d := filepath.Join(mp, "d")
	if err := os.Mkdir(d, 0o755); err != nil {
		t.Fatal(err)
	}
	set := filepath.Join(d, "set")
	plain := filepath.Join(d, "plain")
	writeFile(t, set, "x")
	writeFile(t, plain, "y")
	if err := unix.Setxattr(set, "user.zerofs", []byte("kept"), 0); err != nil {
		if err == unix.EOPNOTSUPP {
			t.Skip("backing filesystem has no user xattrs")
		}
		t.Fatal(err)
	}
	// A default ACL with a named user: files made below it get an access
	// ACL that is more than their mode bits (stored as an xattr).
	acl := filepath.Join(mp, "acl")
	if err := os.Mkdir(acl, 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("setfacl", "-d", "-m", "u:65534:r", acl).CombinedOutput(); err != nil {
		t.Skipf("setfacl: %v: %s", err, out)
	}
	inherited := filepath.Join(acl, "f")
	writeFile(t, inherited, "z")
	if _, err := unix.Getxattr(inherited, "system.posix_acl_access", nil); err != nil {
		t.Fatalf("the file made below a default ACL has no access ACL: %v", err)
	}

	seq := stepT(t, mp, "rm")
	for _, p := range []string{set, plain, inherited} {
		if err := os.Remove(p); err != nil {
			t.Fatal(err)
		}
	}
	buf := make([]byte, 256)
	got := func(n int) []byte { return buf[:max(n, 0)] }
	was := func(p string) string { rel, _ := filepath.Rel(mp, p); return filepath.Join(view(mp, seq), rel) }
	if n, err := unix.Getxattr(was(set), "user.zerofs", buf); err != nil || string(got(n)) != "kept" {
		t.Errorf("@%d/d/set user.zerofs: %q, %v; want the xattr set through the mount", seq, got(n), err)
	}
	if _, err := unix.Getxattr(was(inherited), "system.posix_acl_access", buf); err != nil {
		t.Errorf("@%d/acl/f system.posix_acl_access: %v; want the access ACL it inherited", seq, err)
	}
	if n, err := unix.Listxattr(was(plain), buf); err != nil || n != 0 {
		t.Errorf("@%d/d/plain xattrs: %q, %v; want none", seq, got(n), err)
	}
}
