package fs

import (
	"sync/atomic"
	"time"

	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/zerofs/zerofs/record"
)

// negativeFS lets the kernel keep a LOOKUP's "no such name" for as long as
// it keeps entries (wsCacheTimeout), as a negative entry. Tools ask for
// names that are not there all day: a warm `git status` of Go's src sent
// about 420 such LOOKUPs (commondir, MERGE_HEAD, a .gitignore per
// directory, ...), every one a round trip, when nothing kept the answer.
//
// A change through the mount updates the kernel's entry itself; a rewind,
// the one change behind its back, invalidates the entry of every path it
// changed, created ones included (invalidate.go), and that notification
// waits for any LOOKUP under the same directory still in flight, so no
// stale answer can land after it. Two kinds of answer are not kept: one
// computed while a rewind ran (rewinds.overlapped), and a reserved name at
// the root, since "@T" for a T above the head comes to exist as history
// grows, with nothing to tell the kernel.
type negativeFS struct {
	fuse.RawFileSystem
	rw      *rewinds
	timeout time.Duration
	missed  *atomic.Int64 // LOOKUPs answered ENOENT (fsys.missed, for tests)
}

func (n *negativeFS) Lookup(cancel <-chan struct{}, h *fuse.InHeader, name string, out *fuse.EntryOut) fuse.Status {
	a := n.rw.arrive()
	st := n.RawFileSystem.Lookup(cancel, h, name, out)
	if st == fuse.ENOENT {
		n.missed.Add(1)
	}
	if st != fuse.ENOENT || n.rw.overlapped(a) || (h.NodeId == fuse.FUSE_ROOT_ID && record.IsReserved(name)) {
		return st
	}
	*out = fuse.EntryOut{} // node id 0: a negative entry
	out.SetEntryTimeout(n.timeout)
	return fuse.OK
}
