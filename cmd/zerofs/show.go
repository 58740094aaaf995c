package main

import (
	"errors"
	"fmt"
	"path"
	"strings"

	"github.com/zerofs/zerofs/history"
	"github.com/zerofs/zerofs/rewind"
)

var showCmd = &command{
	name:    "show",
	usage:   "show SEQ PATH",
	summary: "print PATH as it was at SEQ",
	help: `Writes the file's bytes at SEQ to stdout (a symlink's target; a directory's
names, one per line, directories with a trailing /). PATH is relative to the
current directory, or to the workspace root. When mounted this reads
MOUNT/@SEQ/PATH.
`,
	run: runShow,
}

func runShow(e *env, c *command, args []string) error {
	fs := newFlags(c)
	pos, rest, err := parseArgs(c, fs, args)
	if err != nil {
		return err
	}
	pos = append(pos, rest...)
	if len(pos) != 2 {
		return usagef(c, "want SEQ and PATH")
	}
	t, err := parseSeq(c, pos[0])
	if err != nil {
		return err
	}
	return withHistory(e, func(ws *history.Workspace, h history.Source) error {
		return show(e, ws, h, pos[1], t)
	})
}

func show(e *env, ws *history.Workspace, h history.Source, arg string, t Seq) error {
	p, n, err := resolveAt(e, ws, h, arg, t)
	if err != nil {
		return err
	}
	switch n.Kind {
	case rewind.KindDir:
		names, err := h.List(p, t)
		if err != nil {
			return err
		}
		for _, name := range names {
			c, err := h.Stat(path.Join(p, name), t)
			if err != nil {
				return err
			}
			if c.Kind == rewind.KindDir {
				name += "/"
			}
			fmt.Fprintln(e.stdout, name)
		}
		return nil
	case rewind.KindSymlink:
		_, err := fmt.Fprintln(e.stdout, n.Target)
		return err
	}
	b, err := h.Content(p, t)
	if err != nil {
		return err
	}
	_, err = e.stdout.Write(b)
	return err
}

// resolveAt finds the path the user means at t: relative to the current
// directory first, then relative to the workspace root (like paths copied
// from `zerofs log`).
func resolveAt(e *env, ws *history.Workspace, h history.Source, arg string, t Seq) (string, history.Node, error) {
	p, err := ws.RelPath(e.cwd, arg)
	if err != nil {
		return "", history.Node{}, err
	}
	cands := []string{p}
	if alt := path.Clean(arg); ws.CwdRel(e.cwd) != "" && !path.IsAbs(arg) && alt != p && alt != ".." && !strings.HasPrefix(alt, "../") {
		if alt == "." {
			alt = ""
		}
		cands = append(cands, alt)
	}
	for _, c := range cands {
		n, err := h.Stat(c, t)
		if errors.Is(err, rewind.ErrNoSuchSeq) {
			return "", history.Node{}, history.ExplainSeq(h, t, err)
		}
		if errors.Is(err, rewind.ErrUnsafePath) || errors.Is(err, rewind.ErrReserved) {
			return "", history.Node{}, fmt.Errorf("%s: not a workspace path", arg)
		}
		if err != nil {
			return "", history.Node{}, err
		}
		if n.Exists {
			return c, n, nil
		}
	}
	at := fmt.Sprint(t)
	if t == now {
		at = "now"
	}
	return "", history.Node{}, fmt.Errorf("%s did not exist at %s", arg, at)
}
