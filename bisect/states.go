package bisect

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/zerofs/zerofs/history"
	"github.com/zerofs/zerofs/record"
)

// Seq is an event sequence.
type Seq = record.Seq

// A Candidate is a step (or a turn) that may be the first bad one: the
// changes between the states Before and After.
type Candidate struct {
	// Seq is its own event: the step's tool_call (an implicit step's first
	// checkpoint, a rewind's session_rewind), or the turn.
	Seq Seq `json:"sequence"`
	// Kind is "step", "rewind" or "turn".
	Kind  string `json:"kind"`
	Label string `json:"label"`
	// Turn is the turn a step belongs to (0: none).
	Turn Seq `json:"turn,omitempty"`
	// Before and After are the states just before and just after it.
	Before Seq `json:"before"`
	After  Seq `json:"after"`
	// Result is the step's recorded result, when it has one.
	Result *record.ToolResultPayload `json:"result,omitempty"`
	// block is the step's block (nil for a turn).
	block *history.Block
}

// Block is the candidate's history block (nil for a turn), for the caller
// to list its changes (history.Changes).
func (c Candidate) Block() *history.Block { return c.block }

// plan is the states a search goes over and what changed between them.
type plan struct {
	// states[0] is the oldest (or --good) state; states[i] (i > 0) the
	// state just after cands[i-1].
	states []Seq
	cands  []Candidate
	// hint is the index of the newest state a recorded ok result of the
	// same command vouches for (0: none).
	hint int
	// captures are the sequences of the checkpoints and the paths each
	// captured, oldest first (what differs between two states); renames
	// marks the checkpoints holding a directory's rename record.
	captures []capture
	pruned   Seq
	head     Seq
}

type capture struct {
	seq    Seq
	paths  []string
	rename bool
}

// makePlan reads src's history into the states to search: one after each
// step (or, with turns, each turn) that changed something between good and
// bad (0: the oldest state kept, the head).
func makePlan(src history.Source, turns bool, good, bad Seq, argv []string) (*plan, error) {
	head, err := src.Head()
	if err != nil {
		return nil, err
	}
	pruned, err := src.PrunedBefore()
	if err != nil {
		return nil, err
	}
	p := &plan{pruned: pruned, head: head}
	blocks, turnList, err := history.BlocksAndTurns(src)
	if err != nil {
		return nil, err
	}
	for ev, err := range src.Events() {
		if err != nil {
			return nil, err
		}
		if ev.Type != record.TypeCheckpoint {
			continue
		}
		var cp record.Checkpoint
		if json.Unmarshal(ev.Payload, &cp) != nil {
			continue
		}
		c := capture{seq: ev.Seq}
		for _, f := range cp.Files {
			c.paths = append(c.paths, f.Path)
			if f.RenamedTo != "" || f.RenamedFrom != "" {
				c.rename = true
			}
		}
		p.captures = append(p.captures, c)
	}
	if bad == 0 {
		bad = head
	}
	if good == 0 {
		good = pruned
	}
	switch {
	case bad > head:
		return nil, fmt.Errorf("%w: --bad %d is above head %d", record.ErrNoSuchSeq, bad, head)
	case good < pruned:
		return nil, fmt.Errorf("%w: --good %d is below the history kept (it begins at %d)", record.ErrNoSuchSeq, good, pruned)
	case good >= bad:
		return nil, fmt.Errorf("bisect: the good state %d is not older than the bad state %d", good, bad)
	}
	thinned, err := src.Thinned()
	if err != nil {
		return nil, err
	}
	var all []Candidate
	if turns {
		all = turnCandidates(turnList, head, pruned)
	} else {
		for _, b := range blocks {
			if b.Type == history.BlockPruned || b.Forgotten(pruned) {
				continue
			}
			c := Candidate{Seq: b.Seq, Kind: b.Type, Label: b.Label, Turn: b.Turn, Before: b.Start - 1, After: b.End, Result: b.Result, block: b}
			switch {
			case b.Type == history.BlockRewind:
				c.Label = b.Title(blocks, turnList)
			case b.Person:
				c.Label = "(a person)"
			case b.Implicit:
				c.Label = "(no step)"
			}
			all = append(all, c)
		}
		for i := range all {
			// A thin keeps the state at each day's first tool_call, which
			// is the state just after the step before it: probe that one.
			if n := i + 1; n < len(all) && gone(thinned, all[i].After) && all[n].Before == all[i].After &&
				all[n].block.Type == history.BlockStep && !all[n].block.Implicit && !all[n].block.Person {
				all[i].After++
			}
		}
	}
	p.states = []Seq{good}
	for _, c := range all {
		if c.After <= good {
			continue
		}
		if c.After > bad {
			c.After = bad
		}
		if !p.changed(p.states[len(p.states)-1], c.After) {
			continue // nothing changed: the same state as the one before
		}
		p.states = append(p.states, c.After)
		p.cands = append(p.cands, c)
		if c.After == bad {
			break
		}
	}
	if last := p.states[len(p.states)-1]; last != bad {
		if p.changed(last, bad) || len(p.cands) == 0 {
			// Changes after the last candidate, outside every block.
			p.states = append(p.states, bad)
			p.cands = append(p.cands, Candidate{Seq: last + 1, Kind: "step", Label: "(no step)", Before: last, After: bad})
		} else {
			// Nothing changed since: the bad state is the last one's.
			p.states[len(p.states)-1] = bad
		}
	}
	// The newest step that ran the same command and whose result was ok.
	cmd := strings.Join(argv, " ")
	for _, b := range blocks {
		if b.Type != history.BlockStep || b.Result == nil || b.Result.Status != "ok" || !ranCommand(b, cmd) {
			continue
		}
		for i := len(p.states) - 1; i > 0; i-- {
			if p.states[i] <= b.End {
				p.hint = i
				break
			}
		}
	}
	if p.hint >= len(p.states)-1 {
		p.hint = 0 // it vouches for the bad state: the agent ran it earlier than its last change
	}
	return p, nil
}

// ranCommand reports whether step b ran cmd: its label or its tool input's
// command holds it.
func ranCommand(b *history.Block, cmd string) bool {
	if cmd == "" {
		return false
	}
	if strings.Contains(b.Label, cmd) {
		return true
	}
	var p struct {
		Input struct {
			Command string `json:"command"`
			Cmd     string `json:"cmd"`
		} `json:"input"`
	}
	json.Unmarshal(b.Payload, &p)
	return strings.Contains(p.Input.Command, cmd) || strings.Contains(p.Input.Cmd, cmd)
}

// turnCandidates are the turns as candidates: each from its prompt to the
// next turn (the last to head); the changes before the first turn are one
// of their own.
func turnCandidates(turns []history.Turn, head, pruned Seq) []Candidate {
	var out []Candidate
	if len(turns) == 0 || turns[0].Seq > pruned+1 {
		end := head
		if len(turns) > 0 {
			end = turns[0].Seq - 1
		}
		out = append(out, Candidate{Seq: pruned + 1, Kind: "turn", Label: "(before any turn)", Before: pruned, After: end})
	}
	for i, t := range turns {
		end := head
		if i+1 < len(turns) {
			end = turns[i+1].Seq - 1
		}
		label := "(prompt kept out)"
		if t.Prompt != "" {
			label = history.CutLine(t.Prompt, 72)
		}
		if t.Agent != "" {
			label += " (" + t.Agent + ")"
		}
		out = append(out, Candidate{Seq: t.Seq, Kind: "turn", Label: label, Turn: t.Seq, Before: t.Seq - 1, After: end})
	}
	return out
}

// changed reports whether a checkpoint lies between the states a and b.
func (p *plan) changed(a, b Seq) bool {
	for _, c := range p.between(a, b) {
		if len(c.paths) > 0 {
			return true
		}
	}
	return false
}

// between is the checkpoints with sequence in (min(a,b), max(a,b)]: what
// was captured between the two states.
func (p *plan) between(a, b Seq) []capture {
	if a > b {
		a, b = b, a
	}
	lo := searchCaptures(p.captures, a+1)
	hi := searchCaptures(p.captures, b+1)
	return p.captures[lo:hi]
}

// searchCaptures is the index of the first capture with seq >= s.
func searchCaptures(cs []capture, s Seq) int {
	lo, hi := 0, len(cs)
	for lo < hi {
		m := (lo + hi) / 2
		if cs[m].seq < s {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo
}
