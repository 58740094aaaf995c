package history

import (
	"encoding/json"
	"fmt"
	"iter"
	"time"

	"github.com/zerofs/zerofs/internal/quote"
	"github.com/zerofs/zerofs/record"
	"github.com/zerofs/zerofs/rewind"
)

// A Block is what `zerofs log` shows as one entry: a step (from its
// tool_call, or an implicit one for changes made outside any step), a
// rewind (with the checkpoint that saved what it changed), or a gc (a cut
// or a thin).
type Block struct {
	Type string // BlockStep, BlockRewind or BlockPruned
	// Seq is the block's own event (the tool_call, session_rewind or
	// history_pruned); for an implicit step, its first checkpoint.
	Seq record.Seq
	// Start and End bound the sequences that belong to the block. The state
	// at End is the workspace just after it; the state at Start-1, just
	// before it.
	Start, End record.Seq
	// First is the block's first checkpoint (0 when it has none). Nothing
	// changes between Start and First, so the state at First-1 is also the
	// state before the block: the latest sequence that names it, and the
	// one undo rewinds to (it outlives a gc that cut at the tool_call).
	First    record.Seq
	Time     time.Time
	Label    string
	Implicit bool
	// Person: the block is a person's change (an implicit step of its own,
	// from checkpoints marked "person"), which may interleave with an
	// agent's step.
	Person  bool
	Payload json.RawMessage // the tool_call's payload
	Rewind  *record.RewindPayload
	Pruned  *record.PrunedPayload
	// Thinned is a gc's thin (Type BlockPruned too).
	Thinned *record.ThinnedPayload
	// Files are the before-states captured in the block, the first one per
	// path, in capture order.
	Files []record.FileState
	// Turn is the sequence of the turn the block belongs to (the last turn
	// event before it), 0 before the first turn.
	Turn record.Seq
	// Result is what came of a step's tool call (its last tool_result),
	// nil when none was recorded.
	Result *record.ToolResultPayload
	// after is the block's last sequence at which something of its own
	// happened (After).
	after record.Seq
	// Last is set when the block's sequences interleave with another
	// step's (several agent sessions at once: rewind/session.go): for each
	// path, the block's last capture of it. The path's state just after
	// the block is its state at that sequence, not at End.
	Last map[string]record.Seq
}

// A Turn is a person's prompt to an agent (a turn event): the steps after
// it belong to it until the next turn.
type Turn struct {
	Seq  record.Seq
	Time time.Time
	// Prompt is the prompt's text, "" when it was kept out.
	Prompt       string
	Agent        string
	AgentSession string
}

// The block types, as `zerofs log --json` names them.
const (
	BlockStep   = "step"
	BlockRewind = "rewind"
	BlockPruned = "gc"
)

// Changed reports whether the block captured anything: a step whose
// captures all ended as they began still counts, as the log cannot know
// without comparing states (Changes can).
func (b *Block) Changed() bool { return len(b.Files) > 0 }

// Before is the latest sequence whose state is the workspace just before
// the block.
func (b *Block) Before() record.Seq {
	if b.First > 0 {
		return b.First - 1
	}
	return b.Start - 1
}

// After is the earliest sequence whose state is the workspace just after
// the block: End, less the events at its tail that change no file and are
// not the block's doing (a stash_named, which the namer or the next rewind
// writes when it comes to it; a turn; a gc), so that `show` labels a
// step's after-state with the step's own last sequence, not with the
// naming a rewind after it wrote first.
func (b *Block) After() record.Seq {
	if b.after == 0 || b.after > b.End {
		return b.End
	}
	return b.after
}

// Blocks reads the whole history of src into blocks, oldest first, and
// returns the head they end at.
func Blocks(src Source) ([]*Block, record.Seq, error) {
	head, err := src.Head()
	if err != nil {
		return nil, 0, err
	}
	blocks, _, head, err := ReadHistory(src.Events(), head)
	return blocks, head, err
}

// BlocksAndTurns is Blocks with the turns, both oldest first.
func BlocksAndTurns(src Source) ([]*Block, []Turn, error) {
	head, err := src.Head()
	if err != nil {
		return nil, nil, err
	}
	blocks, turns, _, err := ReadHistory(src.Events(), head)
	return blocks, turns, err
}

// ReadHistory groups a log's events into blocks, and returns the turns,
// both oldest first; head is the log's head (a later event raises it).
//
// Which step an event belongs to is the engine's grouping (rewind.StepMarks,
// after SPEC): each block is begun by a mark, and an event belongs to the
// block of the last mark at or before it. A gc is a block of its own but
// no mark. Every block names the turn it belongs to: a step naming an
// agent session, that session's last turn (when it has one); any other
// block, the last turn.
func ReadHistory(events iter.Seq2[record.Event, error], head record.Seq) ([]*Block, []Turn, record.Seq, error) {
	var evs []record.Event
	for ev, err := range events {
		if err != nil {
			return nil, nil, 0, err
		}
		evs = append(evs, ev)
	}
	marks, err := rewind.StepMarks(func(yield func(record.Event, error) bool) {
		for _, ev := range evs {
			if !yield(ev, nil) {
				return
			}
		}
	})
	if err != nil {
		return nil, nil, 0, err
	}
	// The blobs of removed files' stashes, named by later events.
	named := map[string]record.Named{}
	for _, ev := range evs {
		var p record.NamedPayload
		if ev.Type == record.TypeStashNamed && json.Unmarshal(ev.Payload, &p) == nil {
			for _, n := range p.Named {
				named[n.Kept] = n
			}
		}
	}
	var blocks []*Block
	var turns []Turn
	var turn record.Seq                    // the turn new blocks belong to
	var turnSession string                 // its agent session
	sessionTurn := map[string]record.Seq{} // each agent session's latest turn
	begun := map[int]*Block{}              // the block each mark began (-1: before any mark)
	seen := map[*Block]map[string]bool{}
	stepBlock := map[record.Seq]*Block{} // tool_call sequence -> its block
	personBlock := map[int]*Block{}      // the person's changes after each mark
	last := map[*Block]map[string]record.Seq{}
	interleaved := map[*Block]bool{}
	addFiles := func(b *Block, seq record.Seq, files []record.FileState) {
		if last[b] == nil {
			last[b] = map[string]record.Seq{}
		}
		for _, f := range files {
			last[b][f.Path] = seq
		}
		if b.First == 0 {
			b.First = seq
		}
		if seen[b] == nil {
			seen[b] = map[string]bool{}
		}
		for _, f := range files {
			if n, ok := named[f.Kept]; ok && f.Kept != "" && f.Blob == "" && n.Sequence == seq {
				if n.Lost != "" {
					f.Skipped, f.Reason = true, n.Lost
				} else {
					f.Blob, f.Bytes = n.Blob, n.Bytes
				}
			}
			if !seen[b][f.Path] {
				seen[b][f.Path] = true
				b.Files = append(b.Files, f)
			}
		}
	}
	m := -1 // marks[m] is the last mark at or before the event
	for _, ev := range evs {
		for m+1 < len(marks) && marks[m+1].Seq <= ev.Seq {
			m++
		}
		at := m >= 0 && marks[m].Seq == ev.Seq // ev is marks[m]'s own event
		switch ev.Type {
		case record.TypeToolCall:
			if !at {
				continue
			}
			mk := marks[m]
			// A step belongs to its own session's last turn when several
			// agent sessions work in the workspace at once, and a step of
			// a session that began no turn to none, rather than to another
			// session's.
			t := turn
			if mk.Session != "" {
				if st, ok := sessionTurn[mk.Session]; ok {
					t = st
				} else if turnSession != "" && turnSession != mk.Session {
					t = 0
				}
			}
			b := &Block{Type: BlockStep, Seq: ev.Seq, Start: ev.Seq, Time: ev.CreatedAt, Label: mk.Label, Payload: ev.Payload, Turn: t}
			begun[m] = b
			blocks = append(blocks, b)
			stepBlock[ev.Seq] = b
		case record.TypeCheckpoint:
			var p record.Checkpoint
			if json.Unmarshal(ev.Payload, &p) != nil {
				continue
			}
			if p.Person {
				// A person's change: an implicit step of its own, beside
				// the step open then (rewind/session.go).
				b := personBlock[m]
				if b == nil {
					b = &Block{Type: BlockStep, Seq: ev.Seq, Start: ev.Seq, Time: ev.CreatedAt, Implicit: true, Person: true}
					personBlock[m] = b
					blocks = append(blocks, b)
					interleaved[b] = true
					if cur := begun[m]; cur != nil {
						interleaved[cur] = true
					}
				}
				addFiles(b, ev.Seq, p.Files)
				continue
			}
			if sb := stepBlock[p.Step]; p.Step != 0 && sb != nil && sb != begun[m] {
				// A capture of another session's step, made while this
				// one was the newest (rewind/session.go).
				addFiles(sb, ev.Seq, p.Files)
				interleaved[sb] = true
				if cur := begun[m]; cur != nil {
					interleaved[cur] = true
				}
				continue
			}
			b := begun[m]
			if b == nil {
				if m >= 0 && marks[m].Kind == record.MarkRewindCheckpoint {
					b = &Block{Type: BlockRewind, Start: ev.Seq, Turn: turn}
				} else {
					b = &Block{Type: BlockStep, Seq: ev.Seq, Start: ev.Seq, Time: ev.CreatedAt, Label: p.Tool, Implicit: true, Turn: turn}
				}
				begun[m] = b
				blocks = append(blocks, b)
			}
			addFiles(b, ev.Seq, p.Files)
		case record.TypeRewind:
			var p record.RewindPayload
			if !at || json.Unmarshal(ev.Payload, &p) != nil {
				continue
			}
			var b *Block
			if m > 0 && marks[m-1].Kind == record.MarkRewindCheckpoint {
				b = begun[m-1] // its own checkpoint began it
			}
			if b == nil {
				b = &Block{Type: BlockRewind, Start: ev.Seq, Turn: turn}
				blocks = append(blocks, b)
			}
			b.Seq, b.Time, b.Rewind = ev.Seq, ev.CreatedAt, &p
			if whole(p) && p.TargetSequence < b.Turn {
				// It took back the turn it was made in (and any after
				// it): it is none of that turn's work.
				b.Turn = 0
			}
		case record.TypeHistoryPruned:
			var p record.PrunedPayload
			json.Unmarshal(ev.Payload, &p)
			blocks = append(blocks, &Block{Type: BlockPruned, Seq: ev.Seq, Start: ev.Seq, Time: ev.CreatedAt, Pruned: &p})
		case record.TypeHistoryThinned:
			var p record.ThinnedPayload
			json.Unmarshal(ev.Payload, &p)
			blocks = append(blocks, &Block{Type: BlockPruned, Seq: ev.Seq, Start: ev.Seq, Time: ev.CreatedAt, Thinned: &p})
		case record.TypeToolResult:
			var r record.ToolResultPayload
			if json.Unmarshal(ev.Payload, &r) == nil {
				if sb := stepBlock[r.Step]; sb != nil {
					sb.Result = &r
				}
			}
		case record.TypeTurn:
			var p record.TurnPayload
			json.Unmarshal(ev.Payload, &p)
			turns = append(turns, Turn{Seq: ev.Seq, Time: ev.CreatedAt, Prompt: p.Prompt, Agent: p.Agent, AgentSession: p.AgentSession})
			turn, turnSession = ev.Seq, p.AgentSession
			if p.AgentSession != "" {
				sessionTurn[p.AgentSession] = ev.Seq
			}
		}
	}
	if n := len(evs); n > 0 && evs[n-1].Seq > head {
		head = evs[n-1].Seq
	}
	for b := range interleaved {
		b.Last = last[b]
	}
	// Each block ends where the next one that changes the workspace begins.
	end := head
	for i := len(blocks) - 1; i >= 0; i-- {
		b := blocks[i]
		if b.Type == BlockPruned {
			b.End = b.Seq
			continue
		}
		b.End = end
		end = b.Start - 1
	}
	// And its after-state is named by its last event that is its own.
	quiet := map[record.Seq]bool{} // events that change no file: namings, turns, gcs
	for _, ev := range evs {
		if ev.Type == record.TypeStashNamed || ev.Type == record.TypeTurn || ev.Type == record.TypeHistoryPruned || ev.Type == record.TypeHistoryThinned || ev.Type == record.TypeToolResult {
			quiet[ev.Seq] = true
		}
	}
	for _, b := range blocks {
		if b.Type == BlockPruned {
			continue
		}
		b.after = b.End
		for b.after > b.Start && quiet[b.after] {
			b.after--
		}
	}
	return blocks, turns, head, nil
}

// whole reports whether p put the whole workspace back at its target (a
// rewind to a target, an undo, a redo, a turn taken back), rather than
// some paths or one step's changes.
func whole(p record.RewindPayload) bool {
	return len(p.Paths) == 0 && p.RevertOf == 0 && p.Form != record.FormPaths && p.Form != record.FormRevert
}

// Title names what a rewind block did, as the log shows it: `revert of
// step 15 "Bash: rm -rf docs"`, `restore README.md to 0`, `undo of step
// 27 "Edit"`, `redo of turn 24 "Rename hello…"`, `undo of path rewind 31`,
// `turn 24 "Rename hello…" taken back (rewind to 23)`, `rewind to 12`.
// blocks and turns are the log's (for the labels and prompts); steps and
// rewinds are named as Name names them.
func (b *Block) Title(blocks []*Block, turns []Turn) string {
	p := b.Rewind
	if p == nil {
		return "rewind"
	}
	name := func(r *record.StepRef) string {
		if r != nil && r.Kind == "turn" && r.Prompt == "" {
			if t, err := FindTurn(turns, r.Sequence); err == nil {
				c := *r
				c.Prompt = t.Prompt
				r = &c
			}
		}
		return Name(r)
	}
	step := func(s record.Seq) string {
		for i := len(blocks) - 1; i >= 0; i-- {
			o := blocks[i]
			if o.Start <= s && s <= o.End && o.Type != BlockPruned {
				return Name(o.Ref())
			}
		}
		return fmt.Sprintf("step %d", s)
	}
	form := p.Form
	switch form {
	case record.FormRevert:
		if p.Step != nil {
			return "revert of " + name(p.Step)
		}
		return "revert of " + step(p.RevertOf)
	case record.FormPaths:
		return fmt.Sprintf("restore %s to %d", quote.Names(p.Paths, ", "), p.TargetSequence)
	case record.FormUndo, record.FormRedo:
		if r := p.Step; r != nil {
			if r.Kind == "step" && !r.Implicit && r.Label == "" {
				// A log from before implicit steps were marked so: the
				// block holding it says.
				return form + " of " + step(r.Sequence)
			}
			return form + " of " + name(r)
		}
		return fmt.Sprintf("%s (rewind to %d)", form, p.TargetSequence)
	case record.FormTurn:
		if r := p.Step; r != nil {
			return fmt.Sprintf("%s taken back (rewind to %d)", name(r), p.TargetSequence)
		}
		return fmt.Sprintf("a turn taken back (rewind to %d)", p.TargetSequence)
	case record.FormMerge:
		if m := p.Merge; m != nil {
			return MergeTitle(*m)
		}
		return "merge"
	}
	return fmt.Sprintf("rewind to %d", p.TargetSequence)
}

// Ref names the block as a report names what it acted on: a step (by its
// label, or an implicit one), or a rewind (by its form).
func (b *Block) Ref() *record.StepRef {
	if b.Type == BlockRewind {
		form := ""
		if b.Rewind != nil {
			form = b.Rewind.Form
		}
		return &record.StepRef{Kind: "rewind", Sequence: b.Seq, Label: form}
	}
	return &record.StepRef{Kind: "step", Sequence: b.Seq, Label: b.Label, Implicit: b.Implicit}
}
