package fs

import (
	"context"

	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/zerofs/zerofs/rewind"
)

// callerOf names the process whose request this is, for the pid and comm
// fields of a capture. The kernel sends the id of the calling thread; the
// process is its thread group, read from /proc with its name (procnames.go:
// descriptors bound to the task, so a reused id is never mistaken for it),
// and only when the engine captures (Caller.Resolve): the thread waits in
// its request then, so the id is still its own. A request the kernel makes on its own (pid 0, e.g.
// writeback) has no caller; when /proc cannot say, the thread id stands and
// comm is empty. Its lineage (lineage.go) is read when the engine must tell
// which agent session's step a change belongs to, or whether it is a
// person's: kept per process (Tree), so a process's changes after its first
// cost nothing within treeFresh of the last check, and then the one pread
// that tells its entry is still the same process.
func callerOf(ctx context.Context) rewind.Caller {
	c, ok := fuse.FromContext(ctx)
	if !ok || c.Pid == 0 {
		return rewind.Caller{}
	}
	tid := int(c.Pid)
	return rewind.Caller{Resolve: func() (int, string) {
		who := processOf(tid)
		return who.PID, who.Comm
	}, Lineage: func() []rewind.Proc { return lineageOf(tid) },
		Tree: func() []rewind.Proc { return procCache.tree(tid) }}
}

// engineCtx is the context handed to the engine. go-fuse cancels a request's
// context when the kernel forwards an interrupt, and the Go runtime's
// preemption signal (SIGURG) makes the kernel do that often for callers that
// are Go programs. A capture or a rewind cut short by that would fail
// operations that callers do not expect to see EINTR from (mkdir, rename), so
// the engine gets a context with the caller's values and no cancellation.
func engineCtx(ctx context.Context) context.Context {
	return context.WithoutCancel(ctx)
}

// owner is the uid and gid a node created for the caller should get, and
// whether a chown is needed at all (the daemon runs as root and creates as
// root).
func owner(ctx context.Context) (uid, gid int, chown bool) {
	if !daemonRoot {
		return 0, 0, false
	}
	c, ok := fuse.FromContext(ctx)
	if !ok || (c.Uid == 0 && c.Gid == 0) {
		return 0, 0, false
	}
	return int(c.Uid), int(c.Gid), true
}
