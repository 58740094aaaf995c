package main

import (
	"encoding/json"
	"time"

	"github.com/zerofs/zerofs/eventlog"
	"github.com/zerofs/zerofs/rewind"
)

// A block is what `zerofs log` shows as one entry: a step (from its
// tool_call, or an implicit one for changes made outside any step), a
// rewind (with the checkpoint that saved what it changed), or a gc.
type block struct {
	Type string // blockStep, blockRewind or blockPruned
	// Seq is the block's own event (the tool_call, session_rewind or
	// history_pruned); for an implicit step, its first checkpoint.
	Seq Seq
	// Start and End bound the sequences that belong to the block. The state
	// at End is the workspace just after it; the state at Start-1, just
	// before it.
	Start, End Seq
	Time       time.Time
	Label      string
	Implicit   bool
	Payload    json.RawMessage // the tool_call's payload
	Rewind     *rewind.RewindPayload
	Pruned     *rewind.PrunedPayload
	// Files are the before-states captured in the block, the first one per
	// path, in capture order.
	Files []rewind.FileState
}

const (
	blockStep   = "step"
	blockRewind = "rewind"
	blockPruned = "gc"
)

// readBlocks reads the whole log of h into blocks, oldest first.
//
// Which step a checkpoint belongs to follows SPEC: a tool_call begins a
// step; a rewind ends it, so checkpoints after a rewind and before the next
// tool_call form an implicit step; the checkpoint a rewind writes for
// itself (from its checkpointSequence up to the rewind event) belongs to
// the rewind. A gc changes no file and ends no step.
func readBlocks(h history) ([]*block, Seq, error) {
	var evs []eventlog.Event
	for ev, err := range h.Events() {
		if err != nil {
			return nil, 0, err
		}
		evs = append(evs, ev)
	}
	// The rewinds' own checkpoints, known only from the later rewind event.
	ownedBy := map[Seq]int{} // checkpoint sequence -> index in evs of its rewind
	for i, ev := range evs {
		if ev.Type != eventlog.TypeRewind {
			continue
		}
		var p rewind.RewindPayload
		if json.Unmarshal(ev.Payload, &p) == nil && p.CheckpointSequence > 0 {
			for s := p.CheckpointSequence; s < ev.Seq; s++ {
				ownedBy[s] = i
			}
		}
	}
	var blocks []*block
	var cur *block              // the step new checkpoints belong to
	pending := map[int]*block{} // rewinds whose checkpoint came before them
	seen := map[*block]map[string]bool{}
	addFiles := func(b *block, files []rewind.FileState) {
		if seen[b] == nil {
			seen[b] = map[string]bool{}
		}
		for _, f := range files {
			if !seen[b][f.Path] {
				seen[b][f.Path] = true
				b.Files = append(b.Files, f)
			}
		}
	}
	for i, ev := range evs {
		switch ev.Type {
		case eventlog.TypeToolCall:
			var p struct {
				Name string `json:"name"`
			}
			json.Unmarshal(ev.Payload, &p)
			cur = &block{Type: blockStep, Seq: ev.Seq, Start: ev.Seq, Time: ev.CreatedAt, Label: p.Name, Payload: ev.Payload}
			blocks = append(blocks, cur)
		case eventlog.TypeCheckpoint:
			var p rewind.Checkpoint
			if json.Unmarshal(ev.Payload, &p) != nil {
				continue
			}
			if ri, ok := ownedBy[ev.Seq]; ok {
				b := pending[ri]
				if b == nil {
					b = &block{Type: blockRewind, Start: ev.Seq}
					pending[ri] = b
					blocks = append(blocks, b)
				}
				addFiles(b, p.Files)
				continue
			}
			if cur == nil {
				cur = &block{Type: blockStep, Seq: ev.Seq, Start: ev.Seq, Time: ev.CreatedAt, Label: p.Tool, Implicit: true}
				blocks = append(blocks, cur)
			}
			addFiles(cur, p.Files)
		case eventlog.TypeRewind:
			var p rewind.RewindPayload
			if json.Unmarshal(ev.Payload, &p) != nil {
				continue
			}
			b := pending[i]
			if b == nil {
				b = &block{Type: blockRewind, Start: ev.Seq}
				blocks = append(blocks, b)
			}
			b.Seq, b.Time, b.Rewind = ev.Seq, ev.CreatedAt, &p
			cur = nil
		case eventlog.TypeHistoryPruned:
			var p rewind.PrunedPayload
			json.Unmarshal(ev.Payload, &p)
			blocks = append(blocks, &block{Type: blockPruned, Seq: ev.Seq, Start: ev.Seq, Time: ev.CreatedAt, Pruned: &p})
		}
	}
	head, err := h.Head()
	if err != nil {
		return nil, 0, err
	}
	if n := len(evs); n > 0 && evs[n-1].Seq > head {
		head = evs[n-1].Seq
	}
	// Each block ends where the next one that changes the workspace begins.
	end := head
	for i := len(blocks) - 1; i >= 0; i-- {
		b := blocks[i]
		if b.Type == blockPruned {
			b.End = b.Seq
			continue
		}
		b.End = end
		end = b.Start - 1
	}
	return blocks, head, nil
}

// changes reports whether a block changed anything: a step whose captures
// all ended as they began still counts, as the log cannot know without
// comparing states.
func (b *block) changes() bool {
	return len(b.Files) > 0
}
