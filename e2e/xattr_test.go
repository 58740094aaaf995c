package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// xattrDump is every xattr of the named paths as getfattr prints it
// (names sorted, values in hex), with the ACLs as getfacl prints them.
func xattrDump(t *testing.T, dir string, paths ...string) string {
	t.Helper()
	args := append([]string{"-d", "-m", "-", "-e", "hex", "--absolute-names"}, paths...)
	out := must(t, dir, nil, "getfattr", args...)
	facl := must(t, dir, nil, "getfacl", append([]string{"-p", "-n"}, paths...)...)
	return out + facl
}

// Extended attributes and POSIX ACLs are before-state (issue 14, defect
// 7): a change of xattrs alone through the mount is a change and is
// captured; a view shows them as they were; a rewind puts back user.*,
// trusted.*, the access and default ACLs and a capability, all dropped by
// every content rewind before (a shared workspace's ACL silently gone).
func TestXattrsAndACLsAreRecordedViewedAndRewound(t *testing.T) {
	ws := sharedWS(t)
	mountWS(t, ws, "--allow-other")
	sh(t, ws, `
		mkdir shared && echo v1 > shared/notes && cp /bin/true tool
		setfattr -n user.origin -v alpha shared/notes
		setfattr -n trusted.mark -v 0x00ff01 shared/notes
		setfacl -m u:65534:rw shared/notes
		setfacl -d -m u:65534:rwx shared && setfacl -m u:65534:rx shared
		setcap cap_net_bind_service+ep tool`)
	paths := []string{"shared", "shared/notes", "tool"}
	before := xattrDump(t, ws, paths...)
	for _, want := range []string{"user.origin", "trusted.mark", "user:65534:rw-", "default:user:65534:rwx", "security.capability"} {
		if !strings.Contains(before, want) {
			t.Fatalf("setup: %q missing from\n%s", want, before)
		}
	}
	s1 := step(t, ws, "xattrs only")
	// Changes of xattrs alone.
	sh(t, ws, `
		setfattr -n user.origin -v beta shared/notes
		setfattr -x trusted.mark shared/notes
		setfacl -b shared/notes && setfacl -k shared
		setcap -r tool`)
	if got := xattrDump(t, view(ws, s1), paths...); got != before {
		t.Fatalf("@%d shows other xattrs than the workspace had:\n%s\nwant\n%s", s1, got, before)
	}
	out := zerofsOK(t, ws, "rewind", itoa(s1))
	if got := xattrDump(t, ws, paths...); got != before {
		t.Fatalf("after a rewind of xattr changes (%s):\n%s\nwant\n%s", strings.TrimSpace(out), got, before)
	}

	// A content rewind keeps them too.
	s2 := step(t, ws, "content")
	sh(t, ws, "echo v2 > shared/notes && cp /bin/false tool && rm -rf shared/sub && echo x > shared/new")
	zerofsOK(t, ws, "rewind", itoa(s2))
	if got := xattrDump(t, ws, paths...); got != before {
		t.Fatalf("after a content rewind:\n%s\nwant\n%s", got, before)
	}
	if b, _ := os.ReadFile(filepath.Join(ws, "shared/notes")); string(b) != "v1\n" {
		t.Fatalf("shared/notes after the rewind: %q", b)
	}
	// The new file took the directory's default ACL, as natively.
	if out := must(t, ws, nil, "getfacl", "-p", "-n", "shared/notes"); !strings.Contains(out, "user:65534:rw-") {
		t.Fatalf("getfacl shared/notes: %s", out)
	}
	// And nobody, whom the ACL lets write, still may.
	mustNobody(t, ws, "echo by-acl >> shared/notes")
}
