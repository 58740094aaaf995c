package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path"
	"sort"
	"strings"

	udiff "github.com/aymanbagabas/go-udiff"

	"github.com/zerofs/zerofs/eventlog"
	"github.com/zerofs/zerofs/rewind"
)

var diffCmd = &command{
	name:    "diff",
	usage:   "diff SEQ [SEQ2] [-- PATH...]",
	summary: "unified diff from SEQ to SEQ2 (default: now)",
	help: `Prints a git-style unified diff (3 lines of context) of every path that
changed between the two states, limited to the PATHs given after "--"
(relative to the current directory). Binary content is reported, not shown.
Colour on a terminal only.
`,
	run: runDiff,
}

func runDiff(e *env, c *command, args []string) error {
	fs := newFlags(c)
	pos, paths, err := parseArgs(c, fs, args)
	if err != nil {
		return err
	}
	if len(pos) < 1 || len(pos) > 2 {
		return usagef(c, "want SEQ and optionally SEQ2")
	}
	a, err := parseSeq(c, pos[0])
	if err != nil {
		return err
	}
	b := now
	if len(pos) == 2 {
		if b, err = parseSeq(c, pos[1]); err != nil {
			return err
		}
	}
	ws, h, err := openWorkspaceHistory(e)
	if err != nil {
		return err
	}
	defer h.Close()
	var filters []string
	for _, p := range paths {
		rel, err := ws.relPath(e.cwd, p)
		if err != nil {
			return err
		}
		filters = append(filters, rel)
	}
	d := &differ{h: h, a: a, b: b, stats: map[statKey]node{}}
	for _, t := range []Seq{a, b} {
		if _, err := d.stat("", t); errors.Is(err, rewind.ErrNoSuchSeq) {
			return seqError(h, t)
		} else if err != nil {
			return err
		}
	}
	files, err := d.changedPaths(filters)
	if err != nil {
		return err
	}
	color := isTerminal(e.stdout)
	return withPager(e, func(w io.Writer) error {
		for _, p := range files {
			if err := d.writeFile(w, p, color); err != nil {
				return err
			}
		}
		return nil
	})
}

// differ compares two states of one history.
type differ struct {
	h     history
	a, b  Seq
	stats map[statKey]node
}

type statKey struct {
	path string
	t    Seq
}

func (d *differ) stat(p string, t Seq) (node, error) {
	k := statKey{p, t}
	if n, ok := d.stats[k]; ok {
		return n, nil
	}
	n, err := d.h.Stat(p, t)
	if err != nil {
		return n, err
	}
	d.stats[k] = n
	return n, nil
}

// changedPaths lists, sorted, the non-directory paths that may differ
// between a and b: a path can differ only if a checkpoint between them
// names it, or if it lies under a directory that exists on one side only
// (a renamed directory's new subtree is named by no checkpoint).
func (d *differ) changedPaths(filters []string) ([]string, error) {
	lo, hi := min(d.a, d.b), max(d.a, d.b)
	cands := map[string]bool{}
	for ev, err := range d.h.Events() {
		if err != nil {
			return nil, err
		}
		if ev.Seq <= lo || ev.Seq > hi || ev.Type != eventlog.TypeCheckpoint {
			continue
		}
		var cp rewind.Checkpoint
		if json.Unmarshal(ev.Payload, &cp) != nil {
			continue
		}
		for _, f := range cp.Files {
			if matches(filters, f.Path) {
				cands[f.Path] = true
			}
		}
	}
	queue := make([]string, 0, len(cands))
	for p := range cands {
		queue = append(queue, p)
	}
	var files []string
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		na, err := d.stat(p, d.a)
		if err != nil {
			return nil, err
		}
		nb, err := d.stat(p, d.b)
		if err != nil {
			return nil, err
		}
		if (na.Exists && na.Kind != rewind.KindDir) || (nb.Exists && nb.Kind != rewind.KindDir) {
			files = append(files, p)
		}
		// Expand a directory that exists on one side only.
		for _, side := range []struct {
			n, other node
			t        Seq
		}{{na, nb, d.a}, {nb, na, d.b}} {
			if side.n.Kind != rewind.KindDir || side.other.Kind == rewind.KindDir {
				continue
			}
			names, err := d.h.List(p, side.t)
			if err != nil {
				return nil, err
			}
			for _, name := range names {
				c := path.Join(p, name)
				if !cands[c] && matches(filters, c) {
					cands[c] = true
					queue = append(queue, c)
				}
			}
		}
	}
	sort.Strings(files)
	return files, nil
}

// matches reports whether p is one of filters or under one (all paths when
// there are no filters).
func matches(filters []string, p string) bool {
	if len(filters) == 0 {
		return true
	}
	for _, f := range filters {
		if f == "" || p == f || strings.HasPrefix(p, f+"/") || strings.HasPrefix(f, p+"/") {
			return true
		}
	}
	return false
}

// label names a side in the ---/+++ lines.
func label(t Seq) string {
	if t == now {
		return "now"
	}
	return fmt.Sprintf("@%d", t)
}

// gitMode is the mode git prints: type bits and permission bits.
func gitMode(n node) uint32 {
	switch n.Kind {
	case rewind.KindSymlink:
		return 0o120000
	case rewind.KindDir:
		return 0o040000
	}
	return 0o100000 | n.Mode&0o7777
}

// writeFile writes p's diff, if it differs. A path that changed between
// file and symlink (or from or to a directory) is shown, like git does, as
// a deletion and an addition.
func (d *differ) writeFile(w io.Writer, p string, color bool) error {
	na, _ := d.stat(p, d.a)
	nb, _ := d.stat(p, d.b)
	if na.Kind == rewind.KindDir {
		na = node{}
	}
	if nb.Kind == rewind.KindDir {
		nb = node{}
	}
	if na.Exists && nb.Exists && na.Kind != nb.Kind {
		if err := d.writePair(w, p, na, node{}, color); err != nil {
			return err
		}
		return d.writePair(w, p, node{}, nb, color)
	}
	return d.writePair(w, p, na, nb, color)
}

func (d *differ) content(p string, t Seq, n node) ([]byte, error) {
	if !n.Exists {
		return nil, nil
	}
	if n.Kind == rewind.KindSymlink {
		return []byte(n.Target), nil
	}
	if n.Skipped {
		return nil, fmt.Errorf("%s at %s: before-state was not kept (%s)", p, label(t), n.Reason)
	}
	return d.h.Content(p, t)
}

func (d *differ) writePair(w io.Writer, p string, na, nb node, color bool) error {
	if !na.Exists && !nb.Exists {
		return nil
	}
	ca, err := d.content(p, d.a, na)
	if err != nil {
		return err
	}
	cb, err := d.content(p, d.b, nb)
	if err != nil {
		return err
	}
	var hdr strings.Builder
	fmt.Fprintf(&hdr, "diff --git a/%s b/%s\n", p, p)
	from, to := fmt.Sprintf("a/%s\t(%s)", p, label(d.a)), fmt.Sprintf("b/%s\t(%s)", p, label(d.b))
	switch {
	case !na.Exists:
		fmt.Fprintf(&hdr, "new file mode %06o\n", gitMode(nb))
		from = "/dev/null"
	case !nb.Exists:
		fmt.Fprintf(&hdr, "deleted file mode %06o\n", gitMode(na))
		to = "/dev/null"
	default:
		if gitMode(na) != gitMode(nb) {
			fmt.Fprintf(&hdr, "old mode %06o\nnew mode %06o\n", gitMode(na), gitMode(nb))
		} else if bytes.Equal(ca, cb) {
			return nil // identical: the capture changed nothing in the end
		}
	}
	var body string
	switch {
	case bytes.Equal(ca, cb):
	case isBinary(ca) || isBinary(cb):
		bf, bt := "a/"+p, "b/"+p
		if !na.Exists {
			bf = "/dev/null"
		}
		if !nb.Exists {
			bt = "/dev/null"
		}
		body = fmt.Sprintf("Binary files %s and %s differ\n", bf, bt)
	default:
		sa, sb := string(ca), string(cb)
		body, err = udiff.ToUnified(from, to, sa, udiff.Lines(sa, sb), udiff.DefaultContextLines)
		if err != nil {
			return fmt.Errorf("diff %s: %w", p, err)
		}
	}
	out := hdr.String() + body
	if color {
		out = colorDiff(out)
	}
	_, err = io.WriteString(w, out)
	return err
}

// isBinary is git's test: a NUL byte in the first 8000 bytes.
func isBinary(b []byte) bool {
	if len(b) > 8000 {
		b = b[:8000]
	}
	return bytes.IndexByte(b, 0) >= 0
}

// colorDiff paints one file's diff: headers bold, hunk headers cyan,
// deletions red, additions green.
func colorDiff(s string) string {
	var out strings.Builder
	inHunk := false
	for _, line := range strings.SplitAfter(s, "\n") {
		if line == "" {
			continue
		}
		text := strings.TrimSuffix(line, "\n")
		c := ""
		switch {
		case strings.HasPrefix(line, "@@"):
			c, inHunk = colorCyan, true
		case !inHunk:
			c = colorBold
		case strings.HasPrefix(line, "+"):
			c = colorGreen
		case strings.HasPrefix(line, "-"):
			c = colorRed
		}
		if c == "" {
			out.WriteString(line)
			continue
		}
		out.WriteString(c + text + colorReset + "\n")
	}
	return out.String()
}
