package main

import (
	"errors"
	"fmt"
	"io"
	"path"
	"sort"
	"strings"

	"github.com/zerofs/zerofs/history"
	"github.com/zerofs/zerofs/record"
)

var showCmd = &command{
	name:    "show",
	usage:   "show STEP | show SEQ PATH",
	summary: "what a step did (like git show), or PATH at SEQ",
	about: `With one argument, shows the step holding sequence STEP as git show shows
a commit: its log line, the paths it changed (as log --stat) and their
diff from the state before it to the state after it.

With SEQ and PATH, writes the file's bytes at SEQ to stdout (a symlink's
target; a directory's names, one per line, directories with a trailing /).
PATH is relative to the current directory, or to the workspace root. When
mounted this reads MOUNT/@SEQ/PATH.

STEP and SEQ may be sequences (42 or @42) or relative to the current step:
@ is the current step (as a state: now), -1 (or @-1) the step before it,
-2 the one before that.
`,
	args: []argDef{{name: "SEQ", comp: compSeq}, {name: "PATH"}},
	run:  runShow,
}

func runShow(e *env, c *command, args []string) error {
	_, pos, rest, err := c.parse(args)
	if err != nil {
		return err
	}
	pos = append(pos, rest...)
	if len(pos) != 1 && len(pos) != 2 {
		return usagef(c, "want STEP, or SEQ and PATH")
	}
	r, err := parseRef(c, pos[0])
	if err != nil {
		return err
	}
	return withHistory(e, func(ws *history.Workspace, h history.Source) error {
		if len(pos) == 1 {
			return showStep(e, h, r)
		}
		t, err := r.state(h)
		if err != nil {
			return err
		}
		return show(e, ws, h, pos[1], t)
	})
}

// showStep prints what the step r names did: its log line with its
// changes, then the diff of its paths from before it to after it.
func showStep(e *env, h history.Source, r ref) error {
	if !r.rel && r.seq == 0 {
		return fmt.Errorf("sequence 0 is the state before any step: there is no step at 0 to show (zerofs show 0 PATH shows a file then)")
	}
	b, err := r.stepBlock(h)
	if err != nil {
		return err
	}
	if b == nil {
		head, _ := h.Head()
		if r.seq > head {
			return history.ExplainSeq(h, r.seq, record.ErrNoSuchSeq)
		}
		return fmt.Errorf("no step holds sequence %d (it is a gc's, or was pruned)", r.seq)
	}
	entries, err := history.Log(h, history.LogOptions{Changes: true})
	if err != nil {
		return err
	}
	var ent *history.Entry
	for i := range entries {
		if entries[i].Sequence == b.Seq {
			ent = &entries[i]
		}
	}
	if ent == nil { // an implicit step that changed nothing in the end
		ent = &history.Entry{Type: b.Type, Sequence: b.Seq, Start: b.Start, End: b.End, Time: b.Time, Label: b.Label, Implicit: b.Implicit, Person: b.Person, Rewind: b.Rewind}
	}
	color := useColor(e.stdout)
	diffs, derr := blockDiff(h, b)
	return withPager(e, func(w io.Writer) error {
		if err := writeLog(w, []history.Entry{*ent}, true, color); err != nil {
			return err
		}
		if err := writeResult(w, ent.Result); err != nil {
			return err
		}
		if derr != nil {
			_, err := fmt.Fprintf(w, "\n(no diff: %v)\n", history.ExplainSeq(h, b.Before(), derr))
			return err
		}
		if len(diffs) == 0 {
			return nil
		}
		fmt.Fprintln(w)
		return writeDiffs(w, diffs, color)
	})
}

// blockDiff is what block b did: the diff from just before it to just
// after it, or, for a block whose sequences interleave with another's
// (another session's step, a person's change: Block.Last), each of its
// paths to the block's last capture of it, so the other's changes are not
// shown as its own.
func blockDiff(h history.Source, b *history.Block) ([]history.FileDiff, error) {
	if b.Last == nil {
		return history.Diff(h, b.Before(), b.After(), nil)
	}
	paths := make([]string, 0, len(b.Last))
	for p := range b.Last {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	var out []history.FileDiff
	for _, p := range paths {
		d, err := history.Diff(h, b.Before(), b.Last[p], []string{p})
		if err != nil {
			return nil, err
		}
		for _, fd := range d {
			if fd.Path == p { // not what lies beneath a directory
				out = append(out, fd)
			}
		}
	}
	return out, nil
}

func show(e *env, ws *history.Workspace, h history.Source, arg string, t record.Seq) error {
	p, n, err := resolveAt(e, ws, h, arg, t)
	if err != nil {
		return err
	}
	switch n.Kind {
	case record.KindDir:
		names, err := h.List(p, t)
		if err != nil {
			return err
		}
		for _, name := range names {
			c, err := h.Stat(path.Join(p, name), t)
			if err != nil {
				return err
			}
			if c.Kind == record.KindDir {
				name += "/"
			}
			fmt.Fprintln(e.stdout, name)
		}
		return nil
	case record.KindSymlink:
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
func resolveAt(e *env, ws *history.Workspace, h history.Source, arg string, t record.Seq) (string, history.Node, error) {
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
		if errors.Is(err, record.ErrNoSuchSeq) {
			return "", history.Node{}, history.ExplainSeq(h, t, err)
		}
		if errors.Is(err, record.ErrUnsafePath) || errors.Is(err, record.ErrReserved) {
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
