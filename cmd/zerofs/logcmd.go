package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/zerofs/zerofs/rewind"
)

var logCmd = &command{
	name:    "log",
	usage:   "log [--json] [--stat]",
	summary: "steps and events, newest first, with changed paths",
	help: `One block per step (its tool_call's sequence, local time and label), per
rewind and per gc, newest first. Changes made outside any step (before the
first one, or after a rewind) form an implicit step.

  --stat   list the paths each step changed: added, deleted, modified, mode
           (permission bits only), renamed, skipped (before-state not kept)
  --json   one JSON array instead, changes included; see the README for its
           fields

The output goes through $PAGER (default "less -FRX") when stdout is a terminal.
`,
	run: runLog,
}

// logEntry is one element of `zerofs log --json`. Field names are a
// contract for harnesses: add fields, never rename them.
type logEntry struct {
	// Type is "step", "rewind" or "gc".
	Type string `json:"type"`
	// Sequence is the block's event: the tool_call, session_rewind or
	// history_pruned (an implicit step's first checkpoint).
	Sequence Seq `json:"sequence"`
	// Start..End are the sequences that belong to the block: `zerofs diff
	// Start-1 End` shows what it did, `zerofs rewind Start-1` undoes it.
	Start        Seq                   `json:"start"`
	End          Seq                   `json:"end"`
	Time         time.Time             `json:"time"`
	Label        string                `json:"label,omitempty"`
	Implicit     bool                  `json:"implicit,omitempty"`
	Payload      json.RawMessage       `json:"payload,omitempty"`
	Rewind       *rewind.RewindPayload `json:"rewind,omitempty"`
	PrunedBefore *Seq                  `json:"prunedBefore,omitempty"`
	Changes      []change              `json:"changes"`
}

func runLog(e *env, c *command, args []string) error {
	fs := newFlags(c)
	asJSON := fs.Bool("json", false, "")
	stat := fs.Bool("stat", false, "")
	pos, rest, err := parseArgs(c, fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 || len(rest) > 0 {
		return usagef(c, "unexpected argument %q", append(pos, rest...)[0])
	}
	_, h, err := openWorkspaceHistory(e)
	if err != nil {
		return err
	}
	defer h.Close()
	blocks, _, err := readBlocks(h)
	if err != nil {
		return err
	}
	pruned, err := h.PrunedBefore()
	if err != nil {
		return err
	}
	entries := make([]logEntry, 0, len(blocks))
	for i := len(blocks) - 1; i >= 0; i-- {
		b := blocks[i]
		ent := logEntry{Type: b.Type, Sequence: b.Seq, Start: b.Start, End: b.End, Time: b.Time,
			Label: b.Label, Implicit: b.Implicit, Payload: b.Payload, Rewind: b.Rewind, Changes: []change{}}
		if b.Pruned != nil {
			ent.PrunedBefore = &b.Pruned.Before
		}
		if (*asJSON || *stat) && b.Type != blockPruned {
			cs, err := blockChanges(h, b, pruned)
			if err != nil {
				return err
			}
			if cs != nil {
				ent.Changes = cs
			}
		}
		entries = append(entries, ent)
	}
	if *asJSON {
		enc := json.NewEncoder(e.stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(entries)
	}
	color := isTerminal(e.stdout)
	return withPager(e, func(w io.Writer) error {
		return writeLog(w, entries, *stat, color)
	})
}

// writeLog prints the human form of the log.
func writeLog(w io.Writer, entries []logEntry, stat, color bool) error {
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
	for i, ent := range entries {
		if i > 0 && stat {
			fmt.Fprintln(w)
		}
		when := ent.Time.Local().Format("2006-01-02 15:04:05")
		var what string
		switch ent.Type {
		case blockStep:
			what = ent.Label
			if ent.Implicit {
				what = "(no step)"
				if ent.Label != "" {
					what += " " + ent.Label
				}
			}
		case blockRewind:
			what = "rewind"
			if r := ent.Rewind; r != nil {
				what = fmt.Sprintf("rewind to %d: restored %d, deleted %d, skipped %d",
					r.TargetSequence, r.Report.Restored, r.Report.Deleted, len(r.Report.Skipped))
			}
		case blockPruned:
			what = fmt.Sprintf("pruned history before %d", *ent.PrunedBefore)
		}
		head := fmt.Sprintf("%-6s %-*d", ent.Type, width, ent.Sequence)
		if _, err := fmt.Fprintf(w, "%s  %s  %s\n", paint(colorYel, head), when, what); err != nil {
			return err
		}
		if !stat {
			continue
		}
		for _, c := range ent.Changes {
			if _, err := fmt.Fprintf(w, "    %s\n", formatChange(c, paint)); err != nil {
				return err
			}
		}
	}
	return nil
}

// formatChange is one --stat line: "modified  a/b.go  (1.2 KiB -> 1.3 KiB)".
func formatChange(c change, paint func(string, string) string) string {
	name := c.Path
	if c.Kind == string(rewind.KindDir) {
		name += "/"
	} else if c.Kind == string(rewind.KindSymlink) {
		name += "@"
	}
	var detail []string
	switch c.Change {
	case "added":
		detail = append(detail, humanBytes(c.Bytes))
	case "modified":
		detail = append(detail, humanBytes(c.OldBytes)+" -> "+humanBytes(c.Bytes))
	case "renamed":
		name = c.From + " -> " + name
	case "skipped", "unknown":
		detail = append(detail, c.Reason)
	}
	if c.OldMode != c.Mode {
		detail = append(detail, fmt.Sprintf("mode %04o -> %04o", c.OldMode, c.Mode))
	}
	col := colorYel
	switch c.Change {
	case "added":
		col = colorGreen
	case "deleted":
		col = colorRed
	}
	s := paint(col, fmt.Sprintf("%-9s", c.Change)) + " " + name
	if len(detail) > 0 {
		s += "  (" + strings.Join(detail, ", ") + ")"
	}
	return s
}
