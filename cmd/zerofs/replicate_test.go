package main

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/zerofs/zerofs/history"
	"github.com/zerofs/zerofs/internal/testsupport"
	"github.com/zerofs/zerofs/record"
	"github.com/zerofs/zerofs/replicate"
)

// TestReplicateAndRestoreCLI: replicate --once an unmounted store,
// status shows the replica, restore writes any replicated state with the
// history (show reads it), a second store on the prefix is refused, and
// bad input is a usage error.
func TestReplicateAndRestoreCLI(t *testing.T) {
	testsupport.StartS3(t)
	s := newStore(t, map[string]string{"keep.txt": "kept\n"})
	s.step("one")
	s.write("a.txt", "v1\n")
	mid := s.step("two")
	s.write("a.txt", "v2\n")
	s.step("three")
	s.close()
	const url = "s3://replicas/cli"
	out := mustRun(t, s.ws, "replicate", "--once", url)
	if !strings.Contains(out, "replicated to "+url+": events 1..") {
		t.Fatalf("replicate --once said %q", out)
	}
	st := mustRun(t, s.ws, "status")
	if !strings.Contains(st, "replica:   "+url+": events 1..") || !strings.Contains(st, "behind by 0 events") || !strings.Contains(st, "last success") {
		t.Errorf("status does not show the replica:\n%s", st)
	}

	dir := filepath.Join(t.TempDir(), "restored")
	out = mustRun(t, t.TempDir(), "restore", url, dir, "--at", fmt.Sprint(mid))
	if !strings.Contains(out, fmt.Sprintf("restored @%d of %s", mid, url)) {
		t.Errorf("restore said %q", out)
	}
	if got := readTrim(t, filepath.Join(dir, "a.txt")); got != "v1" {
		t.Errorf("restored a.txt at %d = %q, want v1", mid, got)
	}
	if got := readTrim(t, filepath.Join(dir, "keep.txt")); got != "kept" {
		t.Errorf("restored keep.txt = %q", got)
	}
	// The restored store has the history: the state after v2 too.
	if got := mustRun(t, dir, "show", fmt.Sprint(mid+2), "a.txt"); got != "v2\n" {
		t.Errorf("restored history: show %d a.txt = %q, want v2", mid+2, got)
	}
	lr := mustRun(t, "/", "log", "--replica", url)
	for _, want := range []string{"replica " + url + ": events 1..", "restorable 0..", "step  ", "two", "three"} {
		if !strings.Contains(lr, want) {
			t.Errorf("log --replica lacks %q:\n%s", want, lr)
		}
	}
	latest := filepath.Join(t.TempDir(), "latest")
	mustRun(t, "/", "restore", url, latest)
	if got := readTrim(t, filepath.Join(latest, "a.txt")); got != "v2" {
		t.Errorf("restore of the newest state: a.txt = %q, want v2", got)
	}

	// With a key: sealed; restore needs it.
	keyFile := filepath.Join(t.TempDir(), "key")
	if err := os.WriteFile(keyFile, []byte(strings.Repeat("ab", 32)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	sealed := newStore(t, map[string]string{"s.txt": "sealed\n"})
	sealed.close()
	mustRun(t, sealed.ws, "replicate", "--once", "--replica-key", keyFile, url+"-sealed")
	wantFail(t, "/", 1, "--replica-key", "restore", url+"-sealed", filepath.Join(t.TempDir(), "n"))
	wantFail(t, "/", 1, "--replica-key", "log", "--replica", url+"-sealed")
	mustRun(t, "/", "log", "--replica", url+"-sealed", "--replica-key", keyFile)
	sdir := filepath.Join(t.TempDir(), "s")
	mustRun(t, "/", "restore", "--replica-key", keyFile, url+"-sealed", sdir)
	if got := readTrim(t, filepath.Join(sdir, "s.txt")); got != "sealed" {
		t.Errorf("restored with the key: s.txt = %q", got)
	}
	wantFail(t, "/", 1, "want 32 bytes", "restore", "--replica-key", filepath.Join(sdir, "s.txt"), url+"-sealed", filepath.Join(t.TempDir(), "n"))

	other := newStore(t, map[string]string{"x": "y"})
	other.close()
	wantFail(t, other.ws, 1, "one writer per prefix", "replicate", "--once", url)
	wantFail(t, "/", 1, "offers states up to", "restore", url, filepath.Join(t.TempDir(), "n"), "--at", "999")
	wantFail(t, "/", 1, "exists", "restore", url, dir)
	wantFail(t, s.ws, 2, "s3://", "replicate", "--once", "http://example/x")
	wantFail(t, "/", 2, "--at", "restore", url, filepath.Join(t.TempDir(), "n"), "--at", "x")
}

// TestMountReplicate: a daemon started with --replicate uploads history
// as it is made through the mount; status shows it caught up; a restore
// on "another machine" equals the mount's @T, byte for byte (contents,
// modes, symlinks), for the newest state and an older one.
func TestMountReplicate(t *testing.T) {
	built.NeedFUSE(t)
	testsupport.StartS3(t)
	ws := filepath.Join(t.TempDir(), "ws")
	if err := os.Mkdir(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(ws, "src/main.go"), "package main\n")
	const url = "s3://replicas/mounted"
	mp := mountT(t, ws, "--replicate", url)
	binOK(t, mp, "step", "edit")
	sh(t, mp, "echo hello >> src/main.go; mkdir -p docs; echo doc > docs/a.md; chmod 0600 docs/a.md; ln -s src/main.go link")
	binOK(t, mp, "step", "more")
	sh(t, mp, "rm docs/a.md; echo again > src/main.go; chmod 0750 src")
	binOK(t, mp, "step", "last")
	head := strings.TrimSpace(readTrim(t, filepath.Join(mp, ".zero/head")))
	// The base may lie past the step's start, over events that change no
	// path (the removed file's stash named after it).
	upTo := regexp.MustCompile(`restorable up to (\d+);`)
	want, _ := strconv.Atoi(head)
	if err := testsupport.Poll(60*time.Second, func() bool {
		st := binOK(t, mp, "status")
		m := upTo.FindStringSubmatch(st)
		if m == nil || !strings.Contains(st, "behind by 0 events") {
			return false
		}
		n, _ := strconv.Atoi(m[1])
		return n >= want
	}); err != nil {
		t.Fatalf("the replica did not catch up to %s:\n%s", head, binOK(t, mp, "status"))
	}
	for _, at := range []string{head, "3"} {
		dir := filepath.Join(t.TempDir(), "restored")
		binOK(t, "/", "restore", "--same-owner", url, dir, "--at", at)
		// diff -r compares contents and symlink targets (no
		// dereference); find lists modes.
		view := filepath.Join(mp, "@"+at)
		if out, err := exec.Command("diff", "-r", "--no-dereference", "--exclude=.zero", view, dir).CombinedOutput(); err != nil {
			t.Errorf("@%s and its restore differ: %v\n%s", at, err, out)
		}
		if a, b := modes(t, view), modes(t, dir); a != b {
			t.Errorf("@%s modes:\n%s\nrestored:\n%s", at, a, b)
		}
	}
}

// modes lists every path under dir with its type and mode.
func modes(t *testing.T, dir string) string {
	t.Helper()
	cmd := exec.Command("sh", "-c", "find . -path ./.zero -prune -o -printf '%p %M\\n' | sort")
	cmd.Dir = dir
	out, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
}

// TestReplicateContinuousCLI: with its endpoint absent (nothing listens
// there) replication fails and status says so: how far behind, and the
// last error. `zerofs replicate URL` without --once then runs until
// SIGTERM, brings the replica up to date (status: behind by 0, the error
// gone) and exits 0.
func TestReplicateContinuousCLI(t *testing.T) {
	built.Need(t)
	srv := testsupport.StartS3(t)
	s := newStore(t, map[string]string{"a.txt": "one\n"})
	s.step("one")
	s.write("a.txt", "two\n")
	s.write("b.txt", strings.Repeat("b", 5000))
	last := s.step("two")
	s.close()
	const url = "s3://replicas/continuous"

	// Absent: a port nothing listens on.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	absent := "http://" + l.Addr().String()
	l.Close()
	t.Setenv("AWS_ENDPOINT_URL", absent)
	wantFail(t, s.ws, 1, "replicate", "replicate", "--once", url)
	st := mustRun(t, s.ws, "status")
	if !regexp.MustCompile(`(?m)^replica:   `+url+`: events 1..0 replicated, restorable up to 0; behind by [1-9]\d* events?, [1-9][\d.]* (B|KiB)$`).MatchString(st) ||
		!strings.Contains(st, "replica:   last error ") || strings.Contains(st, "last success") {
		t.Errorf("status with the endpoint absent: want the replica behind and its last error:\n%s", st)
	}

	t.Setenv("AWS_ENDPOINT_URL", srv.Endpoint)
	cmd := exec.Command(binary, "replicate", url)
	cmd.Dir = s.ws
	var errb strings.Builder
	cmd.Stderr = &errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	defer func() {
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
			<-exited
		}
	}()
	// Up to date, said by replica.json (which status reads) and by the
	// bucket (log --replica).
	if err := testsupport.Poll(60*time.Second, func() bool {
		rs, err := replicate.ReadState(filepath.Join(s.ws, record.StoreName))
		return err == nil && rs.Base >= last && !rs.LastSuccess.IsZero() && rs.LastError == ""
	}); err != nil {
		rs, err := replicate.ReadState(filepath.Join(s.ws, record.StoreName))
		t.Fatalf("zerofs replicate did not bring the replica up to %d: %+v %v", last, rs, err)
	}
	if lr := mustRun(t, "/", "log", "--replica", url); !strings.Contains(lr, fmt.Sprintf("restorable 0..%d", last)) {
		t.Errorf("log --replica after catching up:\n%s", lr)
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("zerofs replicate after SIGTERM: %v, stderr %q", err, errb.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("zerofs replicate did not exit after SIGTERM")
	}
	if !strings.Contains(errb.String(), "replicating to "+url) {
		t.Errorf("zerofs replicate said %q", errb.String())
	}
	st = mustRun(t, s.ws, "status")
	if !strings.Contains(st, "behind by 0 events, 0 B") || !strings.Contains(st, "last success") || strings.Contains(st, "last error") {
		t.Errorf("status after catching up:\n%s", st)
	}
	dir := filepath.Join(t.TempDir(), "r")
	mustRun(t, "/", "restore", url, dir)
	if got := readTrim(t, filepath.Join(dir, "a.txt")); got != "two" {
		t.Errorf("restored a.txt = %q, want two", got)
	}
}

// TestMountReplicateSIGKILL: the daemon of `mount --replicate` is
// SIGKILLed at a random moment while a shell writes and steps through the
// mount (so while it uploads): the replica as the kill left it restores
// to what the mount's @T shows, byte for byte (diff -r, modes), and the
// next daemon resumes and brings the replica up to date.
func TestMountReplicateSIGKILL(t *testing.T) {
	built.NeedFUSE(t)
	testsupport.StartS3(t)
	rng := testsupport.Rand(t)
	ws := filepath.Join(t.TempDir(), "ws")
	if err := os.Mkdir(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(ws, "src/main.go"), "package main\n")
	const url = "s3://replicas/killed"
	compare := func(what, mp string) int { return restoreMatchesView(t, url, what, mp) }
	prev := 0 // the newest state the replica offered before this round
	for kill := 0; kill < 2; kill++ {
		mp := mountT(t, ws, "--replicate", url)
		pid := daemonPIDOf(t, ws)
		// Changes and steps through the mount until the daemon dies
		// under them (then every command fails: that ends the loop).
		work := exec.Command("/bin/sh", "-c", `i=0; while :; do i=$((i+1))
			echo "$i $RANDOM" > "f$((i % 17))" || exit 0
			mkdir -p "d$((i % 5))" && echo "$i" > "d$((i % 5))/g$((i % 3))" || exit 0
			chmod "6$((i % 5))0" "f$((i % 17))" || exit 0
			[ $((i % 7)) -ne 0 ] || rm -f "f$((i % 11))" || exit 0
			[ $((i % 10)) -ne 0 ] || "$ZEROFS" step "round $i" >/dev/null || exit 0
			[ $((i % 25)) -ne 0 ] || sleep 0.3
			[ $i -ne 40 ] || sleep 8 # a pause: the daemon makes a base
		done`)
		work.Dir = mp
		work.Env = append(os.Environ(), "ZEROFS="+binary)
		if err := work.Start(); err != nil {
			t.Fatal(err)
		}
		// Killed once the replica offers a state the work made (after
		// its pause), at a random moment of the work after it.
		restorable := regexp.MustCompile(`restorable up to (\d+);`)
		if err := testsupport.Poll(60*time.Second, func() bool {
			m := restorable.FindStringSubmatch(bin(t, mp, "", "status").stdout)
			n := 0
			if m != nil {
				n, _ = strconv.Atoi(m[1])
			}
			return n > prev
		}); err != nil {
			t.Fatalf("kill %d: the replica never offered a state of the work:\n%s", kill, bin(t, mp, "", "status").stdout)
		}
		time.Sleep(time.Duration(rng.IntN(3000)) * time.Millisecond) // real time: the kill's random moment
		syscall.Kill(pid, syscall.SIGKILL)
		testsupport.Poll(5*time.Second, func() bool { return !history.ProcessAlive(pid) })
		work.Process.Kill()
		work.Wait()
		if r := bin(t, "/", "", "umount", mp); r.code != 0 {
			t.Fatalf("kill %d: umount of the dead mount: exit %d: %s", kill, r.code, r.stderr)
		}
		// The replica as the kill left it, against the store's @T.
		mp = mountT(t, ws)
		if r := bin(t, "/", "", "log", "--replica", url); r.code == 0 && regexp.MustCompile(` [1-9]\d* bases?; restorable`).MatchString(r.stdout) {
			at := compare(fmt.Sprintf("kill %d: the replica as left", kill), mp)
			t.Logf("kill %d: the replica as the kill left it restores @%d (head %s)", kill, at, readTrim(t, filepath.Join(mp, ".zero/head")))
		} else {
			t.Logf("kill %d: no base in the replica yet: %s %s", kill, r.stdout, r.stderr)
		}
		binOK(t, "/", "umount", mp)

		// The next daemon resumes: the replica catches up.
		mp = mountT(t, ws, "--replicate", url)
		binOK(t, mp, "step", fmt.Sprintf("after kill %d", kill))
		want, _ := strconv.Atoi(readTrim(t, filepath.Join(mp, ".zero/head")))
		upTo := regexp.MustCompile(`restorable up to (\d+);`)
		if err := testsupport.Poll(90*time.Second, func() bool {
			m := upTo.FindStringSubmatch(binOK(t, mp, "status"))
			n := 0
			if m != nil {
				n, _ = strconv.Atoi(m[1])
			}
			return n >= want
		}); err != nil {
			t.Fatalf("kill %d: the next daemon did not bring the replica up to %d:\n%s", kill, want, binOK(t, mp, "status"))
		}
		at := compare(fmt.Sprintf("kill %d: after resuming", kill), mp)
		if at < want {
			t.Errorf("kill %d: the newest restorable state is %d, want at least %d", kill, at, want)
		}
		prev = at
		binOK(t, "/", "umount", mp)
	}
}

// TestMountSecondWriterRefused: a second daemon asked to replicate to a
// prefix another store holds is refused at once, loudly: the mount fails
// naming the holder (one writer per prefix) and leaves nothing mounted
// (issue 27: it exited 0 and only status said so, later); the first
// daemon's replication is untouched.
func TestMountSecondWriterRefused(t *testing.T) {
	built.NeedFUSE(t)
	testsupport.StartS3(t)
	const url = "s3://replicas/one-writer"
	ws1, ws2 := filepath.Join(t.TempDir(), "ws1"), filepath.Join(t.TempDir(), "ws2")
	writeFile(t, filepath.Join(ws1, "a"), "one\n")
	writeFile(t, filepath.Join(ws2, "b"), "two\n")
	mp1 := mountT(t, ws1, "--replicate", url)
	if err := testsupport.Poll(60*time.Second, func() bool {
		return strings.Contains(binOK(t, mp1, "status"), "last success")
	}); err != nil {
		t.Fatalf("the first daemon never replicated:\n%s", binOK(t, mp1, "status"))
	}
	t.Cleanup(func() { unmountT(t, ws2) })
	start := time.Now()
	r := bin(t, "/", "", "mount", "--replicate", url, ws2)
	if r.code != 1 || !strings.Contains(r.stderr, "is the replica of another store") || !strings.Contains(r.stderr, "one writer per prefix") {
		t.Fatalf("mount --replicate on another store's prefix: exit %d, stderr %q; want exit 1 naming the holder", r.code, r.stderr)
	}
	if took := time.Since(start); took > 20*time.Second {
		t.Errorf("the refusal took %v", took)
	}
	if testsupport.FUSEMounted(ws2) {
		t.Errorf("%s is mounted after the refused mount", ws2)
	}
	if got := readTrim(t, filepath.Join(ws2, "b")); got != "two" {
		t.Errorf("the refused workspace: b = %q", got)
	}
	sh(t, mp1, "echo again >> a")
	binOK(t, mp1, "step", "first goes on")
	head, _ := strconv.Atoi(readTrim(t, filepath.Join(mp1, ".zero/head")))
	upTo := regexp.MustCompile(`restorable up to (\d+);`)
	if err := testsupport.Poll(60*time.Second, func() bool {
		st := binOK(t, mp1, "status")
		m := upTo.FindStringSubmatch(st)
		n := 0
		if m != nil {
			n, _ = strconv.Atoi(m[1])
		}
		return n >= head && !strings.Contains(st, "last error")
	}); err != nil {
		t.Fatalf("the first daemon's replication after the refusal:\n%s", binOK(t, mp1, "status"))
	}
	dir := filepath.Join(t.TempDir(), "r")
	binOK(t, "/", "restore", url, dir)
	if got := readTrim(t, filepath.Join(dir, "a")); got != "one\nagain" {
		t.Errorf("the replica is the first store's: a = %q", got)
	}
	if _, err := os.Lstat(filepath.Join(dir, "b")); !os.IsNotExist(err) {
		t.Errorf("the replica holds the second store's b (%v)", err)
	}
}

// TestMountReplicateAtUnmount: a change and a step made just before the
// unmount (well within the replicator's 2 s between attempts) reach the
// replica anyway: the daemon makes a last attempt once its mount takes no
// more changes, and umount returns only after it. The replica then lists
// the last step and restores the last file, and status (unmounted) says
// the replica is not behind.
func TestMountReplicateAtUnmount(t *testing.T) {
	built.NeedFUSE(t)
	testsupport.StartS3(t)
	ws := filepath.Join(t.TempDir(), "ws")
	writeFile(t, filepath.Join(ws, "a.txt"), "one\n")
	const url = "s3://replicas/at-unmount"
	mp := mountT(t, ws, "--replicate", url)
	binOK(t, mp, "step", "first")
	sh(t, mp, "echo last > last.txt; echo two >> a.txt")
	binOK(t, mp, "step", "the very last")
	head := readTrim(t, filepath.Join(mp, ".zero/head"))
	binOK(t, "/", "umount", mp)

	dlog, err := os.ReadFile(filepath.Join(ws, record.StoreName, "daemon.log"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(dlog), "replicate: last attempt before unmounting") || !strings.Contains(string(dlog), "replicate: replica up to date at unmount") {
		t.Errorf("the daemon's log does not tell of its last attempt:\n%s", dlog)
	}
	lr := binOK(t, "/", "log", "--replica", url)
	if !strings.Contains(lr, "events 1.."+head+" ") || !strings.Contains(lr, "restorable 0.."+head) || !strings.Contains(lr, "the very last") {
		t.Errorf("log --replica after the unmount, head %s:\n%s", head, lr)
	}
	dir := filepath.Join(t.TempDir(), "r")
	binOK(t, "/", "restore", url, dir)
	if got := readTrim(t, filepath.Join(dir, "last.txt")); got != "last" {
		t.Errorf("restored last.txt = %q, want last", got)
	}
	if got := readTrim(t, filepath.Join(dir, "a.txt")); got != "one\ntwo" {
		t.Errorf("restored a.txt = %q", got)
	}
	if st := binOK(t, ws, "status"); !strings.Contains(st, "behind by 0 events, 0 B") || strings.Contains(st, "last error") {
		t.Errorf("status after the unmount:\n%s", st)
	}
}

// TestMountReplicateAtUnmountAbsent: with the endpoint absent (nothing
// listens there) the last attempt fails, the unmount completes all the
// same (umount's own bound on the daemon's exit holds) and umount exits 1
// saying what was left behind, as the daemon's log does, and status says
// the replica is behind.
func TestMountReplicateAtUnmountAbsent(t *testing.T) {
	built.NeedFUSE(t)
	testsupport.StartS3(t) // credentials and region; the endpoint is replaced
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("AWS_ENDPOINT_URL", "http://"+l.Addr().String())
	l.Close()
	ws := filepath.Join(t.TempDir(), "ws")
	writeFile(t, filepath.Join(ws, "a.txt"), "one\n")
	const url = "s3://replicas/absent-at-unmount"
	mp := mountT(t, ws, "--replicate", url)
	sh(t, mp, "echo last > last.txt")
	binOK(t, mp, "step", "last")
	umountLeftBehind(t, mp, url)
	if testsupport.FUSEMounted(mp) {
		t.Fatalf("%s still mounted after umount", mp)
	}
	dlog, err := os.ReadFile(filepath.Join(ws, record.StoreName, "daemon.log"))
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`replicate: last attempt failed; left behind until the next mount or 'zerofs replicate'.* events=[1-9]\d* bytes=[1-9]\d*`).Match(dlog) {
		t.Errorf("the daemon's log does not say what its last attempt left behind:\n%s", dlog)
	}
	if !strings.Contains(string(dlog), "zerofs: unmounted cleanly") {
		t.Errorf("the daemon did not finish its unmount:\n%s", dlog)
	}
	st := binOK(t, ws, "status")
	if !regexp.MustCompile(`(?m)^replica:   `+url+`: events 1..0 replicated, restorable up to 0; behind by [1-9]\d* events?, [1-9][\d.]* (B|KiB)$`).MatchString(st) ||
		!strings.Contains(st, "replica:   last error ") || strings.Contains(st, "last success") {
		t.Errorf("status after the unmount with the endpoint absent:\n%s", st)
	}
}

// umountLeftBehind unmounts mp, whose daemon cannot replicate to url: the
// mount goes, and umount exits 1 saying how many events were left behind
// and how to send them.
func umountLeftBehind(t *testing.T, mp, url string) {
	t.Helper()
	r := bin(t, "/", "", "umount", mp)
	if r.code != 1 || !regexp.MustCompile(`^zerofs: unmounted .*, but its replication to `+regexp.QuoteMeta(url)+` was left behind: [1-9]\d* events?, [1-9][\d.]* (B|KiB) not uploaded.*'zerofs replicate `).MatchString(r.stderr) {
		t.Errorf("umount with replication left behind: exit %d, stderr %q; want exit 1 saying what was left", r.code, r.stderr)
	}
	if testsupport.FUSEMounted(mp) {
		t.Errorf("%s still mounted after umount", mp)
	}
}

// hungEndpoint points AWS_ENDPOINT_URL at a listener that accepts
// connections and never answers them. The returned stop closes the
// listener and every connection it held.
func hungEndpoint(t *testing.T) (stop func()) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var held []net.Conn
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			held = append(held, c) // never answered
			mu.Unlock()
		}
	}()
	t.Setenv("AWS_ENDPOINT_URL", "http://"+l.Addr().String())
	return func() {
		l.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range held {
			c.Close()
		}
	}
}

// TestMountReplicateAtUnmountHung: an endpoint that accepts connections
// and never answers: status shows the request waiting; the last attempt
// is held until its bound (finalReplicationTimeout, 30 s): umount waits
// for it, unmounts, and fails saying what was left behind (so that
// `umount && rm -rf` cannot lose the tail silently), the daemon's log says
// it too, status says behind.
func TestMountReplicateAtUnmountHung(t *testing.T) {
	built.NeedFUSE(t)
	testsupport.StartS3(t) // credentials and region; the endpoint is replaced
	defer hungEndpoint(t)()
	ws := filepath.Join(t.TempDir(), "ws")
	writeFile(t, filepath.Join(ws, "a.txt"), "one\n")
	const url = "s3://replicas/hung-at-unmount"
	mp := mountT(t, ws, "--replicate", url)
	sh(t, mp, "echo last > last.txt")
	binOK(t, mp, "step", "last")
	// The request that hangs is shown in status while it waits, with
	// the object it is for (issue 27: status said only "behind").
	if err := testsupport.Poll(40*time.Second, func() bool {
		return regexp.MustCompile(`(?m)^replica:   stalled: PUT \S+ has had no answer for \d+s \(attempt \d of \d`).MatchString(binOK(t, mp, "status"))
	}); err != nil {
		t.Errorf("status does not show the request the endpoint never answers:\n%s", binOK(t, mp, "status"))
	}
	umountLeftBehind(t, mp, url)
	dlog, err := os.ReadFile(filepath.Join(ws, record.StoreName, "daemon.log"))
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`replicate: last attempt failed; left behind until the next mount or 'zerofs replicate'.* events=[1-9]\d* bytes=[1-9]\d*`).Match(dlog) ||
		!strings.Contains(string(dlog), "zerofs: unmounted cleanly") {
		t.Errorf("the daemon's log after its last attempt timed out:\n%s", dlog)
	}
	st := binOK(t, ws, "status")
	if !strings.Contains(st, ": events 1..0 replicated") || !regexp.MustCompile(`behind by [1-9]\d* events?`).MatchString(st) || !strings.Contains(st, "replica:   last error ") {
		t.Errorf("status after the last attempt timed out:\n%s", st)
	}
}

// TestMountReplicateAtUnmountAbandoned: after an unmount from outside
// (umount(8), not zerofs umount), a SIGTERM while the last attempt hangs
// on an endpoint that never answers abandons the attempt: the daemon says
// so and exits well before the attempt's own 30 s bound. The daemon's main
// loop stops reading signals once serving ends, so the signal cannot be
// taken by it instead (it was, at times, and the daemon then waited out
// the 30 s).
func TestMountReplicateAtUnmountAbandoned(t *testing.T) {
	built.NeedFUSE(t)
	testsupport.StartS3(t) // credentials and region; the endpoint is replaced
	defer hungEndpoint(t)()
	ws := filepath.Join(t.TempDir(), "ws")
	writeFile(t, filepath.Join(ws, "a.txt"), "one\n")
	mp := mountT(t, ws, "--replicate", "s3://replicas/abandoned-at-unmount")
	sh(t, mp, "echo last > last.txt")
	binOK(t, mp, "step", "last")
	pid := daemonPIDOf(t, mp)
	if out, err := exec.Command("umount", mp).CombinedOutput(); err != nil {
		t.Fatalf("umount(8) %s: %v\n%s", mp, err, out)
	}
	dlogPath := filepath.Join(ws, record.StoreName, "daemon.log")
	// The last attempt has begun once the daemon logged the unmount.
	if err := testsupport.Poll(10*time.Second, func() bool {
		b, _ := os.ReadFile(dlogPath)
		return strings.Contains(string(b), "unmounted from outside")
	}); err != nil {
		b, _ := os.ReadFile(dlogPath)
		t.Fatalf("the daemon never saw the unmount:\n%s", b)
	}
	if err := syscall.Kill(pid, syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	testsupport.Poll(15*time.Second, func() bool { return !history.ProcessAlive(pid) }) // half the bound
	dlog, _ := os.ReadFile(dlogPath)
	if history.ProcessAlive(pid) {
		t.Fatalf("the daemon still runs 15 s after SIGTERM during its last attempt:\n%s", dlog)
	}
	if !strings.Contains(string(dlog), "abandoning the last replication attempt") {
		t.Errorf("the daemon's log does not say it abandoned the attempt:\n%s", dlog)
	}
}

// TestMountReplicateSIGKILLAtUnmount: the daemon is SIGKILLed at a random
// moment of its last attempt (a few MiB of new content going up): the
// replica as the kill left it restores to what the store's @T of that
// state shows, byte for byte, and the next daemon brings it up to date.
func TestMountReplicateSIGKILLAtUnmount(t *testing.T) {
	built.NeedFUSE(t)
	testsupport.StartS3(t)
	rng := testsupport.Rand(t)
	ws := filepath.Join(t.TempDir(), "ws")
	writeFile(t, filepath.Join(ws, "a.txt"), "one\n")
	const url = "s3://replicas/killed-at-unmount"
	compare := func(what, mp string) int { return restoreMatchesView(t, url, what, mp) }
	mp := mountT(t, ws, "--replicate", url)
	if err := testsupport.Poll(60*time.Second, func() bool {
		return strings.Contains(binOK(t, mp, "status"), "last success")
	}); err != nil {
		t.Fatalf("the daemon never replicated:\n%s", binOK(t, mp, "status"))
	}
	pid := daemonPIDOf(t, ws)
	binOK(t, mp, "step", "big")
	sh(t, mp, "for i in 1 2 3 4 5 6; do head -c 1500000 /dev/urandom > big$i; done; echo two >> a.txt; ln -s big1 link")
	binOK(t, mp, "step", "after big")
	head := readTrim(t, filepath.Join(mp, ".zero/head"))

	umount := exec.Command(binary, "umount", mp)
	umount.Dir = "/"
	var uerr strings.Builder
	umount.Stderr = &uerr
	if err := umount.Start(); err != nil {
		t.Fatal(err)
	}
	// Killed once the last attempt began, at a random moment of it.
	logPath := filepath.Join(ws, record.StoreName, "daemon.log")
	if err := testsupport.Poll(60*time.Second, func() bool {
		b, _ := os.ReadFile(logPath)
		return strings.Contains(string(b), "replicate: last attempt before unmounting")
	}); err != nil {
		t.Fatalf("the daemon never began its last attempt")
	}
	time.Sleep(time.Duration(rng.IntN(400)) * time.Millisecond) // real time: the kill's random moment
	syscall.Kill(pid, syscall.SIGKILL)
	if err := umount.Wait(); err != nil {
		t.Logf("umount with its daemon killed: %v %s", err, uerr.String())
	}
	unmountT(t, mp)
	b, _ := os.ReadFile(logPath)
	killedEarly := !strings.Contains(string(b), "unmounted cleanly")
	t.Logf("killed during the last attempt: %v (head %s); umount said %q", killedEarly, head, uerr.String())

	// The replica as the kill left it, against the store's @T.
	mp = mountT(t, ws)
	t.Logf("the replica as the kill left it restores @%d", compare("as the kill left it", mp))
	binOK(t, "/", "umount", mp)

	// The next daemon resumes; its own unmount brings the replica up to
	// the last step.
	mp = mountT(t, ws, "--replicate", url)
	binOK(t, "/", "umount", mp)
	lr := binOK(t, "/", "log", "--replica", url)
	if !strings.Contains(lr, "after big") {
		t.Errorf("log --replica after the next daemon's unmount:\n%s", lr)
	}
	mp = mountT(t, ws)
	if at, want := compare("after resuming", mp), atoi(t, head); at < want {
		t.Errorf("after resuming the newest restorable state is %d, want at least %d", at, want)
	}
}

func atoi(t *testing.T, s string) int {
	t.Helper()
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

var restoredAt = regexp.MustCompile(`restored @(\d+) of `)

// restoreMatchesView restores the replica at url's newest state and checks
// it against the mount's @T of that state (diff -r, then modes), returning T.
// --same-owner: the test's own replica, whose modes are compared as written.
func restoreMatchesView(t *testing.T, url, what, mp string) int {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "restored")
	out := binOK(t, "/", "restore", "--same-owner", url, dir)
	m := restoredAt.FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("%s: restore said %q", what, out)
	}
	view := filepath.Join(mp, "@"+m[1])
	if out, err := exec.Command("diff", "-r", "--no-dereference", "--exclude=.zero", view, dir).CombinedOutput(); err != nil {
		t.Errorf("%s: @%s and its restore differ: %v\n%s", what, m[1], err, out)
	}
	if a, b := modes(t, view), modes(t, dir); a != b {
		t.Errorf("%s: @%s modes:\n%s\nrestored:\n%s", what, m[1], a, b)
	}
	n, _ := strconv.Atoi(m[1])
	return n
}
