package hooks

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// Kind is what a hook call announces.
type Kind int

const (
	// KindTool: the agent is about to run a tool (a step begins).
	KindTool Kind = iota + 1
	// KindPrompt: a person sent the agent a prompt (a turn begins).
	KindPrompt
	// KindOther: an event zerofs records nothing for.
	KindOther
	// KindResult: a tool call finished (its step's tool_result).
	KindResult
)

// A Call is one hook invocation, whichever agent sent it.
type Call struct {
	Kind Kind
	// Agent is the agent's name as Agents lists it ("" when the payload
	// does not say and no hint was given).
	Agent string
	// Event is the agent's own name for the hook event.
	Event string
	// Session identifies the agent's conversation (Claude Code's
	// session_id, Cursor's conversation_id, Windsurf's trajectory_id).
	Session string
	// Cwd is the directory the agent works in, when it says.
	Cwd string
	// Tool is the tool's name, in the agent's own words ("Edit", "Bash",
	// "apply_patch", "run_shell_command"); Input is its arguments.
	Tool  string
	Input json.RawMessage
	// ToolUseID identifies the tool call, when the agent gives one.
	ToolUseID string
	// Prompt is the person's prompt (KindPrompt).
	Prompt string
	// Result is what came of the tool call (KindResult).
	Result *Result
}

// The fields of every agent's payload that zerofs reads. Claude Code, Codex
// and Gemini CLI share their names; Cursor and Windsurf have their own.
type rawPayload struct {
	Agent         string          `json:"agent"` // the OpenCode plugin's
	Argv          []string        `json:"argv"`  // the OpenCode plugin's: OpenCode's arguments
	SessionID     string          `json:"session_id"`
	HookEventName string          `json:"hook_event_name"`
	ToolName      string          `json:"tool_name"`
	ToolInput     json.RawMessage `json:"tool_input"`
	ToolUseID     string          `json:"tool_use_id"`
	Cwd           string          `json:"cwd"`
	Prompt        string          `json:"prompt"`
	TurnID        string          `json:"turn_id"`
	Model         string          `json:"model"`
	// After a tool call (result.go).
	ToolResponse json.RawMessage `json:"tool_response"`
	Error        json.RawMessage `json:"error"`
	DurationMs   *float64        `json:"duration_ms"`
	Duration     *float64        `json:"duration"` // Cursor's
	// Cursor.
	ConversationID string   `json:"conversation_id"`
	WorkspaceRoots []string `json:"workspace_roots"`
	Command        string   `json:"command"`
	// Windsurf.
	AgentActionName string `json:"agent_action_name"`
	TrajectoryID    string `json:"trajectory_id"`
	ToolInfo        struct {
		CommandLine string          `json:"command_line"`
		Cwd         string          `json:"cwd"`
		FilePath    string          `json:"file_path"`
		Edits       json.RawMessage `json:"edits"`
		UserPrompt  string          `json:"user_prompt"`
		MCPServer   string          `json:"mcp_server_name"`
		MCPTool     string          `json:"mcp_tool_name"`
		MCPArgs     json.RawMessage `json:"mcp_tool_arguments"`
	} `json:"tool_info"`
}

// Parse reads one hook's JSON. agent, when not "", names the agent that
// sent it (the installed hook command says so); otherwise the payload's
// shape tells. An event zerofs does not record is KindOther, not an error;
// so is a field of another type than zerofs expects (it is left out, the
// rest is read), since agents add and change fields between versions.
func Parse(raw []byte, agent string) (Call, error) {
	var p rawPayload
	var typeErr *json.UnmarshalTypeError
	if err := json.Unmarshal(raw, &p); err != nil && (!errors.As(err, &typeErr) || typeErr.Field == "") {
		// A syntax error, or JSON that is not an object at all.
		return Call{}, fmt.Errorf("hooks: not a hook's JSON object: %w", err)
	}
	if agent == "" {
		agent = detect(&p)
	}
	c := Call{Agent: agent, Kind: KindOther}
	switch {
	case p.AgentActionName != "":
		parseWindsurf(&c, &p)
	case p.ConversationID != "" || len(p.WorkspaceRoots) > 0 || agent == "cursor":
		parseCursor(&c, &p)
	default:
		parseClaudeLike(&c, &p)
	}
	return c, nil
}

// detect names the agent from the payload's shape.
func detect(p *rawPayload) string {
	switch {
	case p.Agent != "":
		return p.Agent
	case p.AgentActionName != "":
		return "windsurf"
	case p.ConversationID != "" || len(p.WorkspaceRoots) > 0:
		return "cursor"
	case p.HookEventName == "BeforeTool" || p.HookEventName == "BeforeAgent" || p.HookEventName == "AfterTool":
		return "gemini"
	case p.TurnID != "" || p.Model != "":
		return "codex"
	case p.HookEventName == "PreToolUse" || p.HookEventName == "UserPromptSubmit" ||
		p.HookEventName == "PostToolUse" || p.HookEventName == "PostToolUseFailure":
		return "claude"
	}
	return ""
}

// parseClaudeLike reads Claude Code's, Codex's, Gemini CLI's and the
// OpenCode plugin's payloads, which share their field names.
func parseClaudeLike(c *Call, p *rawPayload) {
	c.Event, c.Session, c.Cwd = p.HookEventName, p.SessionID, p.Cwd
	switch p.HookEventName {
	case "UserPromptSubmit", "BeforeAgent", "chat.message":
		if c.Agent == "claude" && strings.HasPrefix(p.Prompt, "<task-notification>") {
			// Claude Code tells itself that a background agent finished
			// with a prompt of its own, through the same hook: no person
			// wrote it, so it begins no turn.
			return
		}
		c.Kind, c.Prompt = KindPrompt, p.Prompt
		if p.HookEventName == "chat.message" {
			c.Prompt = unquoteRunPrompt(p.Prompt, p.Argv)
		}
		return
	case "PostToolUse", "PostToolUseFailure", "AfterTool", "tool.execute.after":
		c.Kind, c.Tool, c.Input, c.ToolUseID = KindResult, p.ToolName, p.ToolInput, p.ToolUseID
		c.Result = claudeLikeResult(c.Agent, p)
		return
	}
	if p.ToolName == "" {
		return
	}
	c.Kind, c.Tool, c.Input, c.ToolUseID = KindTool, p.ToolName, p.ToolInput, p.ToolUseID
}

// parseCursor reads Cursor's payloads: the shell command is a field of its
// own, and the working directory is cwd or, when cwd is "" (as Cursor
// sends it for many commands), the first workspace root.
func parseCursor(c *Call, p *rawPayload) {
	c.Event, c.Session, c.Cwd = p.HookEventName, p.ConversationID, p.Cwd
	if c.Cwd == "" && len(p.WorkspaceRoots) > 0 {
		c.Cwd = p.WorkspaceRoots[0]
	}
	switch p.HookEventName {
	case "beforeSubmitPrompt":
		c.Kind, c.Prompt = KindPrompt, p.Prompt
	case "beforeShellExecution":
		c.Kind, c.Tool = KindTool, "Shell"
		c.Input, _ = json.Marshal(map[string]string{"command": p.Command, "cwd": c.Cwd})
	case "afterShellExecution":
		c.Kind, c.Tool, c.Result = KindResult, "Shell", cursorResult(p)
	case "preToolUse":
		if p.ToolName != "" {
			c.Kind, c.Tool, c.Input, c.ToolUseID = KindTool, p.ToolName, p.ToolInput, p.ToolUseID
		}
	}
}

// parseWindsurf reads Windsurf Cascade's payloads: everything about the
// action is in tool_info, and the event names the tool. Only
// pre_run_command says where the agent works (tool_info.cwd). Its
// execution_id names no tool call: the captured prompt and the tool calls
// minutes after it carry the same one.
func parseWindsurf(c *Call, p *rawPayload) {
	c.Event, c.Session = p.AgentActionName, p.TrajectoryID
	ti := &p.ToolInfo
	c.Cwd = ti.Cwd
	if post, ok := strings.CutPrefix(p.AgentActionName, "post_"); ok && (post == "run_command" || post == "write_code") {
		// What came of a command or a write: the same tool_info as
		// before it, and nothing of how it went.
		p.AgentActionName = "pre_" + post
		defer func() { c.Event, c.Kind, c.Result = "post_"+post, KindResult, &Result{} }()
	}
	switch p.AgentActionName {
	case "pre_user_prompt":
		c.Kind, c.Prompt = KindPrompt, ti.UserPrompt
	case "pre_run_command":
		c.Kind, c.Tool = KindTool, "run_command"
		c.Input, _ = json.Marshal(map[string]string{"command": ti.CommandLine, "cwd": ti.Cwd})
	case "pre_write_code":
		c.Kind, c.Tool = KindTool, "write_code"
		in := map[string]any{"file_path": ti.FilePath}
		if len(ti.Edits) > 0 && json.Valid(ti.Edits) {
			in["edits"] = ti.Edits
		}
		c.Input, _ = json.Marshal(in)
	case "pre_mcp_tool_use":
		c.Kind, c.Tool = KindTool, "mcp: "+strings.TrimSpace(ti.MCPServer+" "+ti.MCPTool)
		if len(ti.MCPArgs) > 0 && json.Valid(ti.MCPArgs) {
			c.Input = ti.MCPArgs
		}
	}
}
