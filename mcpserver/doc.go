// Package mcpserver is `zerofs mcp`: the workspace's history served to an
// agent over the Model Context Protocol. New makes the server; its tools
// (zerofs_status, zerofs_log, zerofs_diff, zerofs_show, zerofs_step,
// zerofs_rewind, zerofs_undo, zerofs_redo, zerofs_revert, zerofs_merge,
// zerofs_branch, zerofs_bisect) each take
// arguments that are values, never flags, and return structured content
// that matches their output schema, with a short text for people.
//
// It stands on package history like the CLI and the timeline: each call
// finds the workspace, opens a history.Source for that call only (so a
// server started before `zerofs mount` works once it is mounted) and
// closes it before answering. Everything it shows comes from history (Log,
// Diff, the Source's Stat, List and Content) and every action is one
// Source.Rewind request, whose report (control.RewindReport) names what it
// acted on: the text is history.Describe's, the one wording the CLI prints
// and the timeline shows.
//
// Names that are not UTF-8 travel as the log carries them: a readable form
// and, beside it, the exact bytes in base64 ("..._bytes").
//
// zerofs_branch makes, lists and deletes branches through package branch,
// as the CLI does (a branch is two mounts: package branch runs them).
//
// Nothing here writes to the store or the workspace except through a
// Source or package branch: what is durable when a tool returns is what
// that call made durable (a step or a rewind is durable when the daemon
// answers; a branch's record before it is mounted).
package mcpserver
