package history

import (
	"errors"
	"sort"

	"github.com/zerofs/zerofs/record"
)

// A Change is one path a block changed. Its JSON is part of `zerofs log
// --json`'s contract: add fields, never rename them.
type Change struct {
	Path string `json:"path"`
	// Change is one of the Change* constants.
	Change string `json:"change"`
	// Kind is what the path is after the block (before it, for deleted
	// paths); OldKind what it was before, when that differs.
	Kind    string `json:"kind"`
	OldKind string `json:"oldKind,omitempty"`
	// Bytes is the size after the block (before it, for deleted paths).
	Bytes int64 `json:"bytes"`
	// OldBytes is the size before the block, for modified paths.
	OldBytes int64 `json:"oldBytes,omitempty"`
	// Blob is the before-state's blob: what a rewind to before the block
	// restores ("" for added paths and directories).
	Blob string `json:"blob,omitempty"`
	// From is a renamed path's old name.
	From string `json:"from,omitempty"`
	// OldMode and Mode are the permission bits when they changed.
	OldMode uint32 `json:"oldMode,omitempty"`
	Mode    uint32 `json:"mode,omitempty"`
	// Xattrs names the extended attributes (ACLs among them) that changed,
	// for a path whose content and kind did not.
	Xattrs []string `json:"xattrs,omitempty"`
	// Target is a symlink's target after the block.
	Target string `json:"target,omitempty"`
	Reason string `json:"reason,omitempty"`
	// PID and Comm name the process whose request first changed the path
	// in the block (as its before-state was captured).
	PID  int    `json:"pid,omitempty"`
	Comm string `json:"comm,omitempty"`
}

// The kinds of change.
const (
	ChangeAdded    = "added"
	ChangeDeleted  = "deleted"
	ChangeModified = "modified" // content, or what kind of thing it is
	ChangeMode     = "mode"     // permission bits only
	ChangeXattrs   = "xattrs"   // extended attributes (ACLs) only
	ChangeRenamed  = "renamed"
	ChangeSkipped  = "skipped" // the before-state was not kept
	ChangeUnknown  = "unknown" // the state after the block was pruned
)

// Changes compares each before-state captured in b with the path's state
// at b.End (just after the block; for a block interleaved with another
// session's, at its last capture of the path: Block.Last) and sorts the result by path. Captures
// that ended as they began are left out; a deleted and an added file with
// the same content become one rename.
func Changes(src Source, b *Block, prunedBefore record.Seq) ([]Change, error) {
	var out []Change
	for _, before := range b.Files {
		c := Change{Path: before.Path, Kind: string(before.Kind), Blob: before.Blob, PID: before.PID, Comm: before.Comm}
		if before.Skipped {
			c.Change, c.Reason = ChangeSkipped, before.Reason
			out = append(out, c)
			continue
		}
		if b.End < prunedBefore {
			c.Change, c.Reason = ChangeUnknown, "history pruned"
			out = append(out, c)
			continue
		}
		end := b.End
		if t, ok := b.Last[before.Path]; ok {
			end = t // interleaved with another session's step
		}
		after, err := src.Stat(before.Path, end)
		if errors.Is(err, record.ErrNoSuchSeq) {
			c.Change, c.Reason = ChangeUnknown, "history pruned"
			if b.End >= prunedBefore {
				c.Reason = "history thinned"
			}
			out = append(out, c)
			continue
		}
		if err != nil {
			return nil, err
		}
		if after.Kind == record.KindSymlink {
			c.Target = after.Target
		}
		switch {
		case before.Absent && !after.Exists:
			continue
		case before.Absent:
			c.Change, c.Kind, c.Bytes = ChangeAdded, string(after.Kind), after.Bytes
			c.Blob = ""
			if after.Kind == record.KindFile {
				c.Blob = contentID(src, before.Path, end, after)
			}
		case !after.Exists:
			c.Change, c.Bytes = ChangeDeleted, before.Bytes
		case string(after.Kind) != string(before.Kind):
			c.Change, c.Kind, c.OldKind = ChangeModified, string(after.Kind), string(before.Kind)
			c.Bytes, c.OldBytes = after.Bytes, before.Bytes
		default:
			c.Bytes = after.Bytes
			same := true
			switch before.Kind {
			case record.KindFile:
				same = before.Bytes == after.Bytes && before.Blob == contentID(src, before.Path, end, after)
			case record.KindSymlink:
				same = before.Target == after.Target
			}
			if before.Mode != after.Mode {
				c.OldMode, c.Mode = before.Mode, after.Mode
			}
			if same && before.Xattrs != nil {
				xs, err := src.Xattrs(before.Path, end)
				if err != nil {
					return nil, err
				}
				c.Xattrs = xattrChanges(before.Xattrs, xs)
			}
			switch {
			case !same:
				c.Change, c.OldBytes = ChangeModified, before.Bytes
			case before.Mode != after.Mode:
				c.Change = ChangeMode
			case len(c.Xattrs) > 0:
				c.Change = ChangeXattrs
			default:
				continue
			}
		}
		if c.Kind == string(record.KindDir) {
			c.Bytes, c.OldBytes = 0, 0 // a directory's size says nothing
		}
		if c.OldKind == string(record.KindDir) {
			c.OldBytes = 0
		}
		out = append(out, c)
	}
	out = dirRenames(b, out)
	out = findRenames(out)
	out, err := similarRenames(src, b, out)
	if err != nil {
		return nil, err
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out, nil
}

// contentID is the blob id of a file's content at t: recorded, or hashed
// now, streamed ("" when unreadable, which then compares as changed).
func contentID(src Source, path string, t record.Seq, n Node) string {
	if n.Blob != "" {
		return n.Blob
	}
	if n.Skipped {
		return ""
	}
	id, err := hashContent(src, path, t)
	if err != nil {
		return ""
	}
	return id
}

// findRenames pairs each deleted file with an added file of the same
// content (the added one's Blob is its new content's id) into a rename.
func findRenames(cs []Change) []Change {
	added := map[string]int{}
	for i, c := range cs {
		if c.Change == ChangeAdded && c.Kind == string(record.KindFile) && c.Blob != "" {
			if _, dup := added[c.Blob]; !dup {
				added[c.Blob] = i
			}
		}
	}
	drop := map[int]bool{}
	for i, c := range cs {
		if c.Change != ChangeDeleted || c.Kind != string(record.KindFile) || c.Blob == "" {
			continue
		}
		j, ok := added[c.Blob]
		if !ok || drop[j] {
			continue
		}
		cs[j].Change, cs[j].From = ChangeRenamed, c.Path
		drop[i] = true
		delete(added, c.Blob)
	}
	// An added path's Blob was only needed to find renames; its before-state
	// has no blob.
	var out []Change
	for i, c := range cs {
		if drop[i] {
			continue
		}
		if c.Change == ChangeAdded {
			c.Blob = ""
		}
		out = append(out, c)
	}
	return out
}

// maxSimilarPairs bounds the content comparisons of similarRenames.
const maxSimilarPairs = 400

// similarRenames pairs each file still deleted with the file still added
// whose content is most like its own (half or more alike, as Diff pairs
// them) into a rename: a file moved and edited in one step is one rename,
// in the log as in its diff.
func similarRenames(src Source, b *Block, cs []Change) ([]Change, error) {
	var del, add []int
	for i, c := range cs {
		if c.Kind != string(record.KindFile) {
			continue
		}
		switch c.Change {
		case ChangeDeleted:
			if c.Blob != "" {
				del = append(del, i)
			}
		case ChangeAdded:
			add = append(add, i)
		}
	}
	if len(del) == 0 || len(add) == 0 || len(del)*len(add) > maxSimilarPairs {
		return cs, nil
	}
	read := func(p string, t record.Seq) []byte {
		if n, err := src.Stat(p, t); err != nil || big(n) {
			return nil // a big file is renamed only with its content unchanged (findRenames)
		}
		c, err := src.Content(p, t)
		if err != nil {
			return nil
		}
		return c
	}
	after := map[int][]byte{}
	for _, j := range add {
		after[j] = read(cs[j].Path, b.End)
	}
	drop, taken := map[int]bool{}, map[int]bool{}
	for _, i := range del {
		before := read(cs[i].Path, b.Before())
		if before == nil {
			continue
		}
		best, score := -1, 49
		for _, j := range add {
			if taken[j] || after[j] == nil {
				continue
			}
			if s := similarity(before, after[j]); s > score {
				best, score = j, s
			}
		}
		if best >= 0 {
			taken[best], drop[i] = true, true
			cs[best].Change, cs[best].From, cs[best].OldBytes = ChangeRenamed, cs[i].Path, cs[i].Bytes
			cs[best].Blob = cs[i].Blob
		}
	}
	var out []Change
	for i, c := range cs {
		if !drop[i] {
			out = append(out, c)
		}
	}
	return out, nil
}

// changeFields has Change's fields without its methods.
type changeFields Change

// changeJSON is a Change as `log --json` writes it: a name that is not
// valid UTF-8 has its exact bytes (base64) beside its readable form, as
// checkpoints record it (pathBytes, fromBytes, targetBytes).
type changeJSON struct {
	changeFields
	PathBytes   string `json:"pathBytes,omitempty"`
	FromBytes   string `json:"fromBytes,omitempty"`
	TargetBytes string `json:"targetBytes,omitempty"`
}

func (j *changeJSON) names() []record.NameField {
	return []record.NameField{record.Name("path", &j.Path, &j.PathBytes), record.Name("from", &j.From, &j.FromBytes),
		record.Name("target", &j.Target, &j.TargetBytes)}
}

// MarshalJSON writes the change with the exact bytes of odd names.
func (c Change) MarshalJSON() ([]byte, error) {
	j := changeJSON{changeFields: changeFields(c)}
	return record.MarshalNames(&j, j.names()...)
}

// UnmarshalJSON reads a change, the exact bytes winning over the readable
// form.
func (c *Change) UnmarshalJSON(data []byte) error {
	var j changeJSON
	if err := record.UnmarshalNames(data, &j, j.names()...); err != nil {
		return err
	}
	*c = Change(j.changeFields)
	return nil
}

// dirRenames pairs each directory a rename record of b took away (deleted)
// with the directory it became (added) into one rename: what lies beneath
// moved with it and no record names it.
func dirRenames(b *Block, cs []Change) []Change {
	to := map[string]string{}
	for _, f := range b.Files {
		if f.RenamedTo != "" {
			to[f.Path] = f.RenamedTo
		}
	}
	if len(to) == 0 {
		return cs
	}
	added := map[string]int{}
	for i, c := range cs {
		if c.Change == ChangeAdded && c.Kind == string(record.KindDir) {
			added[c.Path] = i
		}
	}
	drop := map[int]bool{}
	for i, c := range cs {
		if c.Change != ChangeDeleted || c.Kind != string(record.KindDir) || to[c.Path] == "" {
			continue
		}
		j, ok := added[to[c.Path]]
		if !ok || drop[j] {
			continue
		}
		cs[j].Change, cs[j].From, cs[j].PID, cs[j].Comm = ChangeRenamed, c.Path, c.PID, c.Comm
		drop[i] = true
	}
	var out []Change
	for i, c := range cs {
		if !drop[i] {
			out = append(out, c)
		}
	}
	return out
}
