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
	Start    record.Seq `json:"start"`
	End      record.Seq `json:"end"`
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
	// Limit, when > 0, keeps only the newest Limit entries.
	Limit int
	// Paths, when not empty, keeps only the entries that changed one of
	// these workspace paths or something under them ("" is the root), and
	// only those changes.
	Paths []string
	// All keeps the steps that changed nothing (an agent's read-only tool
	// calls), which are left out by default.
	All bool
	// Failed keeps only the steps whose recorded result is an error,
	// whether they changed anything or not.
	Failed bool
}

// Log is the history of src as entries, newest first. An implicit step
// whose captures all ended as they began (a read-only tool that opened a
// file for writing) is left out: it changed nothing and belongs to no step.
//
// Turns are entries of their own (type "turn"), placed by sequence, and
// each step names its turn. A step that captured nothing, or whose
// captures all ended as they began (when changes are computed), is left
// out unless opts.All.
func Log(src Source, opts LogOptions) ([]Entry, error) {
	blocks, turns, err := BlocksAndTurns(src)
	if err != nil {
		return nil, err
	}
	pruned, err := src.PrunedBefore()
	if err != nil {
		return nil, err
	}
	thinned, err := src.Thinned()
	if err != nil {
		return nil, err
	}
	entries := []Entry{}
	ti := len(turns) - 1
	// addTurns adds the turns after seq (newest first), unless only the
	// entries for some paths are asked for.
	addTurns := func(seq record.Seq) {
		for ; ti >= 0 && turns[ti].Seq > seq; ti-- {
			if len(opts.Paths) > 0 || (opts.Limit > 0 && len(entries) >= opts.Limit) {
				continue
			}
			t := turns[ti]
			entries = append(entries, Entry{Type: EntryTurn, Sequence: t.Seq, Start: t.Seq, End: t.Seq, Time: t.Time,
				Prompt: t.Prompt, Agent: t.Agent, AgentSession: t.AgentSession, Changes: []Change{}})
		}
	}
	for i := len(blocks) - 1; i >= 0; i-- {
		if !opts.Failed {
			addTurns(blocks[i].Seq)
		}
		if opts.Limit > 0 && len(entries) >= opts.Limit {
			break
		}
		b := blocks[i]
		if b.Forgotten(pruned) {
			continue // the gc's entry stands for it
		}
		if opts.Failed && (b.Result == nil || b.Result.Status != "error") {
			continue
		}
		ent := Entry{Type: b.Type, Sequence: b.Seq, Start: b.Start, End: b.End, Time: b.Time,
			Label: b.Label, Implicit: b.Implicit, Person: b.Person, Payload: b.Payload, Rewind: b.Rewind, Turn: b.Turn,
			Result: b.Result, Changes: []Change{}}
		if b.Pruned != nil {
			ent.PrunedBefore = &b.Pruned.Before
		}
		if b.Type == BlockRewind {
			ent.Title = b.Title(blocks)
		}
		ent.Thinned = b.Thinned
		ent.StatesThinned = b.StatesThinned(thinned)
		if ent.Ignores, err = ignoresAfter(src, b); err != nil {
			return nil, err
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
		if b.Type != BlockPruned && (opts.Changes || b.Implicit || len(opts.Paths) > 0 || (b.Type == BlockStep && !all)) {
			cs, err := Changes(src, b, pruned)
			if err != nil {
				return nil, err
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
		entries = append(entries, ent)
	}
	if !opts.Failed {
		addTurns(0)
	}
	return entries, nil
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
