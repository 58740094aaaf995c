package main

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"sort"

	"github.com/zerofs/zerofs/rewind"
)

// change is one path a block changed. Its JSON is part of `zerofs log
// --json`'s contract (see doc.go); add fields, never rename them.
type change struct {
	Path string `json:"path"`
	// Change is added, deleted, modified, mode, renamed, skipped (the
	// before-state was not kept) or unknown (history pruned).
	Change string `json:"change"`
	Kind   string `json:"kind"`
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
	Reason  string `json:"reason,omitempty"`
}

// blockChanges compares each before-state captured in b with the path's
// state at b.End (just after the block) and sorts the result by path.
// Captures that ended as they began are left out; a deleted and an added
// file with the same content become one rename.
func blockChanges(h history, b *block, prunedBefore Seq) ([]change, error) {
	var out []change
	for _, before := range b.Files {
		c := change{Path: before.Path, Kind: string(before.Kind), Blob: before.Blob}
		if before.Skipped {
			c.Change, c.Reason = "skipped", before.Reason
			out = append(out, c)
			continue
		}
		if b.End < prunedBefore {
			c.Change, c.Reason = "unknown", "history pruned"
			out = append(out, c)
			continue
		}
		after, err := h.Stat(before.Path, b.End)
		if errors.Is(err, rewind.ErrNoSuchSeq) {
			c.Change, c.Reason = "unknown", "history pruned"
			out = append(out, c)
			continue
		}
		if err != nil {
			return nil, err
		}
		switch {
		case before.Absent && !after.Exists:
			continue
		case before.Absent:
			c.Change, c.Kind, c.Bytes = "added", string(after.Kind), after.Bytes
			c.Blob = ""
			if after.Kind == rewind.KindFile {
				c.Blob = contentID(h, before.Path, b.End, after)
			}
		case !after.Exists:
			c.Change, c.Bytes = "deleted", before.Bytes
		case string(after.Kind) != string(before.Kind):
			c.Change, c.Kind, c.Bytes, c.OldBytes = "modified", string(after.Kind), after.Bytes, before.Bytes
		default:
			c.Bytes = after.Bytes
			same := true
			switch before.Kind {
			case rewind.KindFile:
				same = before.Bytes == after.Bytes && before.Blob == contentID(h, before.Path, b.End, after)
			case rewind.KindSymlink:
				same = before.Target == after.Target
			}
			if before.Mode != after.Mode {
				c.OldMode, c.Mode = before.Mode, after.Mode
			}
			switch {
			case !same:
				c.Change, c.OldBytes = "modified", before.Bytes
			case before.Mode != after.Mode:
				c.Change = "mode"
			default:
				continue
			}
		}
		out = append(out, c)
	}
	out = findRenames(out)
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out, nil
}

// contentID is the blob id of a file's content at t: recorded, or hashed
// now ("" when unreadable, which then compares as changed).
func contentID(h history, path string, t Seq, n node) string {
	if n.Blob != "" {
		return n.Blob
	}
	b, err := h.Content(path, t)
	if err != nil {
		return ""
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// findRenames pairs each deleted file with an added file of the same
// content (the added one's Blob is its new content's id) into a rename.
func findRenames(cs []change) []change {
	added := map[string]int{}
	for i, c := range cs {
		if c.Change == "added" && c.Kind == string(rewind.KindFile) && c.Blob != "" {
			if _, dup := added[c.Blob]; !dup {
				added[c.Blob] = i
			}
		}
	}
	drop := map[int]bool{}
	for i, c := range cs {
		if c.Change != "deleted" || c.Kind != string(rewind.KindFile) || c.Blob == "" {
			continue
		}
		j, ok := added[c.Blob]
		if !ok || drop[j] {
			continue
		}
		cs[j].Change, cs[j].From = "renamed", c.Path
		drop[i] = true
		delete(added, c.Blob)
	}
	// An added path's Blob was only needed to find renames; its before-state
	// has no blob.
	var out []change
	for i, c := range cs {
		if drop[i] {
			continue
		}
		if c.Change == "added" {
			c.Blob = ""
		}
		out = append(out, c)
	}
	return out
}
