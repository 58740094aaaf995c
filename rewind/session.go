package rewind

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/zerofs/zerofs/record"
)

// Several agent sessions may work in one workspace at once: two agents in
// two terminals, or an agent and a subagent that runs as a process of its
// own. Each has a step open, and a change belongs to the step of the
// session whose agent process made it.
//
// An agent runs its hooks and its tools as its children (or its shells'
// children). So a step begun by a hook (a tool_call naming an
// "agentSession") is remembered with its agent process: the nearest
// ancestor of the process that wrote the step that is not a shell or
// zerofs itself. A change is put in the step of the session whose agent
// process is the nearest ancestor of the process that made it; when no
// session's agent is an ancestor (a person's editor, a step begun by hand),
// in the newest step, as before. Two sessions of one agent process: the
// newer one's.
//
// Once an agent session is known (a hook named it and its agent process
// was found), a change by a process whose ancestors include no known
// agent process (a person's editor, a shell in another terminal) is the
// person's (SPEC, Whose change it is): its checkpoint is marked "person"
// and belongs to no step, so undo, undo of a turn and revert leave it
// alone (person.go). The agents stay known across rewinds and idle gaps,
// which end their steps, not their processes. A step a person began
// (Step.ByHand: `zerofs step`, `zerofs run`, an auto step, from outside
// the agents' trees) is the person's own: while it is the newest, changes
// from outside the agents' trees belong to it, and undo takes them back.
//
// The log keeps sequence order: a checkpoint of a step that is not the
// newest names it (Checkpoint.Step), and readers (history.ReadHistory,
// the index's marks, a revert) give its files to that step.
//
// Limits: parallel tool calls of one session, and subagents that run
// inside the agent's own process (Claude Code's Task tool), share that
// process: their changes go to the session's newest step. A process that
// outlived its parent (reparented to init) no longer has the agent among
// its ancestors. Undo goes back in time for the whole workspace; revert
// takes back one step, whatever ran beside it.

// Proc identifies a process: its id and its start time (in clock ticks
// after boot, /proc/PID/stat's field 22), so a reused id is never taken
// for the process that had it; Comm is its name then.
type Proc struct {
	PID   int
	Start uint64
	Comm  string
}

// sessionStep is the step (or turn) an agent session began last, and the
// agent's process.
type sessionStep struct {
	step    Step
	session string
	agent   Proc
	// turn: the step is the changes after a turn, before the session's
	// first tool call. Its changes are only told apart while it is the
	// newest step; after another's step began they go to the newest.
	turn bool
}

// maxSessions bounds the sessions remembered (the oldest is dropped), and
// the agent processes.
const maxSessions = 64

// BeginStepAs is BeginStep for a step begun by who's process: changes made
// by processes of the same agent (those whose lineage meets who's nearest)
// belong to it even after another session began a step.
func (e *Engine) BeginStepAs(ctx context.Context, who Caller, label string, extra json.RawMessage) (record.Event, error) {
	payload := map[string]any{}
	if len(extra) > 0 {
		if err := json.Unmarshal(extra, &payload); err != nil {
			return record.Event{}, fmt.Errorf("rewind: step payload is not a JSON object: %w", err)
		}
	}
	payload["name"] = label
	session, _ := payload["agentSession"].(string)
	agent, ok := agentOf(who, session)
	e.capMu.Lock()
	agents := e.agents
	e.capMu.Unlock()
	byHand := session == "" && !inTree(who, agents)
	// What the step's Sync must make durable (the last window: an rm -rf's
	// stashes, say) is made so before the step takes the workspace lock,
	// so that no change by another process waits for it; under the lock,
	// the Sync covers only what was appended meanwhile (preSync).
	if err := e.preSync(); err != nil {
		return record.Event{}, err
	}
	e.wsMu.Lock()
	e.capMu.Lock()
	ev, err := e.beginStepLocked(ctx, label, payload)
	if err == nil {
		e.step.ByHand = byHand
		e.registerLocked(session, sessionStep{step: e.step, session: session, agent: agent}, ok)
		e.results.note(payload, ev.Seq)
	}
	e.capMu.Unlock()
	if err == nil {
		err = e.captureOpenWriters(ctx)
	}
	e.wsMu.Unlock()
	if err == nil && e.opts.MaxStoreSize > 0 {
		e.pruner.wake() // prunes after the step returns (bound.go)
	}
	return ev, err
}

// registerLocked ends session's open step and, when ok, makes s its open
// step; the caller holds capMu. The slice is replaced, never changed in
// place, so stepFor can read it after letting go of the lock.
func (e *Engine) registerLocked(session string, s sessionStep, ok bool) {
	if session == "" {
		return
	}
	out := make([]sessionStep, 0, len(e.sessions)+1)
	for _, o := range e.sessions {
		if o.session != session {
			out = append(out, o)
		}
	}
	if ok {
		out = append(out, s)
		if !slices.ContainsFunc(e.agents, s.agent.same) {
			agents := append(slices.Clone(e.agents), s.agent)
			if len(agents) > maxSessions {
				agents = agents[len(agents)-maxSessions:]
			}
			e.agents = agents
		}
	}
	if len(out) > maxSessions {
		out = out[len(out)-maxSessions:]
	}
	e.sessions = out
}

// same reports whether p and q are one process (its id at one start).
func (p Proc) same(q Proc) bool { return p.PID == q.PID && p.Start == q.Start }

// stepFor is the step a change by who belongs to: the open step of the
// session whose agent is who's nearest ancestor, else the newest step.
// person is true when agents are known and none is who's ancestor: the
// change is the person's, and step is the newest one only to key its
// capture. who's lineage is read only when an agent is known (Caller.Tree,
// kept per process by the caller, when there is one).
func (e *Engine) stepFor(who Caller) (step Step, person bool) {
	e.capMu.Lock()
	cur, open, agents := e.step, e.sessions, e.agents
	e.capMu.Unlock()
	if len(agents) == 0 || (who.Lineage == nil && who.Tree == nil) {
		return cur, false
	}
	var lin []Proc
	if who.Tree != nil {
		lin = who.Tree()
	} else {
		lin = who.Lineage()
	}
	if len(lin) == 0 {
		return cur, false // gone before it could be told: as before
	}
	if !descends(lin, agents) {
		// A person's change, unless a person began the newest step.
		return cur, !cur.ByHand
	}
	if len(open) == 0 || (len(open) == 1 && open[0].step.Seq == cur.Seq) {
		return cur, false
	}
	best, bestAt := -1, len(lin)
	for i, s := range open {
		for at, p := range lin[:min(len(lin), bestAt+1)] {
			if p.PID == s.agent.PID && p.Start == s.agent.Start {
				if at <= bestAt { // a newer session of the same agent wins
					best, bestAt = i, at
				}
				break
			}
		}
	}
	if best < 0 || (open[best].turn && open[best].step.Seq != cur.Seq) {
		return cur, false
	}
	return open[best].step, false
}

// descends reports whether lineage lin holds one of agents.
func descends(lin, agents []Proc) bool {
	return slices.ContainsFunc(lin, func(p Proc) bool { return slices.ContainsFunc(agents, p.same) })
}

// inTree reports whether who is a process of one of agents (false when
// who's lineage is unknown).
func inTree(who Caller, agents []Proc) bool {
	if len(agents) == 0 || who.Lineage == nil {
		return false
	}
	return descends(who.Lineage(), agents)
}

// agentOf is the agent process of a step or turn that who began for an
// agent session: the nearest of who's process and its ancestors that is
// not a shell or zerofs (the hook command, and the shell that ran it). ok
// is false for no session, or when who's lineage is unknown or has no such
// process below init.
func agentOf(who Caller, session string) (Proc, bool) {
	if session == "" || who.Lineage == nil {
		return Proc{}, false
	}
	for _, p := range who.Lineage() {
		if p.PID <= 1 {
			break
		}
		if !notAgent[p.Comm] {
			return p, true
		}
	}
	return Proc{}, false
}

// notAgent names the processes between an agent and its hook command.
var notAgent = map[string]bool{
	"zerofs": true, "sh": true, "bash": true, "dash": true, "zsh": true, "fish": true,
	"ksh": true, "mksh": true, "busybox": true, "env": true,
}
