package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/zerofs/zerofs/internal/testsupport"
)

// branchT makes each dir a branch of the mounted workspace ws (zerofs
// branch, run in ws) and always takes them off at the end of the test:
// their zerofs, then their overlay.
func branchT(t *testing.T, ws string, args ...string) string {
	t.Helper()
	for _, a := range args {
		if filepath.IsAbs(a) {
			d := a
			t.Cleanup(func() { unbranchT(t, d) })
		}
	}
	return binOK(t, ws, append([]string{"branch"}, args...)...)
}

func unbranchT(t *testing.T, dir string) {
	unmountT(t, dir)
	for range 8 {
		if err := unix.Unmount(dir, 0); err != nil {
			if err == unix.EINVAL || err == unix.ENOENT {
				return
			}
			unix.Unmount(dir, unix.MNT_DETACH)
		}
	}
}

// overlayAt reports whether an overlay is mounted at dir.
func overlayAt(dir string) bool {
	for _, m := range testsupport.MountsAt(dir) {
		if m.FSType == "overlay" {
			return true
		}
	}
	return false
}

type branchInfo struct {
	ID       string `json:"id"`
	Dir      string `json:"dir"`
	Base     uint64 `json:"base"`
	Mounted  bool   `json:"mounted"`
	Changed  int    `json:"changed"`
	Merged   uint64 `json:"merged"`
	Unmerged bool   `json:"unmerged"`
}

func branchList(t *testing.T, ws string) []branchInfo {
	t.Helper()
	var out []branchInfo
	if err := json.Unmarshal([]byte(binOK(t, ws, "branch", "--list", "--json")), &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestBranchCreateListDelete: zerofs branch makes several branches in one
// call, each a mounted copy of the workspace now; writes in a branch never
// reach the workspace, and the workspace's later changes never reach a
// branch's base; --at makes one of an older state; --list says where each
// is, its base, mounted or not and what it changed; --delete refuses a
// branch holding unmerged changes unless --force, and removes its copy-up
// layer and history. Bad directories are refused.
func TestBranchCreateListDelete(t *testing.T) {
	built.NeedFUSE(t)
	dir := t.TempDir()
	ws, b1, b2, old := filepath.Join(dir, "ws"), filepath.Join(dir, "b1"), filepath.Join(dir, "b2"), filepath.Join(dir, "old")
	os.MkdirAll(filepath.Join(ws, "src"), 0o755)
	writeFile(t, filepath.Join(ws, "a.txt"), "v1\n")
	writeFile(t, filepath.Join(ws, "src", "main.go"), "package main\n")
	mountT(t, ws)
	binOK(t, ws, "step", "first")
	first := readTrim(t, filepath.Join(ws, ".zero/head"))
	writeFile(t, filepath.Join(ws, "a.txt"), "v2\n")

	out := branchT(t, ws, b1, b2)
	if !strings.Contains(out, "branch "+b1+" at ") || !strings.Contains(out, "branch "+b2+" at ") {
		t.Fatalf("branch output: %q", out)
	}
	// Changes to a path the step had captured already, after the branch:
	// its base must not see them.
	writeFile(t, filepath.Join(ws, "a.txt"), "v3\n")
	os.Remove(filepath.Join(ws, "src", "main.go"))
	for _, b := range []string{b1, b2} {
		if got := readTrim(t, filepath.Join(b, "a.txt")); got != "v2" {
			t.Errorf("%s/a.txt: got %q, want the state at branching, v2", b, got)
		}
		if got := readTrim(t, filepath.Join(b, "src", "main.go")); got != "package main" {
			t.Errorf("%s/src/main.go: got %q", b, got)
		}
	}
	// Writes in a branch stay there.
	sh(t, b1, `echo b1 >> a.txt && echo new > new.txt && rm src/main.go && mkdir -p d && echo x > d/x`)
	if got := readTrim(t, filepath.Join(ws, "a.txt")); got != "v3" {
		t.Errorf("workspace a.txt: got %q after a branch's write", got)
	}
	if _, err := os.Stat(filepath.Join(ws, "new.txt")); err == nil {
		t.Error("a branch's new file reached the workspace")
	}
	if got := readTrim(t, filepath.Join(b2, "a.txt")); got != "v2" {
		t.Errorf("b2 saw b1's write: %q", got)
	}
	branchT(t, ws, old, "--at", first)
	if got := readTrim(t, filepath.Join(old, "a.txt")); got != "v1" {
		t.Errorf("--at %s: a.txt %q, want v1", first, got)
	}

	list := branchList(t, ws)
	if len(list) != 3 {
		t.Fatalf("--list: %+v", list)
	}
	byDir := map[string]branchInfo{}
	for _, in := range list {
		byDir[in.Dir] = in
	}
	if in := byDir[b1]; !in.Mounted || in.Changed < 4 || !in.Unmerged {
		t.Errorf("b1 in --list: %+v", in)
	}
	if in := byDir[b2]; !in.Mounted || in.Changed != 0 || in.Unmerged {
		t.Errorf("b2 in --list: %+v", in)
	}
	if in := byDir[old]; itoa64(in.Base) != first {
		t.Errorf("old's base: %+v, want %s", in, first)
	}
	text := binOK(t, ws, "branch", "--list")
	if !strings.Contains(text, b1+"  at ") || !strings.Contains(text, "mounted") {
		t.Errorf("--list:\n%s", text)
	}

	// Delete: refused while unmerged, then forced.
	wantFail(t, ws, 1, "holds changes not merged", "branch", "--delete", b1)
	if !testsupport.FUSEMounted(b1) {
		t.Fatal("a refused delete unmounted the branch")
	}
	binOK(t, ws, "branch", "--delete", "--force", b1) // --force before DIR, as `git branch -D` users type it
	if testsupport.FUSEMounted(b1) || overlayAt(b1) {
		t.Error("a deleted branch is still mounted")
	}
	if _, err := os.Stat(b1); err == nil {
		t.Error("a deleted branch's directory is still there")
	}
	binOK(t, ws, "branch", "--delete", b2) // nothing to merge: no --force needed
	if n := len(branchList(t, ws)); n != 1 {
		t.Errorf("after two deletes, %d branches listed", n)
	}
	store := storeOf(t, ws)
	if ents, _ := os.ReadDir(filepath.Join(store, "branches")); len(ents) != 1 {
		t.Errorf("the store keeps %d branch directories, want 1", len(ents))
	}

	// gc keeps the remaining branch's base, and says so.
	head := readTrim(t, filepath.Join(ws, ".zero/head"))
	if out := binOK(t, ws, "gc", "--before", head); !strings.Contains(out, "kept the history from "+first+" on: a branch's base") {
		t.Errorf("gc past a branch's base: %q", out)
	}
	if got := readTrim(t, filepath.Join(ws, "@"+first, "a.txt")); got != "v1" {
		t.Errorf("@%s/a.txt after gc: %q", first, got)
	}
	if dry := binOK(t, ws, "gc", "--dry-run", "--before", head); !strings.Contains(dry, "history starts at "+first) {
		t.Errorf("gc --dry-run past a branch's base: %q", dry)
	}
	wantFail(t, ws, 1, "no such sequence: 999999", "branch", filepath.Join(dir, "late"), "--at", "999999")

	// Refused: inside the workspace, not empty, not a branch to delete.
	wantFail(t, ws, 1, "inside the workspace", "branch", filepath.Join(ws, "sub"))
	full := filepath.Join(dir, "full")
	os.Mkdir(full, 0o755)
	writeFile(t, filepath.Join(full, "f"), "f\n")
	wantFail(t, ws, 1, "is not empty", "branch", full)
	wantFail(t, ws, 1, "is not a branch of this workspace", "branch", "--delete", full)
	wantFail(t, ws, 2, "want DIR", "branch")
}

func itoa64(n uint64) string { return itoaInt(int(n)) }

// storeOf is the mounted workspace's store on disk (beneath the daemon's
// descriptors), from zerofs status --json.
func storeOf(t *testing.T, ws string) string {
	t.Helper()
	var st struct {
		PID   int    `json:"pid"`
		Store string `json:"store"`
	}
	json.Unmarshal([]byte(binOK(t, ws, "status", "--json")), &st)
	ents, _ := os.ReadDir(filepath.Join("/proc", itoaInt(st.PID), "fd"))
	for _, e := range ents {
		fd := filepath.Join("/proc", itoaInt(st.PID), "fd", e.Name())
		if target, _ := os.Readlink(fd); target == filepath.Join(ws, ".zero") {
			return fd
		}
	}
	t.Fatalf("no store found for %s (%+v)", ws, st)
	return ""
}

// TestBranchIsAWorkspace: a branch has its own steps, @T/, log and undo.
func TestBranchIsAWorkspace(t *testing.T) {
	built.NeedFUSE(t)
	dir := t.TempDir()
	ws, b := filepath.Join(dir, "ws"), filepath.Join(dir, "b")
	os.Mkdir(ws, 0o755)
	writeFile(t, filepath.Join(ws, "a.txt"), "base\n")
	mountT(t, ws)
	branchT(t, ws, b)
	binOK(t, b, "step", "edit in the branch")
	head := readTrim(t, filepath.Join(b, ".zero/head"))
	sh(t, b, `echo branch > a.txt`)
	if got := readTrim(t, filepath.Join(b, "@"+head, "a.txt")); got != "base" {
		t.Errorf("branch @%s/a.txt: %q", head, got)
	}
	if log := binOK(t, b, "log"); !strings.Contains(log, `edit in the branch`) {
		t.Errorf("branch log:\n%s", log)
	}
	if out := binOK(t, b, "undo"); !strings.Contains(out, `undid step`) {
		t.Errorf("undo in the branch: %q", out)
	}
	if got := readTrim(t, filepath.Join(b, "a.txt")); got != "base" {
		t.Errorf("after undo in the branch: %q", got)
	}
	if got := readTrim(t, filepath.Join(ws, "a.txt")); got != "base" {
		t.Errorf("workspace: %q", got)
	}
	// A file past passthrough's size, written and read back: the branch's
	// backing files are on the overlay, where the kernel refuses
	// passthrough (stack depth), and the daemon serves them itself.
	big := strings.Repeat("0123456789abcdef", 256<<10)
	writeFile(t, filepath.Join(b, "big"), big)
	if got, err := os.ReadFile(filepath.Join(b, "big")); err != nil || string(got) != big {
		t.Errorf("a 4 MiB file read back from the branch: %d bytes, %v", len(got), err)
	}
	if out := binOK(t, b, "verify"); !strings.Contains(out, "ok") {
		t.Errorf("verify in the branch: %q", out)
	}
}

// TestBranchMerge: zerofs merge DIR of a branch, run in the workspace: a
// conflict exits 1 naming the path with both sides' step and label and
// changes nothing; the dry run previews; --theirs settles; text changes
// that do not overlap merge line by line; the log names the branch and
// its steps; undo takes the merge back; a second merge of the branch has
// the first merge's state of the branch as its base (a path merged line
// by line is no conflict then), and brings in only what changed since.
func TestBranchMerge(t *testing.T) {
	built.NeedFUSE(t)
	dir := t.TempDir()
	ws, b := filepath.Join(dir, "ws"), filepath.Join(dir, "b")
	os.Mkdir(ws, 0o755)
	writeFile(t, filepath.Join(ws, "a.txt"), "1\n2\n3\n4\n5\n")
	writeFile(t, filepath.Join(ws, "b.txt"), "b\n")
	writeFile(t, filepath.Join(ws, "c.txt"), "c1\nc2\nc3\n")
	os.MkdirAll(filepath.Join(ws, "gone", "deep"), 0o755)
	writeFile(t, filepath.Join(ws, "gone", "deep", "x"), "x\n")
	mountT(t, ws)
	branchT(t, ws, b)

	binOK(t, ws, "step", "ours edit")
	sh(t, ws, `sed -i 's/^1$/ONE/' a.txt && sed -i 's/^c2$/c2 ours/' c.txt`)
	binOK(t, b, "step", "theirs edit")
	sh(t, b, `sed -i 's/^5$/FIVE/' a.txt && sed -i 's/^c2$/c2 theirs/' c.txt && rm b.txt && rm -rf gone && mkdir -p n/m && echo new > n/m/new.txt && chmod 600 n/m/new.txt`)

	before := binOK(t, ws, "log")
	r := bin(t, ws, "", "merge", b)
	if r.code != 1 || !strings.Contains(r.stderr, "conflict c.txt") || !strings.Contains(r.stderr, `"ours edit"`) ||
		!strings.Contains(r.stderr, `"theirs edit"`) || !strings.Contains(r.stderr, "nothing changed") {
		t.Fatalf("merge with a conflict: exit %d, stderr %q", r.code, r.stderr)
	}
	if got := binOK(t, ws, "log"); got != before || readTrim(t, filepath.Join(ws, "b.txt")) != "b" {
		t.Fatalf("a refused merge changed something:\n%s", got)
	}
	dry := binOK(t, ws, "merge", "--dry-run", b, "--theirs", "c.txt")
	for _, want := range []string{"restore  a.txt  +1 -1", "delete   b.txt", "restore  c.txt  +1 -1", "create   n/m/new.txt  +1 -0",
		"delete   gone/", `would bring in the branch's step `, `"theirs edit"`} {
		if !strings.Contains(dry, want) {
			t.Errorf("dry run lacks %q:\n%s", want, dry)
		}
	}
	out := binOK(t, ws, "merge", b, "--theirs", "c.txt")
	if !strings.Contains(out, "merged "+b+" (branched at ") || !strings.Contains(out, "merged line by line a.txt") {
		t.Errorf("merge output:\n%s", out)
	}
	check := func(when string, files map[string]string) {
		t.Helper()
		for p, want := range files {
			if got := readTrim(t, filepath.Join(ws, p)); got != want {
				t.Errorf("%s: %s: got %q, want %q", when, p, got, want)
			}
		}
	}
	missing := func(p string) string { return "<open " + filepath.Join(ws, p) + ": no such file or directory>" }
	check("merged", map[string]string{"a.txt": "ONE\n2\n3\n4\nFIVE", "c.txt": "c1\nc2 theirs\nc3", "n/m/new.txt": "new",
		"b.txt": missing("b.txt"), "gone/deep/x": missing("gone/deep/x")})
	if fi, err := os.Stat(filepath.Join(ws, "n/m/new.txt")); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("new.txt's mode: %v %v", fi, err)
	}
	if log := binOK(t, ws, "log"); !strings.Contains(log, "merge of "+b+" (branched at ") {
		t.Errorf("log does not name the branch's merge:\n%s", log)
	}
	if undo := binOK(t, ws, "undo"); !strings.Contains(undo, "undid merge ") {
		t.Errorf("undo: %q", undo)
	}
	check("undone", map[string]string{"a.txt": "ONE\n2\n3\n4\n5", "c.txt": "c1\nc2 ours\nc3", "b.txt": "b", "gone/deep/x": "x", "n/m/new.txt": missing("n/m/new.txt")})
	binOK(t, ws, "redo")
	check("redone", map[string]string{"a.txt": "ONE\n2\n3\n4\nFIVE", "c.txt": "c1\nc2 theirs\nc3"})

	// The second merge: the branch changes one more line of a.txt; the
	// workspace one more of its own. Against the branch's state as merged,
	// a.txt merges line by line again and c.txt (settled theirs) is left
	// alone; only the new step comes in.
	binOK(t, ws, "step", "ours again")
	sh(t, ws, `sed -i 's/^2$/TWO/' a.txt`)
	binOK(t, b, "step", "theirs again")
	sh(t, b, `sed -i 's/^4$/FOUR/' a.txt`)
	out = binOK(t, ws, "merge", b)
	if !strings.Contains(out, ", merged at ") || !strings.Contains(out, `"theirs again"`) || strings.Contains(out, `"theirs edit"`) {
		t.Errorf("second merge output:\n%s", out)
	}
	check("merged twice", map[string]string{"a.txt": "ONE\nTWO\n3\nFOUR\nFIVE", "c.txt": "c1\nc2 theirs\nc3"})
	list := branchList(t, ws)
	if len(list) != 1 || list[0].Unmerged || list[0].Merged == 0 {
		t.Errorf("--list after merging: %+v", list)
	}
	binOK(t, ws, "branch", "--delete", b)
}

// TestBranchUmountWorkspace: zerofs umount of the workspace unmounts its
// mounted branches first and says so; after the workspace is mounted
// again, zerofs branch DIR mounts the branch again with its changes and
// history.
func TestBranchUmountWorkspace(t *testing.T) {
	built.NeedFUSE(t)
	dir := t.TempDir()
	ws, b := filepath.Join(dir, "ws"), filepath.Join(dir, "b")
	os.Mkdir(ws, 0o755)
	writeFile(t, filepath.Join(ws, "a.txt"), "base\n")
	mountT(t, ws)
	branchT(t, ws, b)
	binOK(t, b, "step", "in the branch")
	sh(t, b, `echo branch > a.txt`)
	// A process standing in the branch holds it: the workspace's umount
	// is refused, and both stay mounted.
	hold := exec.Command("sleep", "60")
	hold.Dir = b
	if err := hold.Start(); err != nil {
		t.Fatal(err)
	}
	if r := bin(t, "/", "", "umount", ws); r.code != 1 || !strings.Contains(r.stderr, "the workspace stays mounted") || !strings.Contains(r.stderr, "sleep") {
		t.Errorf("umount with the branch in use: exit %d, stderr %q", r.code, r.stderr)
	}
	hold.Process.Kill()
	hold.Wait()
	if !testsupport.FUSEMounted(b) || !testsupport.FUSEMounted(ws) {
		t.Fatal("a refused umount unmounted something")
	}
	r := bin(t, "/", "", "umount", ws)
	if r.code != 0 || !strings.Contains(r.stderr, "unmounted branch "+b+" first") {
		t.Fatalf("umount of the workspace: exit %d, stderr %q", r.code, r.stderr)
	}
	if testsupport.FUSEMounted(b) || overlayAt(b) || testsupport.FUSEMounted(ws) {
		t.Fatal("something is still mounted")
	}
	if l := bin(t, ws, "", "branch", "--list"); l.code != 0 || !strings.Contains(l.stdout, b+"  at ") || !strings.Contains(l.stdout, "not mounted") {
		t.Errorf("--list of the unmounted workspace: %+v", l)
	}
	wantFail(t, ws, 1, "not mounted", "branch", b)
	mountT(t, ws)
	branchT(t, ws, b)
	if got := readTrim(t, filepath.Join(b, "a.txt")); got != "branch" {
		t.Errorf("the branch mounted again: a.txt %q", got)
	}
	if log := binOK(t, b, "log"); !strings.Contains(log, "in the branch") {
		t.Errorf("the branch's history after mounting again:\n%s", log)
	}
	wantFail(t, ws, 1, "mounted already", "branch", b)
}

// TestBranchParentKilled: SIGKILL of the workspace's daemon with a branch
// mounted: reading the branch fails rather than hangs; zerofs mount of
// the workspace replaces the dead mount, and zerofs branch DIR mounts the
// branch again, whole.
func TestBranchParentKilled(t *testing.T) {
	built.NeedFUSE(t)
	dir := t.TempDir()
	ws, b := filepath.Join(dir, "ws"), filepath.Join(dir, "b")
	os.Mkdir(ws, 0o755)
	writeFile(t, filepath.Join(ws, "a.txt"), "base\n")
	writeFile(t, filepath.Join(ws, "b.txt"), "bee\n")
	mountT(t, ws)
	branchT(t, ws, b)
	sh(t, b, `echo branch > a.txt`)
	var st struct {
		PID int `json:"pid"`
	}
	json.Unmarshal([]byte(binOK(t, ws, "status", "--json")), &st)
	if st.PID == 0 {
		t.Fatal("no daemon pid")
	}
	if err := unix.Kill(st.PID, unix.SIGKILL); err != nil {
		t.Fatal(err)
	}
	testsupport.Poll(10*time.Second, func() bool { return unix.Kill(st.PID, 0) != nil })
	// The branch's base is gone with the daemon: a read of it fails (or,
	// cached, answers), in bounded time.
	done := make(chan error, 1)
	go func() {
		_, err := exec.Command("cat", filepath.Join(b, "b.txt")).CombinedOutput()
		done <- err
	}()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("reading the branch hangs after its workspace's daemon was killed")
	}
	r := bin(t, "/", "", "mount", ws)
	if r.code != 0 {
		t.Fatalf("mount after the kill: %+v", r)
	}
	out := binOK(t, ws, "branch", b)
	if !strings.Contains(out, "branch "+b) {
		t.Errorf("branch again: %q", out)
	}
	if got := readTrim(t, filepath.Join(b, "a.txt")); got != "branch" {
		t.Errorf("a.txt in the branch mounted again: %q", got)
	}
	if got := readTrim(t, filepath.Join(b, "b.txt")); got != "bee" {
		t.Errorf("b.txt (the base) in the branch mounted again: %q", got)
	}
}

// TestBranchOtherUser: a branch mounted with --allow-other serves a
// second user with their own permissions: they read what the base lets
// them read, write where it lets them write, and nothing else.
func TestBranchOtherUser(t *testing.T) {
	built.NeedFUSE(t)
	dir, err := os.MkdirTemp("", "zerofs-branch-user-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	os.Chmod(dir, 0o755)
	ws, b := filepath.Join(dir, "ws"), filepath.Join(dir, "b")
	os.Mkdir(ws, 0o755)
	writeFile(t, filepath.Join(ws, "public.txt"), "public\n")
	writeFile(t, filepath.Join(ws, "secret.txt"), "secret\n")
	os.Chmod(filepath.Join(ws, "secret.txt"), 0o600)
	os.Mkdir(filepath.Join(ws, "shared"), 0o777)
	os.Chmod(filepath.Join(ws, "shared"), 0o777)
	mountT(t, ws, "--allow-other")
	branchT(t, ws, b, "--allow-other")
	as := func(script string) (string, error) {
		out, err := exec.Command("setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "/bin/sh", "-c", script).CombinedOutput()
		return string(out), err
	}
	if out, err := as("cat " + filepath.Join(b, "public.txt")); err != nil || strings.TrimSpace(out) != "public" {
		t.Errorf("nobody reads public.txt: %q %v", out, err)
	}
	if out, err := as("cat " + filepath.Join(b, "secret.txt")); err == nil {
		t.Errorf("nobody read secret.txt: %q", out)
	}
	if out, err := as("echo x >> " + filepath.Join(b, "public.txt")); err == nil {
		t.Errorf("nobody wrote root's public.txt: %q", out)
	}
	if out, err := as("echo mine > " + filepath.Join(b, "shared", "mine.txt")); err != nil {
		t.Errorf("nobody could not write in shared/: %q %v", out, err)
	}
	var st unix.Stat_t
	if err := unix.Stat(filepath.Join(b, "shared", "mine.txt"), &st); err != nil || st.Uid != 65534 {
		t.Errorf("mine.txt: owner %d, %v", st.Uid, err)
	}
	if _, err := os.Stat(filepath.Join(ws, "shared", "mine.txt")); err == nil {
		t.Error("the second user's file reached the workspace")
	}
}

// deleteBranchesAtCleanup deletes every branch of ws when the test ends
// (registered after ws's mount, so it runs before the unmount), and fails
// the test for one left mounted.
func deleteBranchesAtCleanup(t *testing.T, ws string) {
	t.Helper()
	t.Cleanup(func() {
		for _, b := range branchList(t, ws) {
			bin(t, ws, "", "branch", "--delete", b.Dir, "--force")
			if testsupport.FUSEMounted(b.Dir) {
				t.Errorf("%s is still mounted", b.Dir)
				testsupport.Detach(t, b.Dir)
			}
		}
	})
}
