package e2e

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/zerofs/zerofs/internal/testsupport"
)

// Who may do what under a mount (SPEC.md, Trust), tried as a second local
// user: nobody (65534), through setpriv, against a root daemon mounted with
// --allow-other.

// sharedWS makes a workspace on a path every user can walk (t.TempDir is
// 0700) and returns it; cleanup removes it.
func sharedWS(t *testing.T) string {
	t.Helper()
	built.NeedFUSE(t)
	dir, err := os.MkdirTemp("", "zerofs-trust-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	ws := filepath.Join(dir, "ws")
	if err := os.Mkdir(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	return ws
}

// asNobody runs a shell script in dir as nobody, with no groups, and
// returns its combined output.
func asNobody(t *testing.T, dir, script string, extra ...string) (string, error) {
	t.Helper()
	args := append([]string{"--reuid=65534", "--regid=65534", "--clear-groups"}, extra...)
	args = append(args, "/bin/sh", "-ec", script)
	return runCmd(t, cmdTimeout, dir, nil, "setpriv", args...)
}

func mustNobody(t *testing.T, dir, script string) string {
	t.Helper()
	out, err := asNobody(t, dir, script)
	if err != nil {
		t.Fatalf("as nobody in %s: %s: %v\n%s", dir, script, err, out)
	}
	return out
}

// deniedNobody runs script as nobody and wants it to fail with EACCES.
func deniedNobody(t *testing.T, dir, script string, extra ...string) {
	t.Helper()
	out, err := asNobody(t, dir, script, extra...)
	if err == nil || !strings.Contains(out, "Permission denied") {
		t.Errorf("as nobody: %s: got %v\n%s\nwant Permission denied", script, err, out)
	}
}

type owned struct {
	uid, gid uint32
	mode     uint32 // permission bits with setuid, setgid, sticky
	mtime    time.Time
}

func lstatOwned(t *testing.T, p string) owned {
	t.Helper()
	var st unix.Stat_t
	if err := unix.Lstat(p, &st); err != nil {
		t.Fatal(err)
	}
	return owned{st.Uid, st.Gid, st.Mode & 0o7777, time.Unix(st.Mtim.Unix()).UTC()}
}

// The scenario: nobody copies id(1) into a directory it owns,
// makes it setuid, and overwrites it in a later step. `zerofs undo` (by
// root, who mounted) must give the file back to nobody, setuid as nobody
// and never as root: run from the backing directory, where no nosuid
// mount option protects it, it must not give nobody euid 0.
func TestUndoNeverMakesAUsersFileSetuidRoot(t *testing.T) {
	ws := sharedWS(t)
	d := filepath.Join(ws, "d")
	if err := os.Mkdir(d, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(d, nobody, nobody); err != nil {
		t.Fatal(err)
	}
	mountWS(t, ws, "--allow-other")
	step(t, ws, "copy id")
	mustNobody(t, ws, "cp /usr/bin/id d/id && chmod 4755 d/id")
	before := lstatOwned(t, d+"/id")
	if before.uid != nobody || before.mode != 0o4755 {
		t.Fatalf("d/id before: %+v, want nobody's, 4755", before)
	}
	step(t, ws, "overwrite id")
	mustNobody(t, ws, "cp /bin/true d/id")
	if out := zerofsOK(t, ws, "undo"); !strings.Contains(out, "restored 1") {
		t.Fatalf("zerofs undo: %s", out)
	}
	check := func(where string) {
		t.Helper()
		got := lstatOwned(t, d+"/id")
		if got.mode&unix.S_ISUID != 0 && got.uid == 0 {
			t.Fatalf("%s: d/id is setuid root after undo (%04o %d:%d)", where, got.mode, got.uid, got.gid)
		}
		if got.uid != nobody || got.gid != nobody || got.mode != before.mode || !got.mtime.Equal(before.mtime) {
			t.Fatalf("%s: d/id after undo: %+v, want %+v", where, got, before)
		}
		id, _ := os.ReadFile("/usr/bin/id")
		if b, _ := os.ReadFile(d + "/id"); string(b) != string(id) {
			t.Fatalf("%s: d/id after undo is not id(1) (%d bytes)", where, len(b))
		}
	}
	check("through the mount")
	if out := strings.TrimSpace(mustNobody(t, ws, "d/id -u")); out != "65534" {
		t.Fatalf("d/id -u as nobody through the mount: %q, want 65534", out)
	}
	zerofsOK(t, "/", "umount", ws)
	if testsupport.FUSEMounted(ws) {
		t.Fatal("still mounted after zerofs umount")
	}
	check("on the backing directory")
	if out := strings.TrimSpace(mustNobody(t, ws, "d/id -u")); out != "65534" {
		t.Fatalf("d/id -u as nobody on the backing directory: %q, want 65534 (not root)", out)
	}
}

// Rewound files, directories and symlinks keep the owners and mtimes
// their before-states recorded, whoever made them.
func TestRewindKeepsOwnersAndMtimes(t *testing.T) {
	ws := sharedWS(t)
	if err := os.Chown(ws, nobody, nobody); err != nil {
		t.Fatal(err)
	}
	mountWS(t, ws, "--allow-other")
	step(t, ws, "setup")
	mustNobody(t, ws, `mkdir sub && echo mine > sub/n.txt && ln -s n.txt sub/link &&
		touch -h -d '2020-02-03 04:05:06.123456789Z' sub/n.txt sub/link sub`)
	sh(t, ws, `echo roots > r.txt && chmod 640 r.txt && chown 1000:1001 r.txt &&
		touch -d '2019-01-01 00:00:00.5Z' r.txt`)
	T := step(t, ws, "change them")
	want := map[string]owned{}
	for _, p := range []string{"sub", "sub/n.txt", "sub/link", "r.txt"} {
		want[p] = lstatOwned(t, filepath.Join(ws, p))
	}
	if want["sub/n.txt"].uid != nobody || want["r.txt"].uid != 1000 {
		t.Fatalf("setup: %+v", want)
	}
	// sub is captured by its chmod, before removing its entries changes
	// its mtime (a directory's mtime moves with its entries, which capture
	// only themselves).
	mustNobody(t, ws, "chmod 700 sub && rm sub/n.txt sub/link")
	sh(t, ws, "echo changed > r.txt && chown 0:0 r.txt")
	rewindTo(t, ws, T)
	for p, w := range want {
		if got := lstatOwned(t, filepath.Join(ws, p)); got != w {
			t.Errorf("%s after rewind: %+v, want %+v", p, got, w)
		}
	}
	if got := readFile(t, filepath.Join(ws, "sub/n.txt")); got != "mine\n" {
		t.Errorf("sub/n.txt after rewind = %q", got)
	}
}

// mountOptions is the super options of the mount at dir.
func mountOptions(t *testing.T, dir string) string {
	t.Helper()
	if ms := testsupport.MountsAt(dir); len(ms) > 0 {
		return ms[len(ms)-1].VFSOptions
	}
	t.Fatalf("%s is not in /proc/self/mountinfo", dir)
	return ""
}

// A view shows each path with the owner and mode it had, so nobody, who
// owns the workspace, cannot read root's 0600 file through @0/; root can.
// Records from older history name no owner: they are shown as root's and
// at most 0600 (files) or 0700 (directories).
func TestViewHidesPastContentFromUsersWhoCouldNotReadIt(t *testing.T) {
	ws := sharedWS(t)
	writeFile(t, filepath.Join(ws, "secret"), "root only\n", 0o600)
	writeFile(t, filepath.Join(ws, "pub"), "anyone\n", 0o644)
	if err := os.Mkdir(filepath.Join(ws, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{ws, ws + "/pub", ws + "/sub"} {
		if err := os.Chown(p, nobody, nobody); err != nil {
			t.Fatal(err)
		}
	}
	mountWS(t, ws, "--allow-other")
	if opts := mountOptions(t, ws); !strings.Contains(opts, "default_permissions") {
		t.Fatalf("mount options %q: no default_permissions, the kernel would not check views", opts)
	}
	step(t, ws, "change")
	sh(t, ws, "echo gone > secret && echo changed > pub && chmod 700 sub")
	v := view(ws, 0)
	deniedNobody(t, ws, "cat "+v+"/secret")
	if got := must(t, ws, nil, "cat", v+"/secret"); got != "root only\n" {
		t.Fatalf("root reads @0/secret = %q", got)
	}
	if got := mustNobody(t, ws, "cat "+v+"/pub && ls "+v+"/sub"); got != "anyone\n" {
		t.Fatalf("nobody reads @0/pub = %q", got)
	}
	if got := lstatOwned(t, v+"/secret"); got.uid != 0 || got.mode != 0o600 {
		t.Fatalf("@0/secret: %+v, want root's, 0600", got)
	}
	if got, want := lstatOwned(t, v+"/pub"), lstatOwned(t, view(ws, 1)+"/pub"); got.uid != nobody || got.mode != 0o644 || got != want {
		t.Fatalf("@0/pub: %+v, want nobody's, 0644, as @1/pub %+v", got, want)
	}

	// The same history as an older zerofs wrote it: no uid, gid or mtime.
	zerofsOK(t, "/", "umount", ws)
	events := filepath.Join(ws, ".zero/events.jsonl")
	b, err := os.ReadFile(events)
	if err != nil {
		t.Fatal(err)
	}
	old := regexp.MustCompile(`,"(uid|gid)":\d+|,"mtime":"[^"]*"`).ReplaceAll(b, nil)
	if strings.Contains(string(old), `"uid"`) || len(old) == len(b) {
		t.Fatalf("could not strip the owners from the log:\n%s", old)
	}
	if err := os.WriteFile(events, old, 0o600); err != nil {
		t.Fatal(err)
	}
	mountWS(t, ws, "--allow-other")
	for p, want := range map[string]uint32{"secret": 0o600, "pub": 0o600, "sub": 0o700} {
		if got := lstatOwned(t, v+"/"+p); got.uid != 0 || got.gid != 0 || got.mode != want {
			t.Errorf("@0/%s from an unowned record: %d:%d %04o, want root's, %04o", p, got.uid, got.gid, got.mode, want)
		}
	}
	deniedNobody(t, ws, "cat "+v+"/pub")
	deniedNobody(t, ws, "ls "+v+"/sub")
}

// The control files are the mounting user's: in a root mount with
// --allow-other of a workspace nobody owns, nobody can neither begin a step,
// record a step's result, rewind, gc, nor read the log or status; it can read
// head. The daemon
// checks at open too: a caller whom the kernel lets through (CAP_DAC_OVERRIDE)
// is still refused.
func TestControlFilesRefuseOtherUsers(t *testing.T) {
	ws := sharedWS(t)
	writeFile(t, filepath.Join(ws, "f"), "one\n", 0o666)
	for _, p := range []string{ws, ws + "/f"} {
		if err := os.Chown(p, nobody, nobody); err != nil {
			t.Fatal(err)
		}
	}
	mountWS(t, ws, "--allow-other")
	T := step(t, ws, "edit")
	mustNobody(t, ws, "echo two > f")
	h := head(t, ws)
	for name, want := range map[string]uint32{"step": 0o600, "rewind": 0o600, "gc": 0o600, "log": 0o600, "status": 0o600, "head": 0o644, "result": 0o600, "turn": 0o600} {
		if got := lstatOwned(t, filepath.Join(ws, ".zero", name)); got.uid != 0 || got.gid != 0 || got.mode != want {
			t.Errorf(".zero/%s: %d:%d %04o, want root's, %04o", name, got.uid, got.gid, got.mode, want)
		}
	}
	tries := []string{
		"echo mine > .zero/step",
		"echo " + itoa(T) + " > .zero/rewind",
		"echo 1 > .zero/gc",
		`echo '{"step": ` + itoa(T) + `, "status": "error"}' > .zero/result`,
		"cat .zero/log",
		"cat .zero/status",
		"cat .zero/step",
	}
	for _, script := range tries {
		deniedNobody(t, ws, script)
		// Past the kernel's check, the daemon's own.
		deniedNobody(t, ws, script, "--inh-caps=+dac_override", "--ambient-caps=+dac_override")
	}
	if got := strings.TrimSpace(mustNobody(t, ws, "cat .zero/head")); got != itoa(h) {
		t.Errorf("nobody reads .zero/head = %q, want %d", got, h)
	}
	bin := built.CopyTo(t, filepath.Dir(ws)) // where nobody can run it
	if out, err := asNobody(t, ws, bin+" undo"); err == nil || !strings.Contains(out, "mounted by another user") {
		t.Errorf("zerofs undo as nobody: %v\n%s\nwant a failure saying the mount is another user's", err, out)
	}
	// An agent's hook run by nobody warns and never blocks the agent.
	hook := `echo '{"tool_name":"Edit","cwd":"` + ws + `"}' | ` + bin + " step --hook"
	if out, err := asNobody(t, ws, hook); err != nil || !strings.Contains(out, "warning") {
		t.Errorf("zerofs step --hook as nobody: %v\n%s\nwant exit 0 with a warning", err, out)
	}
	if got := readFile(t, filepath.Join(ws, "f")); got != "two\n" || head(t, ws) != h {
		t.Errorf("after nobody's tries: f = %q, head %d, want two, %d (nothing changed)", got, head(t, ws), h)
	}
	// Root may.
	rewindTo(t, ws, T)
	if got := readFile(t, filepath.Join(ws, "f")); got != "one\n" {
		t.Errorf("after root's rewind f = %q, want one", got)
	}
}

// The owner of a workspace can replace its .zero while it is unmounted. A
// log forged there could name a file of the forger's content as root's and
// setuid, for a root rewind to create: zerofs refuses a store (or log)
// that is not the user's who opens it, mounted or not.
func TestRootRefusesAStoreForgedByTheWorkspaceOwner(t *testing.T) {
	ws := sharedWS(t)
	if err := os.Chown(ws, nobody, nobody); err != nil {
		t.Fatal(err)
	}
	shell, err := os.ReadFile("/bin/sh")
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(shell)
	id := hex.EncodeToString(sum[:])
	store := filepath.Join(ws, ".zero")
	blob := filepath.Join(store, "blobs", "kept", id)
	if err := os.MkdirAll(filepath.Dir(blob), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(blob, shell, 0o600); err != nil {
		t.Fatal(err)
	}
	line := fmt.Sprintf(`{"id":"00000000-0000-4000-8000-000000000001","sessionId":"00000000-0000-4000-8000-000000000002",`+
		`"sequence":1,"type":"session_checkpoint","createdAt":"2026-01-01T00:00:00.000000000Z","payload":{"tool":"forged",`+
		`"files":[{"path":"evil","kind":"file","blob":"%s","absent":false,"skipped":false,"bytes":%d,"mode":%d,"uid":0,"gid":0}]}}`+"\n",
		id, len(shell), 0o4755)
	if err := os.WriteFile(filepath.Join(store, "events.jsonl"), []byte(line), 0o600); err != nil {
		t.Fatal(err)
	}
	// As if nobody had made them.
	filepath.Walk(store, func(p string, _ os.FileInfo, err error) error {
		if err == nil {
			err = os.Lchown(p, nobody, nobody)
		}
		return err
	})
	// Unmounted, the command opens the store itself.
	if out, err := zerofs(t, ws, "rewind", "0"); err == nil || !strings.Contains(out, "belongs to uid 65534") {
		t.Errorf("zerofs rewind 0 on nobody's store: %v\n%s\nwant a refusal naming the owner", err, out)
	}
	out, err := zerofs(t, "/", "mount", ws)
	if testsupport.FUSEMounted(ws) {
		t.Cleanup(func() { unmountT(t, ws, 0) })
		rewindTo(t, ws, 0)
	}
	if err == nil || !strings.Contains(out, "belongs to uid 65534") {
		t.Errorf("zerofs mount of nobody's store: %v\n%s\nwant a refusal naming the owner", err, out)
	}
	if fi, err := os.Lstat(filepath.Join(ws, "evil")); err == nil {
		t.Fatalf("the forged record was restored: evil is %v", fi.Mode())
	}
}
