package fs

import (
	"testing"

	"golang.org/x/sys/unix"
)

// TestStaleOnlyAroundRewinds: a request whose node no longer resolves gets
// ESTALE (the kernel looks up again and retries) only if a rewind ran or
// was still invalidating since the request arrived; otherwise the backing
// errno, which go-fuse's posixtest expects for a rename racing an open.
func TestStaleOnlyAroundRewinds(t *testing.T) {
	var r rewinds
	quiet := r.arrive()
	for _, err := range []error{unix.ENOENT, unix.ENOTDIR, unix.ELOOP, unix.EACCES} {
		if got := r.stale(quiet, err); got != err {
			t.Errorf("no rewind, %v: got %v, want it unchanged", err, got)
		}
	}
	settle := r.begin()
	during := r.arrive()
	for _, a := range []arrival{quiet, during} {
		for _, err := range []error{unix.ENOENT, unix.ENOTDIR, unix.ELOOP} {
			if got := r.stale(a, err); got != unix.ESTALE {
				t.Errorf("rewind running, %v: got %v, want ESTALE", err, got)
			}
		}
		if got := r.stale(a, unix.EACCES); got != unix.EACCES {
			t.Errorf("rewind running, EACCES: got %v, want it unchanged", got)
		}
	}
	settle()
	if got := r.stale(quiet, unix.ENOENT); got != unix.ESTALE {
		t.Errorf("arrived before a rewind that settled since: got %v, want ESTALE", got)
	}
	if got := r.stale(during, unix.ENOENT); got != unix.ESTALE {
		t.Errorf("arrived while a rewind ran: got %v, want ESTALE", got)
	}
	if got := r.stale(r.arrive(), unix.ENOENT); got != unix.ENOENT {
		t.Errorf("arrived after the rewind settled: got %v, want ENOENT", got)
	}
}

// TestSuspectNodeIsStale: a node a lookup returned while a rewind ran is
// stale when it no longer resolves, even for a request that arrived after
// the rewind settled (the lookup's reply may have reached the kernel after
// the rewind's invalidation).
func TestSuspectNodeIsStale(t *testing.T) {
	n := &wsNode{fs: &fsys{}}
	a := n.fs.rw.arrive()
	if got := n.resolveErrno(a, unix.ENOENT); got != unix.ENOENT {
		t.Errorf("plain node: got %v, want ENOENT", got)
	}
	n.suspect.Store(true)
	if got := n.resolveErrno(a, unix.ENOENT); got != unix.ESTALE {
		t.Errorf("suspect node: got %v, want ESTALE", got)
	}
	if got := n.resolveErrno(a, unix.EACCES); got != unix.EACCES {
		t.Errorf("suspect node, EACCES: got %v, want EACCES", got)
	}
}
