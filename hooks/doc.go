// Package hooks knows the coding agents zerofs records: what each one's
// hooks send (Parse turns Claude Code's and Codex's PreToolUse and
// UserPromptSubmit, Gemini CLI's BeforeTool and BeforeAgent, Cursor's
// beforeShellExecution and beforeSubmitPrompt, Windsurf's pre_run_command,
// pre_write_code and pre_user_prompt, and what the OpenCode plugin sends,
// into one Call), how a tool call is labelled for a person (Label: "Edit
// app.py", "Bash: rm -rf docs", "apply_patch: src/a.go, src/b.go"), and
// where and how each agent keeps its hook configuration (Agents, and
// Install, which merges zerofs's hooks into it idempotently and says what
// it changed; PlanUninstall, which takes them out again and leaves a
// file as the person had it), what Claude Code's worktree hooks ask
// (ParseWorktree: WorktreeCreate's name, WorktreeRemove's path) and where
// a worktree's branch goes (WorktreeDirs), and what an agent still needs
// before its hooks run (Needs:
// Codex's project trust and hook review, read from its config.toml;
// Gemini CLI's folder trust, from its trustedFolders.json). OpenCode's
// project install writes only the project's opencode.json, naming a plugin
// file kept outside the project (opencode.go says why).
//
// An agent's own files (Codex's config.toml, Gemini CLI's trusted folders)
// are untrusted input too: read bounded, as far as they make sense, and a
// file that cannot be read is said so rather than guessed about.
//
// A hook's JSON is untrusted input from another program: Parse never fails
// on a field it does not know, and a label is always one bounded line.
//
// Durability: Install writes each configuration file whole, through a
// temporary file renamed over it, so an agent never reads half of one.
//
// Imports: the standard library only.
package hooks
