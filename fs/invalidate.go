package fs

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"syscall"

	fusefs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/moby/sys/mountinfo"

	"github.com/zerofs/zerofs/internal/quote"
	"github.com/zerofs/zerofs/record"
)

// invalidate tells the kernel to forget what it caches about paths a rewind
// changed behind its back: the directory entry (a name may now be absent or
// another object), the content and attributes of a node it knows, and the
// attributes and listing of the parent directory. Only nodes the kernel has
// looked up can be cached; go-fuse's tree holds exactly those, so the walk
// stops where the tree does.
//
// It must run after the engine released the workspace lock: a notification
// waits for the kernel's lock on the directory, which a request blocked in
// Begin may hold.
//
// With the mount's long timeouts and kept listings each part is needed:
// without the entry a removed name still resolves, without the node's
// attributes a restored mode shows the old one, without the parent's
// listing `ls` shows the names from before (noInvalidate switches each
// part off, for the tests that show it).
//
// A name with another filesystem mounted at or beneath it (a tmpfs on
// MNT/keep/inner) keeps its entry: the kernel's d_invalidate detaches every
// mount beneath an entry it drops, taking that filesystem away from its
// users. Its node's attributes and listing are still forgotten, so a
// restored mode shows. (A rewind that would remove such a directory is
// refused before it begins: mountInTheWay.)
func (f *fsys) invalidate(paths []string) {
	off := invalidateParts(f.noInvalidate.Load())
	root := f.root.EmbeddedInode()
	dirs := map[*fusefs.Inode]bool{}
	var subs []string
	if len(paths) > 0 {
		subs = f.submounts()
	}
	for _, p := range paths {
		if p == "" {
			if off&invalNode == 0 {
				notifyErr(f, root.NotifyContent(0, 0), p)
			}
			continue
		}
		dir, name := split(p)
		parent := walk(root, dir)
		if parent == nil {
			continue
		}
		if ch := parent.GetChild(name); ch != nil {
			if off&invalNode == 0 {
				notifyErr(f, ch.NotifyContent(0, 0), p)
			}
			forgetName(parent, name, ch)
		}
		if off&invalEntry == 0 && !holdsMount(p, subs) {
			notifyErr(f, parent.NotifyEntry(name), p)
		}
		if !dirs[parent] && off&invalListing == 0 {
			dirs[parent] = true
			notifyErr(f, parent.NotifyContent(0, 0), dir)
		}
	}
}

// mountInTheWay refuses (a *record.RefusedError, RefusedWorkspace) a rewind
// that would remove or replace a directory at or above a path where another
// filesystem is mounted on top of the mount: the kernel would detach that
// filesystem when it forgets the name, as it refuses to remove a mount
// point natively (EBUSY). It asks the engine for a dry run of req first,
// only when such a mount exists. nil when nothing is in the way.
func (f *fsys) mountInTheWay(ctx context.Context, req record.Request) error {
	subs := f.submounts()
	if len(subs) == 0 || req.DryRun {
		return nil
	}
	dry := req
	dry.DryRun = true
	res, err := f.eng.Apply(ctx, dry)
	if err != nil {
		return nil // the rewind itself will say why
	}
	for _, c := range res.Preview {
		if !holdsMount(c.Path, subs) {
			continue
		}
		replaced := c.Action == record.ActionDelete
		if c.Action == record.ActionRestore && c.Kind != record.KindDir {
			replaced = true
		}
		if !replaced {
			continue
		}
		var mnt string
		for _, s := range subs {
			if s == c.Path || strings.HasPrefix(s, c.Path+"/") {
				mnt = s
				break
			}
		}
		return fmt.Errorf("%w (%w)", &record.RefusedError{Refusal: record.RefusedWorkspace,
			Msg: fmt.Sprintf("rewind: refused: it would remove %s, and a filesystem is mounted on %s through the mount; unmount it first", quote.Name(c.Path), quote.Name(mnt))},
			syscall.EBUSY)
	}
	return nil
}

// submounts are the workspace paths where another filesystem is mounted
// on top of the mount (from /proc/self/mountinfo), unsorted.
func (f *fsys) submounts() []string {
	infos, err := mountinfo.GetMounts(mountinfo.PrefixFilter(f.mountpoint))
	if err != nil {
		f.log.Warn("zerofs: cannot read the mount table to keep mounts on top of the mount", "err", err)
		return nil
	}
	var out []string
	for _, m := range infos {
		rel, err := filepath.Rel(f.mountpoint, m.Mountpoint)
		if err != nil || rel == "." || rel == ".." || strings.HasPrefix(rel, "../") {
			continue
		}
		if first, _, _ := strings.Cut(rel, "/"); record.IsReserved(first) {
			continue // the control mount of --no-open (ctlmount.go), or a view's
		}
		out = append(out, filepath.ToSlash(rel))
	}
	return out
}

// holdsMount reports whether workspace path p is one of subs or an
// ancestor of one.
func holdsMount(p string, subs []string) bool {
	for _, s := range subs {
		if s == p || strings.HasPrefix(s, p+"/") {
			return true
		}
	}
	return false
}

// invalidateParts is a set of the parts of invalidate; fsys.noInvalidate
// holds the parts a test switched off.
type invalidateParts uint32

const (
	invalEntry   invalidateParts = 1 << iota // the parent's entry for the name
	invalNode                                // the node's attributes and pages
	invalListing                             // the parent's listing and attributes
)

// walk follows dir's components down go-fuse's tree from root.
func walk(root *fusefs.Inode, dir string) *fusefs.Inode {
	in := root
	if dir == "" {
		return in
	}
	for c := range strings.SplitSeq(dir, "/") {
		if in = in.GetChild(c); in == nil {
			return nil
		}
	}
	return in
}

// notifyErr logs a failed notification. ENOENT only means the kernel had
// already forgotten the node.
func notifyErr(f *fsys, errno syscall.Errno, p string) {
	if errno != 0 && errno != syscall.ENOENT {
		f.log.Warn("zerofs: cache invalidation failed", "path", p, "err", errno)
	}
}

// invalidateViews tells the kernel to forget the views gc removed (every
// "@T" it has looked up that is no longer in the history: below the cut,
// or thinned away).
func (f *fsys) invalidateViews() {
	root := f.root.EmbeddedInode()
	for name := range root.Children() {
		if t, ok := record.ParseView(name); ok && !f.eng.HasState(t) {
			notifyErr(f, root.NotifyEntry(name), name)
		}
	}
}

// forgetName drops name from go-fuse's tree for a file node whose backing
// object left that name, so the node's path is one of its other names (a
// hard link) rather than a name that now leads elsewhere. A node with no
// other name keeps this one: requests in flight through it still need a
// path, and the kernel looks the name up afresh after NotifyEntry.
func forgetName(parent *fusefs.Inode, name string, ch *fusefs.Inode) {
	if ch.IsDir() {
		return
	}
	if ok, _ := parent.RmChild(name); !ok {
		return
	}
	if _, other := ch.Parent(); other == nil {
		parent.AddChild(name, ch, false)
	}
}
