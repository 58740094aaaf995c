package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"

	"github.com/zerofs/zerofs/internal/testsupport"
	"github.com/zerofs/zerofs/record"
)

// forgeBase rewrites the newest base of the plain replica url as whoever
// can write its bucket would: edit changes its decoded JSON, and the base
// is stored again under the name its new bytes hash to (the old one is
// deleted).
func forgeBase(t *testing.T, url string, edit func(base map[string]any)) {
	t.Helper()
	ctx := context.Background()
	b := replicaBucket(t, url)
	names, err := b.List(ctx, "bases/")
	if err != nil || len(names) == 0 {
		t.Fatalf("bases of %s: %v %v", url, names, err)
	}
	old := names[len(names)-1]
	body, err := b.Get(ctx, old)
	if err != nil {
		t.Fatal(err)
	}
	dec, _ := zstd.NewReader(nil)
	raw, err := dec.DecodeAll(body, nil)
	if err != nil {
		t.Fatal(err)
	}
	var base map[string]any
	if err := json.Unmarshal(raw, &base); err != nil {
		t.Fatal(err)
	}
	edit(base)
	raw, err = json.Marshal(base)
	if err != nil {
		t.Fatal(err)
	}
	enc, _ := zstd.NewWriter(nil)
	body = enc.EncodeAll(raw, nil)
	sum := sha256.Sum256(body)
	seq, _, _ := strings.Cut(strings.TrimPrefix(old, "bases/"), "-")
	forged := "bases/" + seq + "-" + hex.EncodeToString(sum[:]) + ".json.zst"
	if err := b.PutNew(ctx, forged, body); err != nil {
		t.Fatal(err)
	}
	if err := b.Delete(ctx, old); err != nil {
		t.Fatal(err)
	}
}

// baseFile is the entry of path in a decoded base.
func baseFile(t *testing.T, base map[string]any, path string) map[string]any {
	t.Helper()
	for _, f := range base["files"].([]any) {
		if m := f.(map[string]any); m["path"] == path {
			return m
		}
	}
	t.Fatalf("the base has no %s", path)
	return nil
}

func ownerMode(t *testing.T, p string) (uid, gid uint32, mode os.FileMode) {
	t.Helper()
	fi, err := os.Lstat(p)
	if err != nil {
		t.Fatal(err)
	}
	st := fi.Sys().(*syscall.Stat_t)
	return st.Uid, st.Gid, fi.Mode()
}

// TestRestorePlainReplicaTakesNoPrivilege (issue 27, section 3): whoever
// can write a plain replica's bucket forges its base (re-hashed, as an
// attacker would) so that src/main.go is mode 04755 owned by uid 0 and
// notes.txt is uid 4242's. A restore by root writes main.go without its
// setuid bit and notes.txt as root's, says what it dropped, and so does
// the restored history (a state before the base, whose records say a
// setuid file of another user, restored by --at); --same-owner takes
// them as the replica gives them.
func TestRestorePlainReplicaTakesNoPrivilege(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: the restore must decline to chown and setuid as root")
	}
	testsupport.StartS3(t)
	s := newStore(t, map[string]string{"src/main.go": "package main\n", "notes.txt": "mine\n", "tool": "#!/bin/sh\n"})
	// A file of another user, setuid: the history's record of it says
	// its owner (the capture records no set-id bit here).
	if err := os.Chown(filepath.Join(s.ws, "tool"), 4343, 4343); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Join(s.ws, "tool"), 0o4755); err != nil {
		t.Fatal(err)
	}
	before := s.step("one")
	s.write("tool", "#!/bin/sh\necho replaced\n")
	s.step("two")
	s.close()
	const url = "s3://replicas/forged"
	mustRun(t, s.ws, "replicate", "--once", url)
	forgeBase(t, url, func(base map[string]any) {
		m := baseFile(t, base, "src/main.go")
		m["mode"], m["uid"], m["gid"] = 0o4755, 0, 0
		n := baseFile(t, base, "notes.txt")
		n["uid"], n["gid"] = 4242, 4242
	})

	dir := filepath.Join(t.TempDir(), "r")
	out := mustRun(t, "/", "restore", url, dir)
	if uid, _, mode := ownerMode(t, filepath.Join(dir, "src/main.go")); mode&(os.ModeSetuid|os.ModeSetgid) != 0 {
		t.Errorf("restored src/main.go: mode %v (uid %d), want no setuid bit from a plain replica", mode, uid)
	}
	if uid, gid, _ := ownerMode(t, filepath.Join(dir, "notes.txt")); uid != 0 || gid != 0 {
		t.Errorf("restored notes.txt: owner %d:%d, want the restoring user's (0:0)", uid, gid)
	}
	for _, want := range []string{"not sealed", "setuid or setgid bits dropped: src/main.go", "now yours: notes.txt", "--same-owner"} {
		if !strings.Contains(out, want) {
			t.Errorf("restore's report lacks %q:\n%s", want, out)
		}
	}
	// An older state, from the restored history's records.
	old := filepath.Join(t.TempDir(), "old")
	mustRun(t, "/", "restore", url, old, "--at", fmt.Sprint(before))
	if uid, _, mode := ownerMode(t, filepath.Join(old, "tool")); uid != 0 || mode&os.ModeSetuid != 0 {
		t.Errorf("restored tool --at %d: uid %d mode %v, want root's without setuid", before, uid, mode)
	}
	// The restored store's records are the restoring user's too: a later
	// rewind in it cannot give tool back to uid 4343.
	log, err := os.ReadFile(filepath.Join(old, ".zero", "events.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(log, []byte(`"uid":4343`)) {
		t.Errorf("the restored history still records tool as uid 4343's:\n%s", log)
	}

	same := filepath.Join(t.TempDir(), "same")
	out = mustRun(t, "/", "restore", "--same-owner", url, same)
	if strings.Contains(out, "not sealed") {
		t.Errorf("restore --same-owner says it dropped something:\n%s", out)
	}
	if uid, _, mode := ownerMode(t, filepath.Join(same, "src/main.go")); uid != 0 || mode&os.ModeSetuid == 0 {
		t.Errorf("restore --same-owner: src/main.go uid %d mode %v, want the replica's 04755 root", uid, mode)
	}
	if uid, _, _ := ownerMode(t, filepath.Join(same, "notes.txt")); uid != 4242 {
		t.Errorf("restore --same-owner: notes.txt uid %d, want the replica's 4242", uid)
	}
	sameOld := filepath.Join(t.TempDir(), "same-old")
	mustRun(t, "/", "restore", "--same-owner", url, sameOld, "--at", fmt.Sprint(before))
	if uid, _, _ := ownerMode(t, filepath.Join(sameOld, "tool")); uid != 4343 {
		t.Errorf("restore --same-owner --at %d: tool uid %d, want 4343's", before, uid)
	}
}

// TestReplicateContinuousRefusedStops: continuous `zerofs replicate` to a
// prefix another store holds stops at once with the refusal, exit 1,
// instead of retrying it forever (issue 27, section 6).
func TestReplicateContinuousRefusedStops(t *testing.T) {
	testsupport.StartS3(t)
	const url = "s3://replicas/taken"
	first := newStore(t, map[string]string{"a": "one\n"})
	first.close()
	mustRun(t, first.ws, "replicate", "--once", url)
	second := newStore(t, map[string]string{"b": "two\n"})
	second.close()
	done := make(chan result, 1)
	go func() {
		var out, errb bytes.Buffer
		code := run([]string{"replicate", url}, strings.NewReader(""), &out, &errb, second.ws)
		done <- result{out.String(), errb.String(), code}
	}()
	select {
	case r := <-done:
		if r.code != 1 || !strings.Contains(r.stderr, "one writer per prefix") {
			t.Errorf("replicate on another store's prefix: exit %d, stderr %q", r.code, r.stderr)
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("continuous replicate on another store's prefix still runs after 30 s: it retries a refusal no retry changes")
	}
}

// TestRestoreWordsAfterGC: after a gc cut and a thin have reached the
// replica, restore's header names the history it wrote from the cut, not
// from 0, and a refused --at of a thinned or cut state says which --at
// restores instead (not `zerofs rewind`: there is no workspace yet)
// (issue 27, section 6).
func TestRestoreWordsAfterGC(t *testing.T) {
	testsupport.StartS3(t)
	s := newStore(t, map[string]string{"a.txt": "v0\n"})
	var steps []uint64
	for i := 1; i <= 8; i++ {
		steps = append(steps, uint64(s.step(fmt.Sprint("step ", i))))
		s.write("a.txt", fmt.Sprintf("v%d\n", i))
	}
	s.step("last")
	ctx := context.Background()
	if _, err := s.eng.GCWith(ctx, record.GCRequest{Before: record.Seq(steps[1])}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.eng.GCWith(ctx, record.GCRequest{ThinBefore: record.Seq(steps[6])}); err != nil {
		t.Fatal(err)
	}
	thinned := uint64(0)
	for _, at := range steps[2:6] {
		if !s.eng.HasState(record.Seq(at)) {
			thinned = at
		}
	}
	if thinned == 0 {
		t.Fatalf("the thin kept every state of %v", steps)
	}
	s.close()
	const url = "s3://replicas/after-gc"
	mustRun(t, s.ws, "replicate", "--once", url)
	dir := filepath.Join(t.TempDir(), "r")
	out := mustRun(t, "/", "restore", url, dir)
	if !strings.Contains(out, fmt.Sprintf("with the history %d..", steps[1])) {
		t.Errorf("restore after a cut before %d says:\n%s", steps[1], out)
	}
	r := wantFail(t, "/", 1, "restore --at ", "restore", url, filepath.Join(t.TempDir(), "n"), "--at", fmt.Sprint(thinned))
	if strings.Contains(r.stderr, "zerofs rewind") || !strings.Contains(r.stderr, "thinned") {
		t.Errorf("restore --at %d (thinned) says %q", thinned, r.stderr)
	}
	r = wantFail(t, "/", 1, fmt.Sprintf("restore --at %d restores the oldest state left", steps[1]), "restore", url, filepath.Join(t.TempDir(), "n2"), "--at", fmt.Sprint(steps[0]))
	if strings.Contains(r.stderr, "zerofs rewind") {
		t.Errorf("restore --at %d (cut) says %q", steps[0], r.stderr)
	}
}

// TestRestoreRefusesRolledBackReplica: whoever can write the bucket of a
// sealed replica keeps a complete copy of its objects (every one genuine,
// sealed with the key), lets the replica grow, then puts the old copy
// back in place of the prefix. A restore on a machine that saw the
// replica offer more (here the writer's: it notes each base) refuses it,
// saying what the replica promised and what it holds, and leaves nothing;
// --accept-older takes the older state when the person says so. It was
// taken at exit 0 (issue 27, section 3).
func TestRestoreRefusesRolledBackReplica(t *testing.T) {
	testsupport.StartS3(t)
	keyFile := filepath.Join(t.TempDir(), "key")
	if err := os.WriteFile(keyFile, []byte(strings.Repeat("cd", 32)), 0o600); err != nil {
		t.Fatal(err)
	}
	const url = "s3://replicas/rolled"
	s := newStore(t, map[string]string{"a.txt": "old\n"})
	s.step("one")
	s.close()
	mustRun(t, s.ws, "replicate", "--once", "--replica-key", keyFile, url)

	putBack := replicaCopy(t, url) // the replica as it is now, to put back later

	s.open()
	s.write("a.txt", "new\n")
	s.step("two")
	s.close()
	mustRun(t, s.ws, "replicate", "--once", "--replica-key", keyFile, url)
	fresh := filepath.Join(t.TempDir(), "fresh")
	mustRun(t, "/", "restore", "--replica-key", keyFile, url, fresh)
	if got := readTrim(t, filepath.Join(fresh, "a.txt")); got != "new" {
		t.Fatalf("restore before the rollback: a.txt = %q", got)
	}

	// The older copy, put back in place of the prefix.
	putBack()
	lr := zerofs(t, "/", "", "log", "--replica", url, "--replica-key", keyFile)
	if lr.code != 0 || !strings.Contains(lr.stderr, "warning: "+url+" offers states up to") || !strings.Contains(lr.stderr, "already offered up to") {
		t.Errorf("log --replica of the rolled-back replica: exit %d, stderr %q; want a warning", lr.code, lr.stderr)
	}
	dir := filepath.Join(t.TempDir(), "r")
	r := wantFail(t, "/", 1, "already offered up to", "restore", "--replica-key", keyFile, url, dir)
	if !strings.Contains(r.stderr, "--accept-older") {
		t.Errorf("the refusal does not say how to take the older state: %q", r.stderr)
	}
	if _, err := os.Lstat(dir); !os.IsNotExist(err) {
		t.Errorf("the refused restore left %s behind (%v)", dir, err)
	}
	mustRun(t, "/", "restore", "--accept-older", "--replica-key", keyFile, url, dir)
	if got := readTrim(t, filepath.Join(dir, "a.txt")); got != "old" {
		t.Errorf("restore --accept-older: a.txt = %q, want the older copy's", got)
	}
}

// TestRestorePlainReplicaAsUser: an ordinary user (nobody) restoring a
// plain replica whose base someone forged so that src/main.go is setuid
// and theirs gets it without the bit (they could not be given another
// user's file anyway), and is told so; with --same-owner they get the bit
// on their own file, as chmod would give it them.
func TestRestorePlainReplicaAsUser(t *testing.T) {
	testsupport.RequireNobody(t)
	built.Need(t)
	testsupport.StartS3(t)
	s := newStore(t, map[string]string{"src/main.go": "package main\n"})
	s.step("one")
	s.close()
	const url = "s3://replicas/forged-user"
	mustRun(t, s.ws, "replicate", "--once", url)
	forgeBase(t, url, func(base map[string]any) {
		m := baseFile(t, base, "src/main.go")
		m["mode"], m["uid"], m["gid"] = 0o6755, 65534, 65534
	})
	mine, bin := nobodysDir(t, "mine")
	asNobody := func(args ...string) string {
		t.Helper()
		cmd := exec.Command("setpriv", append([]string{"--reuid=65534", "--regid=65534", "--clear-groups", bin}, args...)...)
		cmd.Dir = "/"
		cmd.Env = append(os.Environ(), "HOME="+mine, "XDG_STATE_HOME="+filepath.Join(mine, "state"))
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("zerofs %s as nobody: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	out := asNobody("restore", url, filepath.Join(mine, "r"))
	if uid, _, mode := ownerMode(t, filepath.Join(mine, "r", "src/main.go")); uid != 65534 || mode&(os.ModeSetuid|os.ModeSetgid) != 0 {
		t.Errorf("nobody's restore: src/main.go uid %d mode %v, want nobody's without set-id bits", uid, mode)
	}
	if !strings.Contains(out, "setuid or setgid bits dropped: src/main.go") {
		t.Errorf("nobody's restore does not say what it dropped:\n%s", out)
	}
	asNobody("restore", "--same-owner", url, filepath.Join(mine, "same"))
	if uid, _, mode := ownerMode(t, filepath.Join(mine, "same", "src/main.go")); uid != 65534 || mode&os.ModeSetuid == 0 {
		t.Errorf("nobody's restore --same-owner: src/main.go uid %d mode %v, want nobody's setuid", uid, mode)
	}
}
