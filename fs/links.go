package fs

import (
	"sync"

	"golang.org/x/sys/unix"

	"github.com/zerofs/zerofs/record"
	"github.com/zerofs/zerofs/rewind"
)

// Hard links: one inode of the mount for every name of a file, and
// go-fuse's tree gives a node one path, the name it last looked up. A change
// through another name (a cached one: the kernel sends the node, never the
// name it was opened by) would then be captured under that one name only,
// and a rewind would not restore the name it was changed through (issue
// 14: nobody links root's file into its own directory, and root's later
// write is captured as nobody's link only). So the mount remembers, per
// inode with several links, every name the kernel got an entry for (a
// lookup, a create, a link, and a link's source), and a change to such a
// file captures each of them that still leads to it. A name made outside
// the mount and never looked up through it is unknown (docs/guide.md, Limits worth knowing).
//
// They are kept per inode number, not per node: go-fuse makes a new node
// for every lookup and keeps the one it already had.

// link is one name of a node: parent directory and name in it.
type link struct {
	parent *wsNode
	name   string
}

// linkTable is the names of every inode with several links the kernel was
// given an entry for, by stable inode number.
type linkTable struct {
	mu sync.Mutex // guards m
	m  map[uint64]*links
}

// of is ino's names; nil if none were noted (make: create them).
func (t *linkTable) of(ino uint64, make bool) *links {
	t.mu.Lock()
	defer t.mu.Unlock()
	ls := t.m[ino]
	if ls == nil && make {
		if t.m == nil {
			t.m = map[uint64]*links{}
		}
		ls = &links{}
		t.m[ino] = ls
	}
	return ls
}

// noteLink remembers name in parent as a name of the file with stable inode
// number ino.
func (f *fsys) noteLink(ino uint64, parent *wsNode, name string) {
	f.links.of(ino, true).add(parent, name)
}

// links is the names of one inode.
type links struct {
	mu sync.Mutex // guards l
	l  []link
}

// maxLinks bounds the names a node remembers: beyond it the oldest go.
const maxLinks = 64

// add remembers name in parent.
func (ls *links) add(parent *wsNode, name string) {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	for _, l := range ls.l {
		if l.parent == parent && l.name == name {
			return
		}
	}
	if len(ls.l) >= maxLinks {
		ls.l = ls.l[1:]
	}
	ls.l = append(ls.l, link{parent, name})
}

func (ls *links) all() []link {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	return append([]link(nil), ls.l...)
}

// changes is what a change to the node's content, mode, owner or xattrs
// captures: its path p, and, when it has other names it was known by,
// each of them that still names the same file.
func (n *wsNode) changes(p string) []rewind.Change {
	out := []rewind.Change{{Path: p}}
	known := n.fs.links.of(n.StableAttr().Ino, false)
	if known == nil {
		return out
	}
	ls := known.all()
	var self unix.Statx_t
	if n.stat(&self) != 0 || self.Nlink < 2 {
		return out
	}
	for _, l := range ls {
		dir, ok := l.parent.path()
		if !ok {
			continue
		}
		q := join(dir, l.name)
		if q == p {
			continue
		}
		if dir == "" && record.IsReserved(l.name) {
			continue
		}
		dfd, done, err := n.fs.ws.dir(dir)
		if err != nil {
			continue
		}
		var st unix.Statx_t
		same := statx(dfd, l.name, &st) == nil && st.Ino == self.Ino &&
			st.Dev_major == self.Dev_major && st.Dev_minor == self.Dev_minor
		done()
		if same {
			out = append(out, rewind.Change{Path: q})
		}
	}
	return out
}

// paths is the workspace paths of changes.
func paths(cs []rewind.Change) []string {
	out := make([]string, len(cs))
	for i, c := range cs {
		out[i] = c.Path
	}
	return out
}
