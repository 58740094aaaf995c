package merge

import (
	"bytes"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
)

// Kind is what a path is on one side: "" when it does not exist there.
type Kind string

// The kinds a merge handles; anything else (a device, a path whose state
// was not kept) is Other and conflicts when both sides changed it.
const (
	Absent  Kind = ""
	File    Kind = "file"
	Dir     Kind = "dir"
	Symlink Kind = "symlink"
	Other   Kind = "other"
)

// Node is one path's state on one side, as far as a merge compares it.
type Node struct {
	Kind Kind
	// Mode holds the permission bits (07777).
	Mode uint32
	// Hash names a file's content: equal hashes mean equal content.
	Hash string
	// Target is a symlink's target.
	Target string
	// Xattrs are the extended attributes kept (nil and empty are alike).
	Xattrs map[string][]byte
}

// Equal reports whether n and m are the same state.
func (n Node) Equal(m Node) bool {
	if n.Kind != m.Kind {
		return false
	}
	if n.Kind == Absent {
		return true
	}
	return n.Mode == m.Mode && n.Hash == m.Hash && n.Target == m.Target &&
		maps.EqualFunc(n.Xattrs, m.Xattrs, bytes.Equal)
}

// Side names one of the three states.
type Side int

const (
	Base Side = iota
	Ours
	Theirs
)

func (s Side) String() string { return [...]string{"base", "ours", "theirs"}[s] }

// Path is one path's three states.
type Path struct {
	Path               string
	Base, Ours, Theirs Node
}

// Action is what the merge does to a path of ours.
type Action string

const (
	// Keep: the path stays as ours has it.
	Keep Action = "keep"
	// Take: the path becomes theirs.
	Take Action = "take"
	// Combine: the path gets a merged state (Result.Node, and for a file
	// whose content merged line by line, Result.Content).
	Combine Action = "merge"
	// Conflict: both sides changed the path in ways that do not merge.
	Conflict Action = "conflict"
)

// Result is one path's outcome.
type Result struct {
	Path   string
	Action Action
	// Node is the merged state (for Keep ours, for Take theirs).
	Node Node
	// Content is the merged text when the contents merged line by line
	// (Node.Hash is then "").
	Content []byte
	// Why says what conflicts, for a Conflict.
	Why string
	// Base, Ours and Theirs are the path's three states.
	Base, Ours, Theirs Node
}

// Changes reports whether r changes ours.
func (r Result) Changes() bool {
	return r.Action == Take && !r.Theirs.Equal(r.Ours) || r.Action == Combine
}

// Reader reads a file's content on one side, for a line merge.
type Reader func(side Side, path string) ([]byte, error)

// Options tune a merge.
type Options struct {
	// Read reads content for line merges; nil: contents changed on both
	// sides always conflict.
	Read Reader
	// MaxText is the largest file merged line by line (default 8 MiB);
	// larger ones changed on both sides conflict.
	MaxText int64
	// Settle, when it returns ok, settles a conflict on path by taking
	// side (Ours or Theirs).
	Settle func(path string) (side Side, ok bool)
	// Size gives a file's size on a side, to skip reading what is too
	// large (nil: read and check).
	Size func(side Side, path string) int64
}

// Tree merges every path in paths (each with its three states; paths
// unchanged on both sides may be left out) and returns one Result per
// path, sorted by path. A path that ends up not a directory while a path
// beneath it ends up existing (one side removed or replaced a directory
// the other still fills) is a conflict on both. A conflict that
// opts.Settle settles takes the side it names; a settled result that
// still leaves a path without its directory is an error.
func Tree(paths []Path, opts Options) ([]Result, error) {
	if opts.MaxText == 0 {
		opts.MaxText = 8 << 20
	}
	out := make([]Result, 0, len(paths))
	for _, p := range paths {
		r, err := one(p, opts)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	settled := map[string]bool{}
	settle := func(r *Result) {
		if r.Action != Conflict || opts.Settle == nil {
			return
		}
		side, ok := opts.Settle(r.Path)
		if !ok {
			return
		}
		settled[r.Path] = true
		r.Why = ""
		if side == Theirs {
			r.Action, r.Node, r.Content = Take, r.Theirs, nil
		} else {
			r.Action, r.Node, r.Content = Keep, r.Ours, nil
		}
	}
	for i := range out {
		settle(&out[i])
	}
	// Paths not given keep ours, whose tree is whole, so a broken
	// directory has its directory and the paths beneath it among these.
	for round := 0; ; round++ {
		flagged := false
		for i := range out {
			x := &out[i]
			if x.Action == Conflict || final(*x).Kind == Dir {
				continue
			}
			for j := i + 1; j < len(out) && strings.HasPrefix(out[j].Path, x.Path+"/"); j++ {
				y := &out[j]
				if y.Action == Conflict || final(*y).Kind == Absent {
					continue
				}
				if settled[x.Path] && settled[y.Path] || round > len(out) {
					return nil, fmt.Errorf("%w: %s is settled as a %s, and %s beneath it as a %s",
						ErrSettle, x.Path, kindName(final(*x).Kind), y.Path, kindName(final(*y).Kind))
				}
				// Why names no path: a front end quotes the paths it prints.
				whys := map[*Result]string{
					x: "one side removes or replaces this directory, the other keeps paths beneath it",
					y: "one side removes or replaces a directory above it, the other keeps it",
				}
				for _, r := range []*Result{x, y} {
					if !settled[r.Path] {
						r.Action, r.Why, r.Node, r.Content = Conflict, whys[r], Node{}, nil
						settle(r)
						flagged = true
					}
				}
				break
			}
		}
		if !flagged {
			break
		}
	}
	return out, nil
}

// ErrSettle: the sides chosen to settle conflicts do not make a tree.
var ErrSettle = errors.New("merge: the settled paths do not fit together")

func kindName(k Kind) string {
	if k == Absent {
		return "removal"
	}
	return string(k)
}

// final is the state r gives its path.
func final(r Result) Node {
	switch r.Action {
	case Keep:
		return r.Ours
	case Take:
		return r.Theirs
	}
	return r.Node
}

// one merges one path.
func one(p Path, opts Options) (Result, error) {
	r := Result{Path: p.Path, Base: p.Base, Ours: p.Ours, Theirs: p.Theirs}
	switch {
	case p.Theirs.Equal(p.Base), p.Theirs.Equal(p.Ours):
		r.Action, r.Node = Keep, p.Ours
		return r, nil
	case p.Ours.Equal(p.Base):
		r.Action, r.Node = Take, p.Theirs
		return r, nil
	}
	conflict := func(format string, args ...any) (Result, error) {
		r.Action, r.Why = Conflict, fmt.Sprintf(format, args...)
		return r, nil
	}
	o, t, b := p.Ours, p.Theirs, p.Base
	switch {
	case o.Kind == Absent:
		return conflict("ours removed it, theirs changed it")
	case t.Kind == Absent:
		return conflict("ours changed it, theirs removed it")
	case o.Kind != t.Kind:
		return conflict("ours made it a %s, theirs a %s", o.Kind, t.Kind)
	case o.Kind == Other:
		return conflict("both sides changed it and it is neither a file, a directory nor a symlink")
	}
	// Both sides hold the same kind: merge each attribute.
	var n Node
	n.Kind = o.Kind
	same := b.Kind == o.Kind // the base is of the same kind: its attributes count
	mode, ok := three(same, b.Mode, o.Mode, t.Mode)
	if !ok {
		return conflict("ours made its mode %04o, theirs %04o", o.Mode, t.Mode)
	}
	n.Mode = mode
	var bx map[string][]byte
	if same {
		bx = b.Xattrs
	}
	xs, name, ok := threeXattrs(bx, o.Xattrs, t.Xattrs)
	if !ok {
		return conflict("both sides changed its extended attribute %q", name)
	}
	n.Xattrs = xs
	switch o.Kind {
	case Symlink:
		target, ok := three(same, b.Target, o.Target, t.Target)
		if !ok {
			return conflict("ours points it to %q, theirs to %q", o.Target, t.Target)
		}
		n.Target = target
	case File:
		hash, ok := three(same, b.Hash, o.Hash, t.Hash)
		if ok {
			n.Hash = hash
			break
		}
		content, ok, err := lineMerge(p, same, opts)
		if err != nil {
			return Result{}, err
		}
		if !ok {
			return conflict("both sides changed its content, and the changes overlap or it is not text")
		}
		r.Content = content
	}
	r.Node = n
	switch {
	case n.Equal(o) && r.Content == nil:
		r.Action = Keep
	case n.Equal(t) && r.Content == nil:
		r.Action = Take
	default:
		r.Action = Combine
	}
	return r, nil
}

// three merges one attribute: changed on one side only, that side's; the
// same on both, that. haveBase false: the base does not have it (an add on
// both sides), so the two must agree.
func three[T comparable](haveBase bool, b, o, t T) (T, bool) {
	switch {
	case o == t:
		return o, true
	case haveBase && o == b:
		return t, true
	case haveBase && t == b:
		return o, true
	}
	return o, false
}

// threeXattrs merges extended attributes name by name; a name both sides
// changed differently is a conflict (returned).
func threeXattrs(b, o, t map[string][]byte) (map[string][]byte, string, bool) {
	if maps.EqualFunc(o, t, bytes.Equal) {
		return o, "", true
	}
	names := map[string]bool{}
	for _, m := range []map[string][]byte{b, o, t} {
		for k := range m {
			names[k] = true
		}
	}
	out := map[string][]byte{}
	for _, k := range slices.Sorted(maps.Keys(names)) {
		bv, bok := b[k]
		ov, ook := o[k]
		tv, tok := t[k]
		eq := func(x []byte, xok bool, y []byte, yok bool) bool { return xok == yok && bytes.Equal(x, y) }
		var v []byte
		var ok bool
		switch {
		case eq(ov, ook, tv, tok):
			v, ok = ov, ook
		case eq(ov, ook, bv, bok):
			v, ok = tv, tok
		case eq(tv, tok, bv, bok):
			v, ok = ov, ook
		default:
			return nil, k, false
		}
		if ok {
			out[k] = v
		}
	}
	return out, "", true
}

// lineMerge merges a file's content changed on both sides line by line;
// same says whether the base holds a file there (else it merges against
// an empty base, as git does for a file added on both sides).
func lineMerge(p Path, same bool, opts Options) ([]byte, bool, error) {
	if opts.Read == nil {
		return nil, false, nil
	}
	sides := []Side{Ours, Theirs}
	if same {
		sides = append(sides, Base)
	}
	if opts.Size != nil {
		for _, s := range sides {
			if opts.Size(s, p.Path) > opts.MaxText {
				return nil, false, nil
			}
		}
	}
	var text [3][]byte
	for _, s := range sides {
		b, err := opts.Read(s, p.Path)
		if err != nil {
			return nil, false, fmt.Errorf("merge: read %s of %q: %w", s, p.Path, err)
		}
		if int64(len(b)) > opts.MaxText {
			return nil, false, nil
		}
		text[s] = b
	}
	out, ok := Lines(text[Base], text[Ours], text[Theirs])
	if out == nil && ok {
		out = []byte{}
	}
	return out, ok, nil
}
