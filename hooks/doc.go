// Package hooks knows the coding agents zerofs records: what each one's
// hooks send (Parse turns Claude Code's and Codex's PreToolUse and
// UserPromptSubmit, Gemini CLI's BeforeTool and BeforeAgent, Cursor's
// beforeShellExecution and beforeSubmitPrompt, Windsurf's pre_run_command,
// pre_write_code and pre_user_prompt, and what the OpenCode plugin sends,
// into one Call), how a tool call is labelled for a person (Label: "Edit
// app.py", "Bash: rm -rf docs", "apply_patch: src/a.go, src/b.go"), and
// where and how each agent keeps its hook configuration (Agents, and
// Install, which merges zerofs's hooks into it idempotently and says what
// it changed).
//
// A hook's JSON is untrusted input from another program: Parse never fails
// on a field it does not know, and a label is always one bounded line.
//
// Durability: Install writes each configuration file whole, through a
// temporary file renamed over it, so an agent never reads half of one.
//
// Imports: the standard library only.
package hooks
