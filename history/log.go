package history

import (
	"encoding/json"
	"strings"
	"time"

	"github.com/zerofs/zerofs/record"
)

// An Entry is one element of `zerofs log --json`: a block with its
// changes. Field names are a contract for harnesses: add fields, never
// rename them.
type Entry struct {
	// Type is "step", "rewind", "gc" or "turn".
	Type string `json:"type"`
	// Sequence is the block's event: the tool_call, session_rewind or
	// history_pruned (an implicit step's first checkpoint).
	Sequence record.Seq `json:"sequence"`
	// Start..End are the sequences that belong to the block: `zerofs diff
	// Start-1 End` shows what it did, `zerofs rewind Start-1` undoes it.
	Start record.Seq `json:"start"`
	End   record.Seq `json:"end"`
	// Before is the latest sequence whose state is the workspace just
	// before the entry (Block.Before; a turn's, just before its prompt);
	// After the earliest whose state is the workspace just after it
	// (Block.After): a diff's two sides.
	Before   record.Seq `json:"before"`
	After    record.Seq `json:"after,omitempty"`
	Time     time.Time  `json:"time"`
	Label    string     `json:"label,omitempty"`
	Implicit bool       `json:"implicit,omitempty"`
	// Person marks a person's change (SPEC, Whose change it is): made by a
	// process outside every agent's process tree while agent sessions were
	// known. It is an implicit step of its own, never part of an agent's.
	Person  bool                  `json:"person,omitempty"`
	Payload json.RawMessage       `json:"payload,omitempty"`
	Rewind  *record.RewindPayload `json:"rewind,omitempty"`
	// Title says what a rewind was: `revert of step 15 "Bash: rm -rf
	// docs"`, `restore README.md to 0`, `undo of step 27 "Edit"`.
	Title        string      `json:"title,omitempty"`
	PrunedBefore *record.Seq `json:"prunedBefore,omitempty"`
	// Thinned is a gc's thin: exactly the intervals of states it gave up.
	Thinned *record.ThinnedPayload `json:"thinned,omitempty"`
	// StatesThinned marks a block whose state before or after it a thin
	// gave up: it stays listed with the paths it captured, but @T for
	// those sequences no longer exists and its changes are "unknown".
	StatesThinned bool `json:"statesThinned,omitempty"`
	// Turn is the turn a step or rewind belongs to (its sequence), when
	// there is one.
	Turn record.Seq `json:"turn,omitempty"`
	// A turn's prompt (unless it was kept out), agent and agent session.
	Prompt       string `json:"prompt,omitempty"`
	Agent        string `json:"agent,omitempty"`
	AgentSession string `json:"agentSession,omitempty"`
	// Result is what came of a step's tool call (its tool_result), when
	// one was recorded.
	Result  *record.ToolResultPayload `json:"result,omitempty"`
	Changes []Change                  `json:"changes"`
	// Ignores, for a block that changed .zeroignore, is its patterns after
	// the block: what is ignored from then on (empty: nothing, the file
	// gone or empty). Absent when the block did not change it.
	Ignores *[]string `json:"ignores,omitempty"`
}

// EntryTurn is the type of a turn's entry.
const EntryTurn = "turn"

// LogOptions select what Log returns.
type LogOptions struct {
	// Changes fills each entry's Changes (they are always computed for
	// implicit steps and with Paths, to know which entries to keep).
	Changes bool
	// Limit, when > 0, keeps only the newest Limit steps, rewinds and gcs.
	// A turn's own entry is not counted: every turn that a kept entry
	// belongs to is listed with it (its prompt heads its steps), and so is
	// every turn newer than the oldest entry kept.
	Limit int
	// Before, when not 0, keeps only the entries whose sequence is below
	// it (the timeline's next page).
	Before record.Seq
	// Paths, when not empty, keeps only the entries that changed one of
	// these workspace paths or something under them ("" is the root), and
	// only those changes (with the turns they belong to).
	Paths []string
	// All keeps the steps that changed nothing (an agent's read-only tool
	// calls), which are left out by default.
	All bool
	// Failed keeps only the steps whose recorded result is an error,
	// whether they changed anything or not.
	Failed bool
}

// Log is the history of src as entries, newest first: LogPage's entries.
func Log(src Source, opts LogOptions) ([]Entry, error) {
	p, err := LogPage(src, opts)
	return p.Entries, err
}

// A Page is some of the log, newest first, and whether older entries
// remain (More: ask again with Before set to the last entry's sequence).
type Page struct {
	Entries []Entry
	More    bool
}

// LogPage is the history of src as entries, newest first, as every front
// end shows it (`zerofs log`, zerofs_log, the timeline). An implicit step
// whose captures all ended as they began (a read-only tool that opened a
// file for writing) is left out: it changed nothing and belongs to no step.
// A step that captured nothing, or whose captures all ended as they began
// (when changes are computed), is left out unless opts.All.
//
// Turns are entries of their own (type "turn"), placed by sequence, and
// each step names its turn; a turn whose steps are listed is listed too,
// whatever the limit, so its prompt always heads them.
func LogPage(src Source, opts LogOptions) (Page, error) {
	blocks, turns, err := BlocksAndTurns(src)
	if err != nil {
		return Page{}, err
	}
	pruned, err := src.PrunedBefore()
	if err != nil {
		return Page{}, err
	}
	thinned, err := src.Thinned()
	if err != nil {
		return Page{}, err
	}
	page := Page{Entries: []Entry{}}
	counted := 0                  // entries kept that are not turns
	want := map[record.Seq]bool{} // the turns of the entries kept
	for i := len(blocks) - 1; i >= 0; i-- {
		b := blocks[i]
		if b.Forgotten(pruned) {
			continue // the gc's entry stands for it
		}
		if opts.Before != 0 && b.Seq >= opts.Before {
			continue
		}
		if opts.Failed && (b.Result == nil || b.Result.Status != "error") {
			continue
		}
		if len(opts.Paths) > 0 {
			if b.Type == BlockPruned || !touches(b, opts.Paths) {
				continue
			}
		}
		// A step whose tool call failed is shown even when it changed
		// nothing: a failed test run says something.
		all := opts.All || opts.Failed || (b.Result != nil && b.Result.Status == "error")
		if b.Type == BlockStep && !all && len(b.Files) == 0 {
			continue // changed nothing
		}
		if opts.Limit > 0 && counted >= opts.Limit {
			page.More = true
			break
		}
		ent := Entry{Type: b.Type, Sequence: b.Seq, Start: b.Start, End: b.End, Time: b.Time,
			Label: b.Label, Implicit: b.Implicit, Person: b.Person, Payload: b.Payload, Rewind: b.Rewind, Turn: b.Turn,
			Result: b.Result, Before: b.Before(), After: b.After(), Changes: []Change{}}
		if b.Type == BlockPruned {
			ent.Before, ent.After = b.Seq, b.Seq
		}
		if b.Pruned != nil {
			ent.PrunedBefore = &b.Pruned.Before
		}
		if b.Type == BlockRewind {
			ent.Title = b.Title(blocks, turns)
		}
		ent.Thinned = b.Thinned
		ent.StatesThinned = b.StatesThinned(thinned)
		if ent.Ignores, err = ignoresAfter(src, b); err != nil {
			return Page{}, err
		}
		if b.Type != BlockPruned && (opts.Changes || b.Implicit || len(opts.Paths) > 0 || (b.Type == BlockStep && !all)) {
			cs, err := Changes(src, b, pruned)
			if err != nil {
				return Page{}, err
			}
			if len(opts.Paths) > 0 {
				cs = filterChanges(cs, opts.Paths)
			}
			if len(cs) == 0 && (b.Implicit || len(opts.Paths) > 0 || (b.Type == BlockStep && !all)) {
				continue
			}
			if opts.Changes && cs != nil {
				ent.Changes = cs
			}
		}
		page.Entries = append(page.Entries, ent)
		counted++
		if ent.Turn != 0 {
			want[ent.Turn] = true
		}
	}
	// The turns: those the entries kept belong to, and (unless only some
	// paths' entries, or the failed steps, are asked for) those within the
	// page: below Before
	// and newer than its oldest entry (all of them when nothing older
	// remains).
	oldest := record.Seq(0)
	if page.More && len(page.Entries) > 0 {
		oldest = page.Entries[len(page.Entries)-1].Sequence
	}
	var ts []Entry
	for _, t := range turns {
		within := len(opts.Paths) == 0 && !opts.Failed && t.Seq > oldest && (opts.Before == 0 || t.Seq < opts.Before)
		if !want[t.Seq] && !within {
			continue
		}
		ts = append(ts, Entry{Type: EntryTurn, Sequence: t.Seq, Start: t.Seq, End: t.Seq, Before: t.Seq - 1, Time: t.Time,
			Prompt: t.Prompt, Agent: t.Agent, AgentSession: t.AgentSession, Changes: []Change{}})
	}
	page.Entries = mergeTurns(page.Entries, ts)
	return page, nil
}

// mergeTurns places the turns ts (oldest first) among entries (newest
// first) by sequence.
func mergeTurns(entries, ts []Entry) []Entry {
	if len(ts) == 0 {
		return entries
	}
	out := make([]Entry, 0, len(entries)+len(ts))
	k := len(ts) - 1
	for _, e := range entries {
		for ; k >= 0 && ts[k].Sequence > e.Sequence; k-- {
			out = append(out, ts[k])
		}
		out = append(out, e)
	}
	for ; k >= 0; k-- {
		out = append(out, ts[k])
	}
	return out
}

// touches reports whether b captured a path under one of paths, or
// recorded the rename of a directory one of paths lies under (a rename
// record names no path beneath it).
func touches(b *Block, paths []string) bool {
	for _, f := range b.Files {
		if Under(f.Path, paths) {
			return true
		}
		if f.RenamedTo != "" || f.RenamedFrom != "" {
			for _, p := range paths {
				if Under(p, []string{f.Path}) {
					return true
				}
			}
		}
	}
	return false
}

func filterChanges(cs []Change, paths []string) []Change {
	var out []Change
	for _, c := range cs {
		if Under(c.Path, paths) || (c.From != "" && Under(c.From, paths)) || (c.Change == ChangeRenamed && c.Kind == string(record.KindDir) && beneath(paths, c.Path, c.From)) {
			out = append(out, c)
		}
	}
	return out
}

// Under reports whether p is one of roots or lies under one ("" is the
// workspace root, over everything).
func Under(p string, roots []string) bool {
	for _, r := range roots {
		if r == "" || p == r || strings.HasPrefix(p, r+"/") {
			return true
		}
	}
	return false
}

// StatesThinned reports whether a thin (thinned: Source.Thinned) gave up
// the state before or after the step or rewind b.
func (b *Block) StatesThinned(thinned []record.ThinInterval) bool {
	return b.Type != BlockPruned && (inThinned(thinned, b.Before()) || inThinned(thinned, b.End))
}

// inThinned reports whether the state t is strictly inside one of ivs.
func inThinned(ivs []record.ThinInterval, t record.Seq) bool {
	for _, iv := range ivs {
		if iv.After < t && t < iv.Before {
			return true
		}
	}
	return false
}

// Forgotten reports whether b is a step or rewind that a gc cut
// (prunedBefore: Source.PrunedBefore) forgot whole: neither the state
// before it nor the one after it exists. The log leaves it out, as the
// gc's own entry ("pruned history before N") stands for it; its captured
// paths (an editor's temporary files among them) say nothing any more.
func (b *Block) Forgotten(prunedBefore record.Seq) bool {
	return b.Type != BlockPruned && b.End < prunedBefore
}

// beneath reports whether one of paths lies beneath dir or from (a
// directory's rename moved it).
func beneath(paths []string, dir, from string) bool {
	for _, p := range paths {
		if strings.HasPrefix(p, dir+"/") || strings.HasPrefix(p, from+"/") {
			return true
		}
	}
	return false
}
