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

// TestForkKeepsXattrs: issue 14, defect 7, for fork. `zerofs fork` wrote
// every file and directory without its xattrs: user.*, the ACLs (a shared
// directory's default ACL too) and capabilities were gone in the fork. A
// fork keeps them as a rewind does, and keeps a capability only under the
// rule of a setuid bit: the fork's files are the forking user's, so root's
// fork keeps the capability (and setuid bit) of root's tool and neither
// of nobody's nbtool (a setuid, capable program of nobody's must not
// become root's). Both ways: from the mount's view, and from the store
// when unmounted.
func TestForkKeepsXattrs(t *testing.T) {
	ws := sharedWS(t)
	if err := os.Mkdir(filepath.Join(ws, "pub"), 0o777); err != nil {
		t.Fatal(err)
	}
	os.Chmod(filepath.Join(ws, "pub"), 0o777)
	mountWS(t, ws, "--allow-other")
	mustNobody(t, filepath.Join(ws, "pub"), "cp /bin/true nbtool && chmod 755 nbtool")
	sh(t, ws, `
		mkdir shared && echo v1 > shared/notes && cp /bin/true tool
		chmod 755 shared && chmod 644 shared/notes
		setfattr -n user.origin -v alpha shared/notes
		setfacl -m u:65534:rw shared/notes
		setfacl -d -m u:65534:rwx shared && setfacl -m u:65534:rx shared
		setcap cap_net_bind_service+ep tool && chmod 4755 tool
		setcap cap_net_bind_service+ep pub/nbtool`)
	mustNobody(t, filepath.Join(ws, "pub"), "chmod 4755 nbtool && setfattr -n user.by -v nobody nbtool")
	s1 := step(t, ws, "state")
	sh(t, ws, `setfattr -x user.origin shared/notes && setfacl -b shared/notes && setfacl -k shared && setcap -r tool && rm pub/nbtool`)
	step(t, ws, "after")
	paths := []string{"shared", "shared/notes", "tool", "pub/nbtool"}
	at := xattrDump(t, view(ws, s1), paths...)
	for _, x := range []string{"user.origin", "user:65534:rw-", "default:user:65534:rwx", "security.capability", "user.by"} {
		if !strings.Contains(at, x) {
			t.Fatalf("setup: @%d lacks %q:\n%s", s1, x, at)
		}
	}
	if strings.Count(at, "security.capability") != 2 {
		t.Fatalf("setup: @%d shows the capabilities:\n%s", s1, at)
	}
	// What root's fork must hold: nbtool's capability gone, and every
	// file root's.
	want := withoutCapabilityOf(at, "pub/nbtool")
	check := func(how, fork string) {
		t.Helper()
		if got := xattrDump(t, fork, paths...); noOwners(got) != noOwners(want) {
			t.Errorf("%s: the fork's xattrs:\n%s\nwant\n%s", how, got, want)
		}
		for p, setuid := range map[string]bool{"tool": true, "pub/nbtool": false} {
			fi, err := os.Stat(filepath.Join(fork, p))
			if err != nil {
				t.Fatal(err)
			}
			if got := fi.Mode()&os.ModeSetuid != 0; got != setuid {
				t.Errorf("%s: %s is %v, setuid want %v", how, p, fi.Mode(), setuid)
			}
		}
	}
	top := filepath.Dir(ws)
	mounted := filepath.Join(top, "fork-mounted")
	zerofsOK(t, ws, "fork", itoa(s1), mounted)
	check("fork of the mount", mounted)
	zerofsOK(t, "/", "umount", ws)
	unmounted := filepath.Join(top, "fork-unmounted")
	zerofsOK(t, ws, "fork", itoa(s1), unmounted)
	check("fork of the store", unmounted)
}

// withoutCapabilityOf is an xattrDump without the security.capability
// line of file p.
func withoutCapabilityOf(dump, p string) string {
	var out []string
	in := false
	for _, l := range strings.SplitAfter(dump, "\n") {
		if strings.HasPrefix(l, "# file: ") {
			in = strings.TrimSpace(strings.TrimPrefix(l, "# file: ")) == p
		}
		if in && strings.HasPrefix(l, "security.capability=") {
			continue
		}
		out = append(out, l)
	}
	return strings.Join(out, "")
}

// noOwners is a dump without getfacl's "# owner:", "# group:" and
// "# flags:" lines (the set-id bits are checked on their own).
func noOwners(dump string) string {
	var out []string
	for _, l := range strings.SplitAfter(dump, "\n") {
		if !strings.HasPrefix(l, "# owner:") && !strings.HasPrefix(l, "# group:") && !strings.HasPrefix(l, "# flags:") {
			out = append(out, l)
		}
	}
	return strings.Join(out, "")
}

// TestXattrOnlyStepIsShownAndReverted (issue 27, section 4): a step that
// only changes ACLs or xattrs is a change like any other: `log --stat`
// names what changed, `show` and `diff` print it, `revert` puts it back
// (it said "nothing to change"), and a later change of the same xattr is a
// conflict. In a mixed step, revert puts back a directory's default ACL.
func TestXattrOnlyStepIsShownAndReverted(t *testing.T) {
	ws := sharedWS(t)
	mountWS(t, ws)
	sh(t, ws, `
		echo a > f && echo g > g && mkdir d
		setfacl -m u:65534:rw f
		setfattr -n user.k -v v0 g
		setfacl -d -m u:65534:rwx d`)
	before := xattrDump(t, ws, "f", "g", "d")

	s1 := step(t, ws, "acl only")
	sh(t, ws, "setfacl -b f")
	s2 := step(t, ws, "xattr only")
	sh(t, ws, "setfattr -n user.k -v v1 g")
	s3 := step(t, ws, "mixed")
	sh(t, ws, "setfacl -k d && echo new > d/new && echo b > f")
	zerofsOK(t, ws, "step", "after")

	stat := zerofsOK(t, ws, "log", "--stat", "--all")
	for _, want := range []string{"f  (mode 0664 -> 0644, ACL)", "xattrs    g  (user.k)", "xattrs    d/  (default ACL)"} {
		if !strings.Contains(stat, want) {
			t.Errorf("log --stat lacks %q:\n%s", want, stat)
		}
	}
	if out := zerofsOK(t, ws, "show", itoa(s2)); !strings.Contains(out, "xattr user.k v0 -> v1") {
		t.Errorf("show %d:\n%s", s2, out)
	}
	if out := zerofsOK(t, ws, "diff", itoa(s1), itoa(s2)); !strings.Contains(out, "ACL u::rw-,u:65534:rw-,g::r--,m::rw-,o::r-- -> (none)") {
		t.Errorf("diff %d %d:\n%s", s1, s2, out)
	}

	// The mixed step first: its revert gives d its default ACL back.
	if out := zerofsOK(t, ws, "revert", itoa(s3)); !strings.Contains(out, "reverted step") {
		t.Fatalf("revert %d: %s", s3, out)
	}
	if out := must(t, ws, nil, "getfacl", "-p", "-n", "d"); !strings.Contains(out, "default:user:65534:rwx") {
		t.Errorf("d after the revert of the mixed step lost its default ACL:\n%s", out)
	}
	if exists(filepath.Join(ws, "d/new")) {
		t.Error("d/new survived the revert of the step that made it")
	}
	// A later change of the same xattr conflicts.
	zerofsOK(t, ws, "step", "later")
	sh(t, ws, "setfattr -n user.k -v v2 g")
	if out, err := zerofs(t, ws, "revert", itoa(s2)); err == nil || !strings.Contains(out, "conflicts with later changes to g") {
		t.Errorf("revert %d over a later xattr change: %v\n%s", s2, err, out)
	}
	sh(t, ws, "setfattr -n user.k -v v1 g")
	for _, s := range []int64{s2, s1} {
		if out := zerofsOK(t, ws, "revert", itoa(s)); !strings.Contains(out, "reverted step") || !strings.Contains(out, "restored 1") {
			t.Errorf("revert %d: %s", s, out)
		}
	}
	if got := xattrDump(t, ws, "f", "g", "d"); got != before {
		t.Errorf("after the reverts:\n%s\nwant\n%s", got, before)
	}
}
