package main

import (
	"io"
	"strings"

	"github.com/zerofs/zerofs/history"
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
	return withHistory(e, func(ws *history.Workspace, src history.Source) error {
		var filters []string
		for _, p := range paths {
			rel, err := ws.RelPath(e.cwd, p)
			if err != nil {
				return err
			}
			filters = append(filters, rel)
		}
		diffs, err := history.Diff(src, a, b, filters)
		if err != nil {
			return err
		}
		color := isTerminal(e.stdout)
		return withPager(e, func(w io.Writer) error {
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
		})
	})
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
