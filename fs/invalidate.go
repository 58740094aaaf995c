package fs

import (
	"strings"
	"syscall"

	fusefs "github.com/hanwen/go-fuse/v2/fs"

	"github.com/zerofs/zerofs/rewind"
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
func (f *fsys) invalidate(paths []string) {
	root := f.root.EmbeddedInode()
	dirs := map[*fusefs.Inode]bool{}
	for _, p := range paths {
		if p == "" {
			root.NotifyContent(0, 0)
			continue
		}
		dir, name := split(p)
		parent := walk(root, dir)
		if parent == nil {
			continue
		}
		if ch := parent.GetChild(name); ch != nil {
			notifyErr(f, ch.NotifyContent(0, 0), p)
			forgetName(parent, name, ch)
		}
		notifyErr(f, parent.NotifyEntry(name), p)
		if !dirs[parent] {
			dirs[parent] = true
			notifyErr(f, parent.NotifyContent(0, 0), dir)
		}
	}
}

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
// "@T" with T < before it has looked up).
func (f *fsys) invalidateViews(before rewind.Seq) {
	root := f.root.EmbeddedInode()
	for name := range root.Children() {
		if t, ok := rewind.ParseView(name); ok && t < before {
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
