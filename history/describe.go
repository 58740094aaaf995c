package history

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/zerofs/zerofs/control"
	"github.com/zerofs/zerofs/internal/quote"
	"github.com/zerofs/zerofs/record"
)

// The one wording of a rewind's result. The CLI prints it, the MCP server
// returns it as its text, the timeline shows it: each reads the report
// (control.RewindReport, which names what the rewind acted on), never the
// log, and none words a result on its own.

// promptWidth is how much of a prompt's first line a name shows.
const promptWidth = 60

// Name names what a rewind acted on (a report's Step, Undid or Redid; a
// session_rewind's step), as every front end says it:
//
//	step 42 "Edit main.go"
//	step 42 (no step)                  changes made outside any step
//	turn 24 "Rename hello to greet…"   a person's prompt, its first line
//	turn 24 (prompt kept out)
//	rewind 57, path rewind 61, revert 60, undo 62, redo 63, merge 65,
//	rewind 64 (a turn taken back)
func Name(ref *record.StepRef) string {
	if ref == nil {
		return "the last step"
	}
	switch ref.Kind {
	case "turn":
		return TurnName(ref.Sequence, ref.Prompt)
	case "rewind":
		return RewindName(ref.Sequence, ref.Label)
	}
	switch {
	case ref.Implicit:
		return fmt.Sprintf("step %d (no step)", ref.Sequence)
	case ref.Label == "":
		return fmt.Sprintf("step %d", ref.Sequence)
	}
	return fmt.Sprintf("step %d %s", ref.Sequence, strconv.Quote(ref.Label))
}

// TurnName is `turn 24 "Rename hello to greet…"`: the prompt's first line,
// cut, or "(prompt kept out)".
func TurnName(seq record.Seq, prompt string) string {
	if prompt == "" {
		return fmt.Sprintf("turn %d (prompt kept out)", seq)
	}
	return fmt.Sprintf("turn %d %s", seq, strconv.Quote(CutLine(prompt, promptWidth)))
}

// RewindName names the session_rewind at seq by its form: `rewind 57`,
// `path rewind 61`, `revert 60`, `undo 62`, `redo 63`, `rewind 64 (a turn
// taken back)`.
func RewindName(seq record.Seq, form string) string {
	switch form {
	case record.FormPaths:
		return fmt.Sprintf("path rewind %d", seq)
	case record.FormRevert, record.FormUndo, record.FormRedo, record.FormMerge:
		return fmt.Sprintf("%s %d", form, seq)
	case record.FormTurn:
		return fmt.Sprintf("rewind %d (a turn taken back)", seq)
	}
	return fmt.Sprintf("rewind %d", seq)
}

// CutLine is the first line of s, cut to n runes ("…" where it was cut,
// " …" when lines follow).
func CutLine(s string, n int) string {
	first, rest, _ := strings.Cut(strings.TrimSpace(s), "\n")
	r := []rune(strings.TrimSpace(first))
	if len(r) > n {
		return string(r[:n-1]) + "…"
	}
	if strings.TrimSpace(rest) != "" {
		return string(r) + " …"
	}
	return string(r)
}

// Words is a rewind's report as people read it: Head, one line, then
// Lines, each without its newline: a dry run's paths (`  restore  a.go
// +1 -2`), the paths skipped, and in a dry run the changes made by others
// it would overwrite or leave alone and a revert's conflicts.
type Words struct {
	Head  string
	Lines []string
}

// String is the words as text, a newline after each line.
func (w Words) String() string {
	var b strings.Builder
	b.WriteString(w.Head)
	b.WriteByte('\n')
	for _, l := range w.Lines {
		b.WriteString(l)
		b.WriteByte('\n')
	}
	return b.String()
}

// Describe words rep, a rewind's report (done, dry run, unchanged, or a
// revert refused for conflicts):
//
//	rewound to 42: restored 3, deleted 1, skipped 0
//	rewound main.go to 1: restored 1, deleted 0, skipped 0
//	undid step 42 "Edit main.go": restored 1, deleted 0
//	redid turn 24 "Rename hello…": restored 4, deleted 0
//	took back turn 24 "Rename hello…": rewound to 23, restored 1, deleted 2
//	reverted step 4 "Bash": restored 1, deleted 0, skipped 0
//	would undo step 42 "Edit main.go" (rewind to 41): restore 1, delete 0, skip 0
//	nothing to change: main.go is already as it would be
func Describe(rep control.RewindReport) Words {
	r := rep.Report
	var w Words
	what := rep.Step
	if what == nil {
		what = rep.Undid
	}
	if what == nil {
		what = rep.Redid
	}
	form := formOf(rep)
	conflicted := len(rep.Conflicts) > 0 && (rep.Error == control.ErrorConflict || !rep.Force)
	switch {
	case rep.Unchanged:
		w.Head = "nothing to change: " + unchangedWhat(rep, what) + " already as it would be"
	case rep.DryRun && conflicted:
		w.Head = fmt.Sprintf("reverting %s would change nothing: later changes conflict (with --force: restore %d, delete %d, skip %d)",
			revertName(rep, what), r.Restored, r.Deleted, len(r.Skipped))
	case rep.DryRun:
		w.Head = fmt.Sprintf("would %s: restore %d, delete %d, skip %d%s", dryWhat(rep, form, what), r.Restored, r.Deleted, len(r.Skipped), forced(rep))
	default:
		w.Head = doneWhat(rep, form, what)
	}
	if rep.DryRun {
		for _, c := range rep.Preview {
			p := quote.Name(c.Path)
			if c.Kind == record.KindDir {
				p += "/"
			}
			line := fmt.Sprintf("  %-8s %s", c.Action, p)
			if c.Kind == record.KindSymlink {
				line += " (symlink)"
			}
			if c.Lines != nil && (c.Lines.Added > 0 || c.Lines.Removed > 0) {
				line += fmt.Sprintf("  +%d -%d", c.Lines.Added, c.Lines.Removed)
			}
			w.Lines = append(w.Lines, line)
		}
		for _, p := range r.Skipped {
			w.Lines = append(w.Lines, fmt.Sprintf("  skip     %s (its earlier state was not kept)", quote.Name(p)))
		}
		for _, f := range rep.Foreign {
			what := "foreign "
			if f.Kept { // a person's change, left alone
				what = "kept    "
			}
			w.Lines = append(w.Lines, fmt.Sprintf("  %s %s (changed %s by %s, pid %d)", what, quote.Name(f.Path), f.Why, quote.Name(f.Comm), f.PID))
		}
		for _, p := range rep.Conflicts {
			if conflicted {
				w.Lines = append(w.Lines, fmt.Sprintf("  conflict %s (changed since the step)", quote.Name(p)))
			} else {
				w.Lines = append(w.Lines, fmt.Sprintf("  conflict %s (changed since the step; it goes back too)", quote.Name(p)))
			}
		}
		return w
	}
	for _, p := range r.Skipped {
		w.Lines = append(w.Lines, fmt.Sprintf("  skipped %s", quote.Name(p)))
	}
	return w
}

// formOf is rep's form, for a report from a daemon that did not say.
func formOf(rep control.RewindReport) string {
	switch {
	case rep.Form != "":
		return rep.Form
	case rep.Undid != nil:
		return record.FormUndo
	case rep.Redid != nil:
		return record.FormRedo
	case rep.RevertOf != 0:
		return record.FormRevert
	case rep.Merge != nil:
		return record.FormMerge
	case len(rep.Paths) > 0:
		return record.FormPaths
	}
	return record.FormRewind
}

// dryWhat is what a dry run would do: `undo step 42 "Edit" (rewind to 41)`.
func dryWhat(rep control.RewindReport, form string, what *record.StepRef) string {
	t := rep.TargetSequence
	switch form {
	case record.FormPaths:
		return fmt.Sprintf("rewind %s to %d", quote.Names(rep.Paths, ", "), t)
	case record.FormRevert:
		return "revert " + revertName(rep, what)
	case record.FormUndo, record.FormRedo:
		return fmt.Sprintf("%s %s (rewind to %d)", form, Name(what), t)
	case record.FormTurn:
		return fmt.Sprintf("take back %s (rewind to %d)", Name(what), t)
	case record.FormMerge:
		return "merge " + quote.Name(mergeDir(rep))
	}
	return fmt.Sprintf("rewind to %d", t)
}

// mergeDir is the fork a merge's report names.
func mergeDir(rep control.RewindReport) string {
	if rep.Merge != nil {
		return rep.Merge.Record.Dir
	}
	return "a fork"
}

// doneWhat is the line of a rewind done.
func doneWhat(rep control.RewindReport, form string, what *record.StepRef) string {
	r := rep.Report
	t := rep.TargetSequence
	switch form {
	case record.FormPaths:
		return fmt.Sprintf("rewound %s to %d: restored %d, deleted %d, skipped %d", quote.Names(rep.Paths, ", "), t, r.Restored, r.Deleted, len(r.Skipped))
	case record.FormRevert:
		return fmt.Sprintf("reverted %s: restored %d, deleted %d, skipped %d%s", revertName(rep, what), r.Restored, r.Deleted, len(r.Skipped), forced(rep))
	case record.FormUndo:
		return fmt.Sprintf("undid %s: restored %d, deleted %d%s", Name(what), r.Restored, r.Deleted, skippedCount(r))
	case record.FormRedo:
		return fmt.Sprintf("redid %s: restored %d, deleted %d%s", Name(what), r.Restored, r.Deleted, skippedCount(r))
	case record.FormTurn:
		return fmt.Sprintf("took back %s: rewound to %d, restored %d, deleted %d%s", Name(what), t, r.Restored, r.Deleted, skippedCount(r))
	case record.FormMerge:
		made := "forked at 0"
		if rep.Merge != nil {
			made = rep.Merge.Record.Made()
		}
		return fmt.Sprintf("merged %s (%s) as %d: restored %d, deleted %d%s", quote.Name(mergeDir(rep)), made, rep.Sequence, r.Restored, r.Deleted, skippedCount(r))
	}
	return fmt.Sprintf("rewound to %d: restored %d, deleted %d, skipped %d", t, r.Restored, r.Deleted, len(r.Skipped))
}

// revertName is the step a revert acted on (by its sequence, from a daemon
// that did not name it).
func revertName(rep control.RewindReport, what *record.StepRef) string {
	if what == nil {
		return fmt.Sprintf("step %d", rep.RevertOf)
	}
	return Name(what)
}

// forced says which later changes a forced revert put back too.
func forced(rep control.RewindReport) string {
	if !rep.Force || len(rep.Conflicts) == 0 {
		return ""
	}
	return fmt.Sprintf(" (forced over later changes to %s)", quote.Names(rep.Conflicts, ", "))
}

// unchangedWhat names what a rewind that changes nothing found as it would
// be.
func unchangedWhat(rep control.RewindReport, what *record.StepRef) string {
	switch {
	case len(rep.Paths) > 0:
		if len(rep.Paths) == 1 {
			return quote.Names(rep.Paths, ", ") + " is"
		}
		return quote.Names(rep.Paths, ", ") + " are"
	case formOf(rep) == record.FormRevert:
		return "every path " + revertName(rep, what) + " changed is"
	case formOf(rep) == record.FormMerge:
		return "the workspace (it holds every change of the fork) is"
	}
	return "the workspace is"
}

func skippedCount(r record.Report) string {
	if len(r.Skipped) == 0 {
		return ""
	}
	return fmt.Sprintf(", skipped %d", len(r.Skipped))
}

// ForeignWarnings names the changes made outside the agent's steps (or in
// another agent session's) that a rewind overwrote (verb "overwrote"; "would
// overwrite" in a dry run), and the person's changes it left alone, one
// sentence each, skipping the paths in seen (and adding those it names).
func ForeignWarnings(fs []record.Foreign, verb string, seen map[string]bool) []string {
	var out []string
	for _, f := range fs {
		if seen[f.Path] {
			continue
		}
		seen[f.Path] = true
		who := ""
		if f.Comm != "" || f.PID != 0 {
			who = fmt.Sprintf(" by %s (pid %d)", quote.Name(f.Comm), f.PID)
		}
		why := f.Why
		if f.Session != "" {
			why += " " + f.Session
		}
		if f.Kept { // a person's change, which it does not take back
			out = append(out, fmt.Sprintf("left %s alone, changed %s%s after sequence %d: a person's change is not taken back", quote.Name(f.Path), why, who, f.Seq))
			continue
		}
		out = append(out, fmt.Sprintf("this %s %s, changed %s%s after sequence %d", verb, quote.Name(f.Path), why, who, f.Seq))
	}
	return out
}
