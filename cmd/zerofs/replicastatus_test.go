package main

import (
	"context"
	"encoding/json"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/zerofs/zerofs/history"
	"github.com/zerofs/zerofs/internal/testsupport"
	"github.com/zerofs/zerofs/replicate"
)

// TestStatusStallOfKilledDaemon: a daemon replicating to an endpoint that
// never answers is SIGKILLed while status shows its stalled request;
// status of the store, unmounted, claims no stall of the daemon that is
// gone (replica.json still holds the request: nothing else ran since),
// as text or JSON. It showed the dead daemon's request as stalled, its
// wait growing, until the next replication run (issue 27, section 6).
func TestStatusStallOfKilledDaemon(t *testing.T) {
	built.NeedFUSE(t)
	testsupport.StartS3(t) // credentials and region; the endpoint is replaced
	defer hungEndpoint(t)()
	ws := filepath.Join(t.TempDir(), "ws")
	writeFile(t, filepath.Join(ws, "a.txt"), "one\n")
	mp := mountT(t, ws, "--replicate", "s3://replicas/stalled-killed")
	sh(t, mp, "echo last > last.txt")
	binOK(t, mp, "step", "last")
	stalled := regexp.MustCompile(`(?m)^replica:   stalled: `)
	if err := testsupport.Poll(40*time.Second, func() bool { return stalled.MatchString(binOK(t, mp, "status")) }); err != nil {
		t.Fatalf("status never showed the request the endpoint does not answer:\n%s", binOK(t, mp, "status"))
	}
	pid := daemonPIDOf(t, mp)
	syscall.Kill(pid, syscall.SIGKILL)
	testsupport.Poll(10*time.Second, func() bool { return !history.ProcessAlive(pid) })
	if history.ProcessAlive(pid) {
		t.Fatalf("daemon %d still runs 10 s after SIGKILL", pid)
	}
	if r := bin(t, "/", "", "umount", mp); r.code != 0 {
		t.Fatalf("umount of the dead mount: exit %d: %s", r.code, r.stderr)
	}
	rs, err := replicate.ReadState(filepath.Join(ws, ".zero"))
	if err != nil || rs.Stalled == nil || rs.Stalled.PID != pid {
		t.Fatalf("replica.json after the kill: stalled %+v, %v; want the dead daemon's request (pid %d)", rs.Stalled, err, pid)
	}
	st := binOK(t, ws, "status")
	if stalled.MatchString(st) {
		t.Errorf("status claims a stall of daemon %d, which is gone:\n%s", pid, st)
	}
	if !strings.Contains(st, "replica:   s3://replicas/stalled-killed: ") {
		t.Errorf("status lost the replica line:\n%s", st)
	}
	var js struct {
		Replica *replicate.State `json:"replica"`
	}
	if err := json.Unmarshal([]byte(binOK(t, ws, "status", "--json")), &js); err != nil || js.Replica == nil {
		t.Fatalf("status --json: %v %+v", err, js)
	}
	if js.Replica.Stalled != nil {
		t.Errorf("status --json claims a stall of daemon %d, which is gone: %+v", pid, js.Replica.Stalled)
	}
}

// TestStatusShowsShrunkReplica: someone puts an older copy of a replica in
// place of the prefix (every object genuine); the writer's next run finds
// the bucket holding less than it uploaded and uploads it again, and
// status says it happened, when, and what the bucket held, as text and in
// replica.json (status --json). The writer only logged a warning, which
// `replicate --once` and a daemon's log keep from the person (issue 27,
// section 3).
func TestStatusShowsShrunkReplica(t *testing.T) {
	testsupport.StartS3(t)
	const url = "s3://replicas/shrunk"
	s := newStore(t, map[string]string{"a.txt": "old\n"})
	s.step("one")
	s.close()
	mustRun(t, s.ws, "replicate", "--once", url)
	if st := mustRun(t, s.ws, "status"); strings.Contains(st, "held less") {
		t.Fatalf("status before anything happened:\n%s", st)
	}

	putBack := replicaCopy(t, url) // the replica as it is now, to put back later
	s.open()
	s.write("a.txt", "new\n")
	s.step("two")
	s.write("a.txt", "newer\n")
	s.step("three")
	s.close()
	mustRun(t, s.ws, "replicate", "--once", url)
	before, err := replicate.ReadState(filepath.Join(s.ws, ".zero"))
	if err != nil {
		t.Fatal(err)
	}
	putBack()

	r := zerofs(t, s.ws, "", "replicate", "--once", url)
	if r.code != 0 {
		t.Fatalf("replicate --once after the rollback: exit %d: %s", r.code, r.stderr)
	}
	st := mustRun(t, s.ws, "status")
	want := regexp.MustCompile(`(?m)^replica:   warning: at \d{4}-\d\d-\d\d \d\d:\d\d:\d\d the replica held less than this store had uploaded to it \(events 1\.\.(\d+), restorable up to (\d+); it held events 1\.\.(\d+), restorable up to (\d+)\): an older copy was put in its place, or objects were deleted; uploaded again since$`)
	m := want.FindStringSubmatch(st)
	if m == nil {
		t.Fatalf("status does not say the replica held less than was uploaded:\n%s", st)
	}
	if atoi(t, m[1]) != int(before.Logged) || atoi(t, m[2]) != int(before.Base) || atoi(t, m[3]) >= atoi(t, m[1]) || atoi(t, m[4]) >= atoi(t, m[2]) {
		t.Errorf("status's figures: uploaded 1..%s up to %s, held 1..%s up to %s; the store had uploaded 1..%d up to %d",
			m[1], m[2], m[3], m[4], before.Logged, before.Base)
	}
	var js struct {
		Replica *replicate.State `json:"replica"`
	}
	if err := json.Unmarshal([]byte(mustRun(t, s.ws, "status", "--json")), &js); err != nil || js.Replica == nil || js.Replica.Shrunk == nil {
		t.Fatalf("status --json does not say the replica shrank: %v %+v", err, js.Replica)
	}
	if k := js.Replica.Shrunk; k.UploadedLog != before.Logged || k.HeldLog >= before.Logged || !k.HeldBased {
		t.Errorf("status --json's shrunk: %+v; uploaded 1..%d", k, before.Logged)
	}
	// Replication goes on, and the note stays.
	mustRun(t, s.ws, "replicate", "--once", url)
	if st := mustRun(t, s.ws, "status"); !want.MatchString(st) {
		t.Errorf("the next run forgot that the replica held less:\n%s", st)
	}
}

// replicaCopy copies every object of the replica at url and returns a
// function that puts that copy back in place of whatever the prefix then
// holds: a rollback, as an older copy of a bucket restored over it.
func replicaCopy(t *testing.T, url string) (putBack func()) {
	t.Helper()
	ctx := context.Background()
	b := replicaBucket(t, url)
	snapshot := func() map[string][]byte {
		names, err := b.List(ctx, "")
		if err != nil {
			t.Fatal(err)
		}
		out := map[string][]byte{}
		for _, n := range names {
			if out[n], err = b.Get(ctx, n); err != nil {
				t.Fatal(err)
			}
		}
		return out
	}
	old := snapshot()
	return func() {
		t.Helper()
		for n := range snapshot() {
			if err := b.Delete(ctx, n); err != nil {
				t.Fatal(err)
			}
		}
		for n, body := range old {
			if err := b.PutNew(ctx, n, body); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// replicaBucket opens the bucket of the replica at url, as whoever can
// write it would.
func replicaBucket(t *testing.T, url string) replicate.Bucket {
	t.Helper()
	u, err := replicate.ParseURL(url)
	if err != nil {
		t.Fatal(err)
	}
	b, err := replicate.OpenS3(context.Background(), u)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
