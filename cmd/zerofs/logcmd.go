package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/zerofs/zerofs/history"
	"github.com/zerofs/zerofs/internal/quote"
	"github.com/zerofs/zerofs/record"
)

var logCmd = &command{
	name:    "log",
	usage:   "log [--json] [--stat] [--all] [--failed] [-n N] [-- PATH...] | log --replica URL [--replica-key FILE] [--json]",
	summary: "steps, newest first, with changed paths",
	about: `One block per step (its tool_call's sequence, local time and label, and
"failed" with the exit code and duration when its tool call failed), per
rewind and per gc, newest first. Changes made outside any step (before the
first one, or after a rewind) form an implicit step, "(no step)"; one that
changed nothing in the end is left out, and so is a step that changed
nothing (an agent's read-only tool call) unless --all or its tool call
failed.

When an agent's prompt hook records turns (zerofs hooks install), each
turn (a person's prompt) heads the steps it led to, which are indented
under it; 'zerofs rewind --before-turn SEQ' takes a whole turn back.
`,
	flags: []flagDef{
		{name: "json", help: `one JSON array instead, changes included; docs/agents.md gives its
fields`},
		{name: "stat", help: `list the paths each step changed: added, deleted, modified, mode
(permission bits only), renamed, skipped (before-state not kept),
each with the process (name[pid]) that changed it`},
		{name: "all", help: "also the steps that changed nothing"},
		{name: "failed", help: `only the steps whose recorded result (an agent's after-tool hook,
'zerofs run') is an error, whether they changed anything or not`},
		{name: "n", arg: "N", def: 0, comp: compNone, help: `only the newest N steps, rewinds and gcs (N >= 1), each under
its turn's prompt, which is always shown with them`},
		{name: "replica", arg: "URL", comp: compNone, help: `the log of the replica at URL (s3://BUCKET/PREFIX) instead,
with --json and --replica-key only`},
		{name: "replica-key", arg: "FILE", help: "the replica's key, when it is sealed"},
	},
	args: []argDef{{name: "PATH...", afterDashes: true, help: `only the steps that changed these paths (relative to the current
directory; a directory stands for everything under it), and only
those changes; when no step changed them, log says so and
whether they exist, and exits 1 for a path that does not`}},
	more: `The output goes through $PAGER (default "less -FRX") when stdout is a terminal.
`,
	run: runLog,
}

func runLog(e *env, c *command, args []string) error {
	o, pos, paths, err := c.parse(args)
	if err != nil {
		return err
	}
	asJSON := o.Bool("json")
	stat := o.Bool("stat")
	limit := o.Int("n")
	all := o.Bool("all")
	failed := o.Bool("failed")
	replica := o.String("replica")
	keyFile := o.String("replica-key")
	if replica != "" {
		if len(pos)+len(paths) > 0 || stat || all || failed || limit != 0 {
			return usagef(c, "log --replica takes only --replica-key and --json")
		}
		return logReplica(e, c, replica, keyFile, asJSON)
	}
	if len(pos) > 0 {
		return usagef(c, "unexpected argument %q (paths go after --)", pos[0])
	}
	if limit < 0 {
		return usagef(c, "-n %d is negative: want how many entries to show", limit)
	}
	if limit == 0 && o.Given("n") {
		return usagef(c, "-n 0 would show nothing: want how many entries to show (1 or more), or leave -n out for all")
	}
	return withHistory(e, func(ws *history.Workspace, src history.Source) error {
		opts := history.LogOptions{Changes: asJSON || stat, Limit: limit, All: all, Failed: failed}
		for _, p := range paths {
			rel, err := ws.RelPath(e.cwd, p)
			if err != nil {
				return err
			}
			opts.Paths = append(opts.Paths, rel)
		}
		entries, err := history.Log(src, opts)
		if err != nil {
			return err
		}
		if len(entries) == 0 && len(opts.Paths) > 0 && !asJSON {
			return untouched(e.stdout, src, opts.Paths)
		}
		if asJSON {
			enc := json.NewEncoder(e.stdout)
			enc.SetIndent("", "  ")
			return enc.Encode(entries)
		}
		color := useColor(e.stdout)
		return withPager(e, func(w io.Writer) error {
			return writeLog(w, entries, stat, color)
		})
	})
}

// untouched is log's answer for paths no entry changed: it says so, and
// whether they exist now; one that does not exist either is an error, as
// rewind refuses a path that is nowhere (a typo, most likely).
func untouched(w io.Writer, src history.Source, paths []string) error {
	if head, err := src.Head(); err != nil {
		return err
	} else if head == 0 {
		_, err := fmt.Fprintln(w, "no history yet")
		return err
	}
	var missing []string
	for _, p := range paths {
		n, err := src.Stat(p, now)
		if err != nil {
			return err
		}
		if !n.Exists {
			missing = append(missing, p)
		}
	}
	if len(missing) > 0 {
		nowhere := quote.Names(missing, ", ") + " does not exist"
		if len(missing) > 1 {
			nowhere = quote.Names(missing, ", ") + " do not exist"
		}
		return fmt.Errorf("no step changed %s, and %s (paths are relative to this directory; zerofs log --stat lists what each step changed)",
			quote.Names(paths, " or "), nowhere)
	}
	exist := "it exists"
	if len(paths) > 1 {
		exist = "they exist"
	}
	_, err := fmt.Fprintf(w, "no step changed %s (%s)\n", quote.Names(paths, " or "), exist)
	return err
}

// writeLog prints the human form of the log.
func writeLog(w io.Writer, entries []history.Entry, stat, color bool) error {
	if len(entries) == 0 {
		_, err := fmt.Fprintln(w, "no history yet")
		return err
	}
	paint := func(c, s string) string {
		if !color {
			return s
		}
		return c + s + colorReset
	}
	// Align the times: the widest sequence is the first (newest) one.
	width := len(fmt.Sprint(entries[0].Sequence))
	turns := map[record.Seq]history.Entry{}
	for _, ent := range entries {
		if ent.Type == history.EntryTurn {
			turns[ent.Sequence] = ent
		}
	}
	// Each turn heads its steps (newest first, like everything), which are
	// indented under it.
	var group record.Seq
	shown := map[record.Seq]bool{}
	printed := false // anything printed yet (a blank line goes between blocks with --stat)
	headed := false  // a turn's header was the last line printed
	header := func(t record.Seq) error {
		shown[t] = true
		if stat && printed {
			fmt.Fprintln(w)
		}
		printed, headed = true, true
		ent, ok := turns[t]
		what := turnLine(ent, ok)
		head := fmt.Sprintf("%-6s %-*d", "turn", width, t)
		when := ""
		if ok {
			when = ent.Time.Local().Format("2006-01-02 15:04:05")
		}
		_, err := fmt.Fprintf(w, "%s  %s  %s\n", paint(colorYel, head), when, what)
		return err
	}
	indent := ""
	for _, ent := range entries {
		if ent.Type == history.EntryTurn {
			if !shown[ent.Sequence] {
				if err := header(ent.Sequence); err != nil {
					return err
				}
			}
			group, indent = ent.Sequence, "  "
			continue
		}
		if ent.Turn != group {
			group, indent = ent.Turn, ""
			if ent.Turn != 0 {
				indent = "  "
				if err := header(ent.Turn); err != nil {
					return err
				}
			}
		}
		if stat && printed && !headed {
			fmt.Fprintln(w)
		}
		printed, headed = true, false
		when := ent.Time.Local().Format("2006-01-02 15:04:05")
		var what string
		switch ent.Type {
		case history.BlockStep:
			what = quote.Name(ent.Label)
			if ent.Person {
				what = "(a person)"
			} else if ent.Implicit {
				what = "(no step)"
				if ent.Label != "" {
					what += " " + quote.Name(ent.Label)
				}
			}
			if ent.StatesThinned {
				what += " (thinned)"
			}
			what += resultMark(ent.Result, paint)
		case history.BlockRewind:
			what = "rewind"
			if ent.Title != "" {
				what = ent.Title
			}
			if r := ent.Rewind; r != nil {
				what += fmt.Sprintf(": restored %d, deleted %d, skipped %d", r.Report.Restored, r.Report.Deleted, len(r.Report.Skipped))
			}
		case history.BlockPruned:
			if tp := ent.Thinned; tp != nil {
				what = fmt.Sprintf("thinned history before %d to one state a day: %s, the states of %s went",
					tp.Before, plural(len(tp.Intervals), "interval"), plural(tp.Steps, "step"))
				break
			}
			what = fmt.Sprintf("pruned history before %d", *ent.PrunedBefore)
		}
		head := fmt.Sprintf("%-6s %-*d", ent.Type, width, ent.Sequence)
		if _, err := fmt.Fprintf(w, "%s%s  %s  %s\n", indent, paint(colorYel, head), when, what); err != nil {
			return err
		}
		if ent.Ignores != nil {
			if _, err := fmt.Fprintf(w, "%s    %s\n", indent, ignoresLine(*ent.Ignores)); err != nil {
				return err
			}
		}
		if !stat {
			continue
		}
		if r := ent.Result; r != nil && r.Status == "error" && r.Summary != "" {
			if _, err := fmt.Fprintf(w, "%s    %s %s\n", indent, paint(colorRed, "error:"), quote.Line(r.Summary)); err != nil {
				return err
			}
		}
		for _, c := range ent.Changes {
			if _, err := fmt.Fprintf(w, "%s    %s\n", indent, formatChange(c, paint)); err != nil {
				return err
			}
		}
	}
	return nil
}

// turnLine describes a turn: its prompt's first line, quoted and cut, and
// the agent that took it.
func turnLine(ent history.Entry, ok bool) string {
	if !ok {
		return "(prompt not shown)"
	}
	what := "(prompt kept out)"
	if ent.Prompt != "" {
		what = strconv.Quote(history.CutLine(ent.Prompt, 72))
	}
	if ent.Agent != "" {
		what += " (" + quote.Name(ent.Agent) + ")"
	}
	return what
}

// kindSuffix marks a directory with "/" and a symlink with "@", as ls -F.
func kindSuffix(kind string) string {
	switch kind {
	case string(record.KindDir):
		return "/"
	case string(record.KindSymlink):
		return "@"
	}
	return ""
}

// formatChange is one --stat line:
// "modified  a/b.go  (1.2 KiB -> 1.3 KiB)  by sed[4242]".
func formatChange(c history.Change, paint func(string, string) string) string {
	name := quote.Name(c.Path) + kindSuffix(c.Kind)
	var detail []string
	isFile := c.Kind == string(record.KindFile)
	switch c.Change {
	case history.ChangeAdded:
		if isFile {
			detail = append(detail, humanBytes(c.Bytes))
		}
	case history.ChangeModified:
		switch {
		case c.OldKind != "":
			what := func(kind string, bytes int64) string {
				if kind == string(record.KindFile) {
					return "file of " + humanBytes(bytes)
				}
				if kind == string(record.KindDir) {
					return "directory"
				}
				return kind
			}
			to := what(c.Kind, c.Bytes)
			if c.Kind == string(record.KindSymlink) {
				to = "symlink to " + quote.Name(c.Target)
			}
			detail = append(detail, what(c.OldKind, c.OldBytes)+" -> "+to)
		case c.Kind == string(record.KindSymlink):
			detail = append(detail, "now to "+quote.Name(c.Target))
		case isFile:
			detail = append(detail, humanBytes(c.OldBytes)+" -> "+humanBytes(c.Bytes))
		}
	case history.ChangeRenamed:
		name = quote.Name(c.From) + " -> " + name
	case history.ChangeSkipped, history.ChangeUnknown:
		detail = append(detail, quote.Name(c.Reason))
	}
	if c.OldMode != c.Mode {
		detail = append(detail, fmt.Sprintf("mode %04o -> %04o", c.OldMode, c.Mode))
	}
	for _, x := range c.Xattrs {
		detail = append(detail, history.XattrName(x))
	}
	col := colorYel
	switch c.Change {
	case history.ChangeAdded:
		col = colorGreen
	case history.ChangeDeleted:
		col = colorRed
	}
	s := paint(col, fmt.Sprintf("%-9s", c.Change)) + " " + name
	if len(detail) > 0 {
		s += "  (" + strings.Join(detail, ", ") + ")"
	}
	if c.Comm != "" || c.PID != 0 {
		s += fmt.Sprintf("  by %s[%d]", quote.Name(c.Comm), c.PID)
	}
	return s
}
