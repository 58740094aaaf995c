package record

// Seq is an event's position in the log: 1, 2, 3, ... Seq 0 names the state
// before any event.
type Seq uint64

// Event types zerofs writes (an event's "type"). Readers skip types they
// do not know.
const (
	// TypeToolCall: a step begins.
	TypeToolCall = "tool_call"
	// TypeCheckpoint: before-states captured (Checkpoint).
	TypeCheckpoint = "session_checkpoint"
	// TypeRewind: a rewind finished (RewindPayload).
	TypeRewind = "session_rewind"
	// TypeHistoryPruned: gc cut the history (PrunedPayload).
	TypeHistoryPruned = "history_pruned"
	// TypeHistoryThinned: gc thinned old history to one state a day
	// (ThinnedPayload).
	TypeHistoryThinned = "history_thinned"
	// TypeTurn: a person's prompt to an agent began a turn; the steps after
	// it belong to it until the next turn (TurnPayload).
	TypeTurn = "turn"
	// TypeToolResult: what came of a step's tool call (ToolResultPayload).
	TypeToolResult = "tool_result"
	// TypeStashNamed: the blobs of removed files' stashes, which earlier
	// checkpoints name by their stash (NamedPayload).
	TypeStashNamed = "stash_named"
	// TypeForked: the first event of a fork's store: where its first state
	// came from (ForkPayload).
	TypeForked = "workspace_forked"
)

// ToolCallPayload is the part of a tool_call payload zerofs reads: the
// step's label and the agent session it belongs to. The caller may add
// any JSON of its own beside them.
type ToolCallPayload struct {
	Name         string `json:"name"`
	AgentSession string `json:"agentSession,omitempty"`
}

// TurnPayload is the part of a turn payload zerofs reads: the prompt
// (unless kept out), and the agent and agent session whose turn it is.
type TurnPayload struct {
	Prompt       string `json:"prompt,omitempty"`
	Agent        string `json:"agent,omitempty"`
	AgentSession string `json:"agentSession,omitempty"`
}

// ToolResultPayload is the payload of a tool_result event (SPEC, Events):
// what came of the tool call of the step at Step. Fields the source does
// not know are left out; never the tool's output beyond Summary.
type ToolResultPayload struct {
	Step         Seq    `json:"step"`
	Status       string `json:"status,omitempty"` // "ok" or "error"; left out when the source does not say
	ExitCode     *int   `json:"exitCode,omitempty"`
	DurationMs   *int64 `json:"durationMs,omitempty"`
	Summary      string `json:"summary,omitempty"` // the first line of an error, at most 512 bytes
	Agent        string `json:"agent,omitempty"`
	AgentSession string `json:"agentSession,omitempty"`
	ToolUseID    string `json:"toolUseId,omitempty"`
}

// ForkPayload is the payload of a workspace_forked event.
type ForkPayload struct {
	// Source is the workspace forked from, Sequence the state of it that
	// the fork began as.
	Source   string `json:"source"`
	Sequence Seq    `json:"sequence"`
	// SourceSession is the source log's session id, when known.
	SourceSession string `json:"sourceSession,omitempty"`
}
