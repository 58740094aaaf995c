package rewind

import (
	"bytes"
	"fmt"
	"io"
	"sort"

	"github.com/zerofs/zerofs/record"
)

// maxPreviewBytes bounds the files a preview counts lines of: a larger file
// is shown without a line count.
const maxPreviewBytes = 4 << 20

// maxEditDistance bounds the diff a preview computes; two texts further
// apart count as every line replaced.
const maxEditDistance = 4000

// preview lists what plan does, path by path, sorted by path.
func (e *Engine) preview(plan *rewindPlan) ([]record.PathChange, error) {
	ents, err := e.overwritten(plan)
	if err != nil {
		return nil, err
	}
	out := make([]record.PathChange, 0, len(ents))
	for _, pe := range ents {
		c := record.PathChange{Path: pe.path}
		var from, to *Entry
		switch {
		case !pe.tgt.Exists:
			c.Action, c.Kind = record.ActionDelete, pe.cur.State.Kind
			from = &pe.cur
		case !pe.cur.Exists:
			c.Action, c.Kind = record.ActionCreate, pe.tgt.State.Kind
			to = &pe.tgt
		default:
			c.Action, c.Kind = record.ActionRestore, pe.tgt.State.Kind
			from, to = &pe.cur, &pe.tgt
		}
		a, aok, err := e.previewText(from)
		if err != nil {
			return nil, err
		}
		b, bok, err := e.previewText(to)
		if err != nil {
			return nil, err
		}
		if aok && bok {
			added, removed := lineDelta(a, b)
			c.Lines = &record.LineCount{Added: added, Removed: removed}
		}
		out = append(out, c)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out, nil
}

// previewText reads a side of a change for counting lines: ok is false when
// it is a file too large or not text. A side that is absent, a directory or
// a symlink counts as no lines.
func (e *Engine) previewText(ent *Entry) ([]byte, bool, error) {
	if ent == nil || !ent.Exists || ent.State.Kind != record.KindFile {
		return nil, true, nil
	}
	if ent.State.Skipped || ent.State.Bytes > maxPreviewBytes {
		return nil, false, nil
	}
	f, err := e.OpenContent(*ent)
	if err != nil {
		return nil, false, fmt.Errorf("rewind: preview %q: %w", ent.State.Path, err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxPreviewBytes+1))
	if err != nil {
		return nil, false, fmt.Errorf("rewind: preview %q: %w", ent.State.Path, err)
	}
	if len(b) > maxPreviewBytes || bytes.IndexByte(b[:min(len(b), 8000)], 0) >= 0 {
		return nil, false, nil
	}
	return b, true, nil
}

// lineDelta counts the lines a minimal line diff from a to b adds and
// removes (as `diff -u` would show them: +added -removed).
func lineDelta(a, b []byte) (added, removed int) {
	ids := map[string]int{}
	intern := func(text []byte) []int {
		var out []int
		for len(text) > 0 {
			i := bytes.IndexByte(text, '\n')
			line := text
			if i >= 0 {
				line, text = text[:i+1], text[i+1:]
			} else {
				text = nil
			}
			id, ok := ids[string(line)]
			if !ok {
				id = len(ids)
				ids[string(line)] = id
			}
			out = append(out, id)
		}
		return out
	}
	x, y := intern(a), intern(b)
	for len(x) > 0 && len(y) > 0 && x[0] == y[0] {
		x, y = x[1:], y[1:]
	}
	for len(x) > 0 && len(y) > 0 && x[len(x)-1] == y[len(y)-1] {
		x, y = x[:len(x)-1], y[:len(y)-1]
	}
	d := editDistance(x, y, maxEditDistance)
	if d < 0 {
		return len(y), len(x)
	}
	added = (d + len(y) - len(x)) / 2
	return added, d - added
}

// editDistance is the length of the shortest edit script (insertions and
// deletions) from x to y, by Myers's greedy algorithm, or -1 when it is
// longer than limit.
func editDistance(x, y []int, limit int) int {
	n, m := len(x), len(y)
	limit = min(limit, n+m)
	off := limit + 1
	v := make([]int, 2*limit+3)
	for d := 0; d <= limit; d++ {
		for k := -d; k <= d; k += 2 {
			var i int
			if k == -d || (k != d && v[off+k-1] < v[off+k+1]) {
				i = v[off+k+1]
			} else {
				i = v[off+k-1] + 1
			}
			j := i - k
			for i < n && j < m && x[i] == y[j] {
				i, j = i+1, j+1
			}
			v[off+k] = i
			if i >= n && j >= m {
				return d
			}
		}
	}
	return -1
}
