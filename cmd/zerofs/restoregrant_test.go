package main

import (
	"bytes"
	"encoding/base64"
	binenc "encoding/binary"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/zerofs/zerofs/internal/testsupport"
)

// aclGranting is a system.posix_acl_access value (Linux's xattr form)
// that gives the owner and user uid read and write, and nobody else
// anything.
func aclGranting(uid uint32) []byte {
	const undefined = 0xffffffff
	var b bytes.Buffer
	binenc.Write(&b, binenc.LittleEndian, uint32(2))
	for _, e := range []struct {
		tag, perm uint16
		id        uint32
	}{{1, 6, undefined}, {2, 6, uid}, {4, 0, undefined}, {0x10, 6, undefined}, {0x20, 0, undefined}} {
		binenc.Write(&b, binenc.LittleEndian, e)
	}
	return b.Bytes()
}

// asNobodyOK runs sh -c script as nobody and reports whether it succeeded,
// with what it said.
func asNobodyOK(t *testing.T, script string) (bool, string) {
	t.Helper()
	out, err := exec.Command("setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "sh", "-c", script).CombinedOutput()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatal(err)
	}
	return err == nil, string(out)
}

// TestRestorePlainReplicaGrantsNobody (issue 27, section 3): whoever can
// write a plain replica's bucket forges its base so that secret.txt has
// an ACL giving nobody (uid 65534) read and write, shared/ is 0777,
// open.txt is 0666 with a trusted.* xattr; the history holds the same
// grants as real before-states (an ACL and a 0777 directory, recorded by
// the root engine). Root's restore, with umask 022, grants nobody
// anything: nobody cannot read secret.txt, write open.txt or create in
// shared/, in the newest state or in an older one reached through the
// restored history's records, whose records no longer hold the ACL; the
// restore says what it dropped. With --same-owner nobody can read it:
// the grant was real.
func TestRestorePlainReplicaGrantsNobody(t *testing.T) {
	testsupport.RequireNobody(t)
	built.Need(t)
	testsupport.StartS3(t)
	s := newStore(t, map[string]string{"secret.txt": "secret\n", "open.txt": "open\n", "shared/keep": "k\n"})
	ws := s.ws
	acl := aclGranting(65534)
	if err := unix.Setxattr(filepath.Join(ws, "secret.txt"), "system.posix_acl_access", acl, 0); err != nil {
		t.Fatalf("set the ACL (the file system must keep ACLs): %v", err)
	}
	if err := os.Chmod(filepath.Join(ws, "shared"), 0o777); err != nil {
		t.Fatal(err)
	}
	before := s.step("one")
	s.change(func(ws string) error {
		if err := unix.Removexattr(filepath.Join(ws, "secret.txt"), "system.posix_acl_access"); err != nil {
			return err
		}
		if err := os.Chmod(filepath.Join(ws, "secret.txt"), 0o600); err != nil {
			return err
		}
		return os.Chmod(filepath.Join(ws, "shared"), 0o755)
	}, "secret.txt", "shared")
	s.step("two")
	s.close()
	const url = "s3://replicas/forged-grants"
	mustRun(t, s.ws, "replicate", "--once", url)
	forgeBase(t, url, func(base map[string]any) {
		m := baseFile(t, base, "secret.txt")
		m["mode"] = 0o660
		m["xattrs"] = map[string]any{"system.posix_acl_access": base64.StdEncoding.EncodeToString(acl)}
		baseFile(t, base, "shared")["mode"] = 0o777
		o := baseFile(t, base, "open.txt")
		o["mode"] = 0o666
		o["xattrs"] = map[string]any{"trusted.zerofs-test": base64.StdEncoding.EncodeToString([]byte("x")), "user.kept": base64.StdEncoding.EncodeToString([]byte("y"))}
	})

	top := t.TempDir()
	os.Chmod(filepath.Dir(top), 0o755)
	os.Chmod(top, 0o755)
	restore := func(args ...string) string {
		t.Helper()
		cmd := exec.Command("sh", append([]string{"-c", `umask 022 && exec "$0" "$@"`, binary, "restore"}, args...)...)
		cmd.Dir = "/"
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("zerofs restore %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	// nobodyDenied checks that nobody may neither read secret.txt, nor
	// write open.txt, nor create a file in shared/ of the restore in dir.
	nobodyDenied := func(what, dir string, withOpen bool) {
		t.Helper()
		if ok, out := asNobodyOK(t, "cat "+filepath.Join(dir, "secret.txt")); ok || !strings.Contains(out, "Permission denied") {
			t.Errorf("%s: nobody reading secret.txt: ok %v, %q; want Permission denied (the replica's ACL granted it)", what, ok, out)
		}
		if ok, out := asNobodyOK(t, "echo x > "+filepath.Join(dir, "shared", "new")); ok || !strings.Contains(out, "Permission denied") {
			t.Errorf("%s: nobody creating in shared/: ok %v, %q; want Permission denied (the replica made it 0777)", what, ok, out)
		}
		if withOpen {
			if ok, out := asNobodyOK(t, "echo x >> "+filepath.Join(dir, "open.txt")); ok || !strings.Contains(out, "Permission denied") {
				t.Errorf("%s: nobody writing open.txt: ok %v, %q; want Permission denied (the replica made it 0666)", what, ok, out)
			}
		}
	}

	dir := filepath.Join(top, "r")
	out := restore(url, dir)
	nobodyDenied("the newest state", dir, true)
	if ok, out := asNobodyOK(t, "cat "+filepath.Join(dir, "shared", "keep")); !ok {
		t.Errorf("nobody cannot read shared/keep (0644 in a 0755 directory): %s", out)
	}
	buf := make([]byte, 64)
	if _, err := unix.Getxattr(filepath.Join(dir, "open.txt"), "trusted.zerofs-test", buf); !errors.Is(err, unix.ENODATA) {
		t.Errorf("restored open.txt's trusted.zerofs-test: %v, want ENODATA (dropped)", err)
	}
	if n, err := unix.Getxattr(filepath.Join(dir, "open.txt"), "user.kept", buf); err != nil || string(buf[:n]) != "y" {
		t.Errorf("restored open.txt's user.kept: %q %v, want the replica's (user.* grants nothing)", buf[:max(n, 0)], err)
	}
	for _, want := range []string{"not sealed", "ACLs dropped: secret.txt", "umask (0022) withholds dropped: open.txt, secret.txt, shared",
		"trusted.* and security.* xattrs dropped: open.txt", "--same-owner"} {
		if !strings.Contains(out, want) {
			t.Errorf("restore's report lacks %q:\n%s", want, out)
		}
	}

	// An older state, reached by a rewind through the restored records.
	old := filepath.Join(top, "old")
	out = restore(url, old, "--at", fmt.Sprint(before))
	nobodyDenied(fmt.Sprintf("--at %d", before), old, false)
	if !strings.Contains(out, "ACLs dropped: secret.txt") || !strings.Contains(out, "shared") {
		t.Errorf("restore --at %d does not say what it dropped from the history:\n%s", before, out)
	}
	log, err := os.ReadFile(filepath.Join(old, ".zero", "events.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(log, []byte("posix_acl")) || bytes.Contains(log, []byte(`"mode":511`)) {
		t.Errorf("the restored history still records the ACL or the 0777 directory (a later rewind would grant them):\n%s", log)
	}

	// --same-owner takes the replica at its word: the grant is real.
	same := filepath.Join(top, "same")
	restore("--same-owner", url, same)
	if ok, out := asNobodyOK(t, "cat "+filepath.Join(same, "secret.txt")); !ok {
		t.Errorf("restore --same-owner: nobody cannot read secret.txt although the replica's ACL grants it: %s", out)
	}
	sameOld := filepath.Join(top, "same-old")
	restore("--same-owner", url, sameOld, "--at", fmt.Sprint(before))
	if ok, out := asNobodyOK(t, "echo x > "+filepath.Join(sameOld, "shared", "new")); !ok {
		t.Errorf("restore --same-owner --at %d: nobody cannot create in shared/ (0777 in the history): %s", before, out)
	}
}

// TestRestorePlainReplicaAsUserGrantsNobody: nobody (uid 65534), umask
// 022, restores a plain replica forged so that secret.txt has an ACL
// giving uid 4242 read and write and open.txt is 0666: another user
// (4242) can neither read the one nor write the other, and the restore
// says what it dropped (issue 27, section 3).
func TestRestorePlainReplicaAsUserGrantsNobody(t *testing.T) {
	testsupport.RequireNobody(t)
	built.Need(t)
	testsupport.StartS3(t)
	s := newStore(t, map[string]string{"secret.txt": "secret\n", "open.txt": "open\n"})
	s.step("one")
	s.close()
	const url = "s3://replicas/forged-user-grants"
	mustRun(t, s.ws, "replicate", "--once", url)
	forgeBase(t, url, func(base map[string]any) {
		m := baseFile(t, base, "secret.txt")
		m["mode"] = 0o660
		m["xattrs"] = map[string]any{"system.posix_acl_access": base64.StdEncoding.EncodeToString(aclGranting(4242))}
		baseFile(t, base, "open.txt")["mode"] = 0o666
	})
	mine, bin := nobodysDir(t, "mine")
	dir := filepath.Join(mine, "r")
	cmd := exec.Command("setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "sh", "-c", `umask 022 && exec "$0" restore "$1" "$2"`, bin, url, dir)
	cmd.Dir = "/"
	cmd.Env = append(os.Environ(), "HOME="+mine, "XDG_STATE_HOME="+filepath.Join(mine, "state"))
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("restore as nobody: %v\n%s", err, out)
	}
	for _, want := range []string{"ACLs dropped: secret.txt", "umask (0022) withholds dropped: open.txt, secret.txt"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("nobody's restore does not say %q:\n%s", want, out)
		}
	}
	as4242 := func(script string) (bool, string) {
		out, err := exec.Command("setpriv", "--reuid=4242", "--regid=4242", "--clear-groups", "sh", "-c", script).CombinedOutput()
		return err == nil, string(out)
	}
	if ok, out := as4242("cat " + filepath.Join(dir, "secret.txt")); ok || !strings.Contains(out, "Permission denied") {
		t.Errorf("uid 4242 reading nobody's restored secret.txt: ok %v, %q; want Permission denied (the replica's ACL granted it)", ok, out)
	}
	if ok, out := as4242("echo x >> " + filepath.Join(dir, "open.txt")); ok || !strings.Contains(out, "Permission denied") {
		t.Errorf("uid 4242 writing nobody's restored open.txt: ok %v, %q; want Permission denied (the replica made it 0666)", ok, out)
	}
}
