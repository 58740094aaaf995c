package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/zerofs/zerofs/history"
	"github.com/zerofs/zerofs/internal/quote"
	"github.com/zerofs/zerofs/record"
)

var diffCmd = &command{
	name:    "diff",
	usage:   "diff [--stat] [SEQ [SEQ2]] [-- PATH...]",
	summary: "unified diff from SEQ to SEQ2 (default: now; no SEQ: the current step)",
	about: `Prints a git-style unified diff (3 lines of context) of every path that
changed between the two states, limited to the PATHs given after "--"
(relative to the current directory). Without SEQ, the changes made in the
current step (since the state before it). A file moved, with the same or
similar content, is shown as a rename with its content's diff. Binary
content is reported, not shown. Colour on a terminal only (not with
NO_COLOR).

SEQ may be a sequence (42 or @42) or relative to the current step: @ is
now, -1 (or @-1) the state before the current step, -2 the one before.
`,
	flags: []flagDef{{name: "stat", help: "one line per path with its added and removed lines, and a total"}},
	args:  []argDef{{name: "SEQ", comp: compSeq}, {name: "SEQ2", comp: compSeq}, {name: "PATH...", afterDashes: true}},
	run:   runDiff,
}

func runDiff(e *env, c *command, args []string) error {
	o, pos, paths, err := c.parse(args)
	if err != nil {
		return err
	}
	stat := o.Bool("stat")
	if len(pos) > 2 {
		return usagef(c, "want at most SEQ and SEQ2")
	}
	var refs []ref
	for _, p := range pos {
		r, err := parseRef(c, p)
		if err != nil {
			return err
		}
		refs = append(refs, r)
	}
	return withHistory(e, func(ws *history.Workspace, src history.Source) error {
		var filters []string
		for _, p := range paths {
			rel, err := ws.RelPath(e.cwd, p)
			if err != nil {
				return err
			}
			filters = append(filters, rel)
		}
		a, b := record.Seq(0), now
		switch len(refs) {
		case 0:
			cur, err := ref{rel: true, text: "@"}.stepBlock(src)
			if err != nil {
				return err
			}
			a = cur.Before()
		default:
			if a, err = refs[0].state(src); err != nil {
				return err
			}
			if len(refs) == 2 {
				if b, err = refs[1].state(src); err != nil {
					return err
				}
			}
		}
		diffs, err := history.Diff(src, a, b, filters)
		if err != nil {
			return err
		}
		color := useColor(e.stdout)
		return withPager(e, func(w io.Writer) error {
			if stat {
				return writeDiffStat(w, diffs, color)
			}
			return writeDiffs(w, diffs, color)
		})
	})
}

func writeDiffs(w io.Writer, diffs []history.FileDiff, color bool) error {
	for _, d := range diffs {
		text := d.Text
		if color {
			text = colorDiff(text)
		}
		if _, err := io.WriteString(w, text); err != nil {
			return err
		}
	}
	return nil
}

// writeDiffStat is git's --stat: " a/b.go | 4 ++--" per path, renames as
// "old => new", then "N files changed, X insertions(+), Y deletions(-)".
func writeDiffStat(w io.Writer, diffs []history.FileDiff, color bool) error {
	type row struct {
		name      string
		added, rm int
		binary    bool
	}
	var rows []row
	width, most := 0, 0
	totalAdd, totalRm := 0, 0
	for _, d := range diffs {
		r := row{name: quote.Name(d.Path)}
		if d.From != "" {
			r.name = quote.Name(d.From) + " => " + r.name
		}
		r.added, r.rm, r.binary = history.CountLines(d.Text)
		totalAdd += r.added
		totalRm += r.rm
		width = max(width, len(r.name))
		most = max(most, r.added+r.rm)
		rows = append(rows, r)
	}
	const bar = 40
	for _, r := range rows {
		if r.binary {
			if _, err := fmt.Fprintf(w, " %-*s | Bin\n", width, r.name); err != nil {
				return err
			}
			continue
		}
		plus, minus := r.added, r.rm
		if most > bar {
			plus = (r.added*bar + most - 1) / most
			minus = (r.rm*bar + most - 1) / most
		}
		p, m := strings.Repeat("+", plus), strings.Repeat("-", minus)
		if color {
			if p != "" {
				p = colorGreen + p + colorReset
			}
			if m != "" {
				m = colorRed + m + colorReset
			}
		}
		if _, err := fmt.Fprintf(w, "%s\n", strings.TrimRight(fmt.Sprintf(" %-*s | %d %s%s", width, r.name, r.added+r.rm, p, m), " ")); err != nil {
			return err
		}
	}
	_, err := fmt.Fprintf(w, " %s changed, %s, %s\n", plural(len(rows), "file"), plural(totalAdd, "insertion")+"(+)", plural(totalRm, "deletion")+"(-)")
	return err
}

func plural(n int, what string) string {
	if n == 1 {
		return fmt.Sprintf("1 %s", what)
	}
	return fmt.Sprintf("%d %ss", n, what)
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
