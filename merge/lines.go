package merge

import "bytes"

// Text files: content is text when its first 8000 bytes hold no NUL byte
// (git's rule, buffer_is_binary), so a binary file changed on both sides
// is a conflict rather than a line merge.
const binaryProbe = 8000

// IsText reports whether content is text by git's rule.
func IsText(content []byte) bool {
	probe := content
	if len(probe) > binaryProbe {
		probe = probe[:binaryProbe]
	}
	return bytes.IndexByte(probe, 0) < 0
}

// Lines merges two texts that both grew from base, as `git merge-file -p`
// does when it finds no conflict: each side's changes against the base are
// found line by line (a shortest edit script, each inserted or deleted run
// slid down as far as it can go, as git's xdiff does), and the changes of
// the two sides are combined when they do not overlap. Changes overlap when
// they touch the same base lines or are adjacent (a change ending where the
// other begins), unless both sides made exactly the same change there.
// ok is false on a conflict (or when any of the three is not text), and
// the merged text is then nil.
func Lines(base, ours, theirs []byte) (merged []byte, ok bool) {
	if !IsText(base) || !IsText(ours) || !IsText(theirs) {
		return nil, false
	}
	b, o, t := split(base), split(ours), split(theirs)
	ho, ht := hunks(b, o), hunks(b, t)
	var out [][]byte
	pos := 0 // next base line to copy
	i, j := 0, 0
	for i < len(ho) || j < len(ht) {
		// The next region starts at the earliest hunk of either side and
		// takes in every hunk that overlaps or touches it.
		start, end := -1, -1
		var ro, rt []hunk
		take := func(h hunk, mine bool) {
			if start < 0 || h.b0 < start {
				start = h.b0
			}
			if h.b1 > end {
				end = h.b1
			}
			if mine {
				ro = append(ro, h)
			} else {
				rt = append(rt, h)
			}
		}
		if j >= len(ht) || (i < len(ho) && ho[i].b0 <= ht[j].b0) {
			take(ho[i], true)
			i++
		} else {
			take(ht[j], false)
			j++
		}
		for {
			switch {
			case i < len(ho) && ho[i].b0 <= end:
				take(ho[i], true)
				i++
				continue
			case j < len(ht) && ht[j].b0 <= end:
				take(ht[j], false)
				j++
				continue
			}
			break
		}
		out = append(out, b[pos:start]...)
		pos = end
		switch {
		case len(rt) == 0:
			out = append(out, apply(b, start, end, ro, o)...)
		case len(ro) == 0:
			out = append(out, apply(b, start, end, rt, t)...)
		default:
			so, st := apply(b, start, end, ro, o), apply(b, start, end, rt, t)
			if !sameLines(so, st) {
				return nil, false
			}
			out = append(out, so...)
		}
	}
	out = append(out, b[pos:]...)
	return bytes.Join(out, nil), true
}

// split cuts text into lines, each keeping its newline (the last may
// have none).
func split(s []byte) [][]byte {
	var out [][]byte
	for len(s) > 0 {
		n := bytes.IndexByte(s, '\n')
		if n < 0 {
			out = append(out, s)
			break
		}
		out = append(out, s[:n+1])
		s = s[n+1:]
	}
	return out
}

func sameLines(a, b [][]byte) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !bytes.Equal(a[i], b[i]) {
			return false
		}
	}
	return true
}

// hunk is one change of a side against the base: base lines [b0, b1)
// become the side's lines [s0, s1).
type hunk struct{ b0, b1, s0, s1 int }

// apply is base lines [start, end) with the hunks hs (all within them) of
// side applied.
func apply(base [][]byte, start, end int, hs []hunk, side [][]byte) [][]byte {
	var out [][]byte
	pos := start
	for _, h := range hs {
		out = append(out, base[pos:h.b0]...)
		out = append(out, side[h.s0:h.s1]...)
		pos = h.b1
	}
	return append(out, base[pos:end]...)
}

// hunks is the changes that turn a into b: a shortest edit script (Myers),
// each run of changed lines slid down as far as it goes, then read off as
// hunks.
func hunks(a, b [][]byte) []hunk {
	ca, cb := changes(a, b)
	compact(a, ca, cb)
	compact(b, cb, ca)
	var out []hunk
	i, j := 0, 0
	for i < len(a) || j < len(b) {
		if i < len(a) && j < len(b) && !ca[i] && !cb[j] {
			i++
			j++
			continue
		}
		h := hunk{b0: i, s0: j}
		for i < len(a) && ca[i] {
			i++
		}
		for j < len(b) && cb[j] {
			j++
		}
		h.b1, h.s1 = i, j
		out = append(out, h)
	}
	return out
}

// changes marks the lines of a and of b that a shortest edit script from a
// to b deletes and inserts (Myers' O(ND) greedy algorithm, with the path
// recovered from the saved frontiers).
func changes(a, b [][]byte) (ca, cb []bool) {
	ca, cb = make([]bool, len(a)), make([]bool, len(b))
	n, m := len(a), len(b)
	max := n + m
	off := max + 1
	v := make([]int, 2*max+3)
	var trace [][]int
	d := 0
search:
	for ; d <= max; d++ {
		trace = append(trace, append([]int(nil), v...))
		for k := -d; k <= d; k += 2 {
			var x int
			if k == -d || (k != d && v[off+k-1] < v[off+k+1]) {
				x = v[off+k+1]
			} else {
				x = v[off+k-1] + 1
			}
			y := x - k
			for x < n && y < m && bytes.Equal(a[x], b[y]) {
				x++
				y++
			}
			v[off+k] = x
			if x >= n && y >= m {
				break search
			}
		}
	}
	// Walk back from (n, m) through the frontiers.
	x, y := n, m
	for ; d > 0; d-- {
		prev := trace[d]
		k := x - y
		var pk int
		if k == -d || (k != d && prev[off+k-1] < prev[off+k+1]) {
			pk = k + 1
		} else {
			pk = k - 1
		}
		px := prev[off+pk]
		py := px - pk
		for x > px && y > py {
			x--
			y--
		}
		if pk == k+1 {
			y--
			cb[y] = true
		} else {
			x--
			ca[x] = true
		}
	}
	return ca, cb
}

// compact slides the runs of changed lines of a (marked in ca) the way
// git's xdiff does (xdl_change_compact, without the indent heuristic),
// keeping b's marks (cb) in step: each run is slid up as far as it goes,
// then down as far as it goes, merging with runs it meets, and then back
// up to the last place where it lines up with a change in b, if any. The
// unchanged lines keep their order and contents, so they still pair one
// to one with b's.
func compact(a [][]byte, ca, cb []bool) {
	changed := func(c []bool, i int) bool { return i >= 0 && i < len(c) && c[i] }
	// A group is a run [start, end) of changed lines, maybe empty; the
	// groups of a and b alternate with the unchanged lines, which pair.
	type group struct{ start, end int }
	first := func(c []bool) group {
		g := group{}
		for changed(c, g.end) {
			g.end++
		}
		return g
	}
	next := func(c []bool, g *group) bool {
		if g.end >= len(c) {
			return false
		}
		g.start = g.end + 1
		g.end = g.start
		for changed(c, g.end) {
			g.end++
		}
		return true
	}
	previous := func(c []bool, g *group) bool {
		if g.start == 0 {
			return false
		}
		g.end = g.start - 1
		g.start = g.end
		for changed(c, g.start-1) {
			g.start--
		}
		return true
	}
	slideUp := func(g *group) bool {
		if g.start > 0 && bytes.Equal(a[g.start-1], a[g.end-1]) {
			g.start--
			g.end--
			ca[g.start], ca[g.end] = true, false
			for changed(ca, g.start-1) {
				g.start--
			}
			return true
		}
		return false
	}
	slideDown := func(g *group) bool {
		if g.end < len(a) && bytes.Equal(a[g.start], a[g.end]) {
			ca[g.start], ca[g.end] = false, true
			g.start++
			g.end++
			for changed(ca, g.end) {
				g.end++
			}
			return true
		}
		return false
	}
	g, go_ := first(ca), first(cb)
	for {
		if g.end != g.start {
			var earliestEnd, endMatchingOther int
			for {
				size := g.end - g.start
				endMatchingOther = -1
				for slideUp(&g) {
					previous(cb, &go_)
				}
				earliestEnd = g.end
				if go_.end > go_.start {
					endMatchingOther = g.end
				}
				for slideDown(&g) {
					next(cb, &go_)
					if go_.end > go_.start {
						endMatchingOther = g.end
					}
				}
				if size == g.end-g.start {
					break
				}
			}
			if g.end != earliestEnd && endMatchingOther != -1 {
				for go_.end == go_.start {
					slideUp(&g)
					previous(cb, &go_)
				}
			}
		}
		if !next(ca, &g) {
			break
		}
		next(cb, &go_)
	}
}
