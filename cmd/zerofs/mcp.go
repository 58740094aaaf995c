package main

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/zerofs/zerofs/history"
)

var mcpCmd = &command{
	name:    "mcp",
	usage:   "mcp [--workspace DIR]",
	summary: "serve this workspace's history to an agent over the Model Context Protocol (stdio)",
	help: `Serves the tools zerofs_log, zerofs_diff, zerofs_show, zerofs_step,
zerofs_rewind, zerofs_undo, zerofs_redo and zerofs_revert over stdin and
stdout. Each runs the command of the same name, in this process, on the
workspace around the current directory (or --workspace DIR), and returns
what it prints; a failure comes back as a tool error carrying the command's
one-line reason, never as an end of the server.

  --workspace DIR   the workspace (default: found from the current directory)
`,
	run: runMCP,
}

func runMCP(e *env, c *command, args []string) error {
	fl := newFlags(c)
	dir := fl.String("workspace", "", "")
	pos, rest, err := parseArgs(c, fl, args)
	if err != nil {
		return err
	}
	if len(pos)+len(rest) != 0 {
		return usagef(c, "unexpected arguments %q", append(pos, rest...))
	}
	cwd := e.cwd
	if *dir != "" {
		cwd = *dir
		if !filepath.IsAbs(cwd) {
			cwd = filepath.Join(e.cwd, cwd)
		}
	}
	// Fail now, not at the first tool call, when there is no workspace.
	if _, err := history.Find(cwd); err != nil {
		return err
	}
	return newMCPServer(cwd).Run(e.ctx, &mcp.StdioTransport{})
}

// The tools' arguments. JSON names and descriptions are what an agent sees
// in the tool's schema.
type (
	mcpLogArgs struct {
		N     int      `json:"n,omitempty" jsonschema:"show only the newest N steps (0: all)"`
		Paths []string `json:"paths,omitempty" jsonschema:"only steps that changed these workspace paths (a directory with everything under it)"`
	}
	mcpDiffArgs struct {
		From  int64    `json:"from" jsonschema:"the sequence to diff from (a step's sequence as zerofs_log shows it)"`
		To    *int64   `json:"to,omitempty" jsonschema:"the sequence to diff to; omitted: the workspace as it is now"`
		Paths []string `json:"paths,omitempty" jsonschema:"only these workspace paths"`
	}
	mcpShowArgs struct {
		Seq  int64  `json:"seq" jsonschema:"the sequence"`
		Path string `json:"path" jsonschema:"the workspace path, relative to its root"`
	}
	mcpStepArgs struct {
		Label string `json:"label" jsonschema:"what the step is about to do (one line), e.g. the tool call"`
	}
	mcpRewindArgs struct {
		Seq    int64    `json:"seq" jsonschema:"the sequence to roll back to: the workspace becomes as it was then"`
		Paths  []string `json:"paths,omitempty" jsonschema:"restore only these workspace paths (a directory with everything under it); omitted: everything"`
		DryRun bool     `json:"dry_run,omitempty" jsonschema:"only say what would be restored, deleted and created; change nothing"`
	}
	mcpUndoArgs struct {
		DryRun bool `json:"dry_run,omitempty" jsonschema:"only say what would change; change nothing"`
	}
	mcpRevertArgs struct {
		Seq    int64 `json:"seq" jsonschema:"the sequence of the step to undo (later changes are kept)"`
		Force  bool  `json:"force,omitempty" jsonschema:"also take back paths that later changes touched too"`
		DryRun bool  `json:"dry_run,omitempty" jsonschema:"only say what would change; change nothing"`
	}
)

// newMCPServer makes the server with its tools; each runs a CLI command in
// the workspace directory cwd.
func newMCPServer(cwd string) *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "zerofs", Version: releaseVersion()}, nil)
	cli := func(argv ...string) (*mcp.CallToolResult, any, error) {
		return runForMCP(cwd, argv)
	}
	mcp.AddTool(s, &mcp.Tool{
		Name: "zerofs_log",
		Description: "List the workspace's steps (tool calls) newest first, each with its sequence number, label, time and the paths it changed " +
			"(added, modified, deleted, renamed, with the process that changed them). Returns JSON. Use a step's sequence with zerofs_diff, zerofs_revert or zerofs_rewind.",
	}, func(_ context.Context, _ *mcp.CallToolRequest, a mcpLogArgs) (*mcp.CallToolResult, any, error) {
		argv := []string{"log", "--json"}
		if a.N > 0 {
			argv = append(argv, "-n", strconv.Itoa(a.N))
		}
		return cli(withPaths(argv, a.Paths)...)
	})
	mcp.AddTool(s, &mcp.Tool{
		Name:        "zerofs_diff",
		Description: "Unified diff of the workspace from sequence `from` to sequence `to` (default: now), optionally only for some paths.",
	}, func(_ context.Context, _ *mcp.CallToolRequest, a mcpDiffArgs) (*mcp.CallToolResult, any, error) {
		argv := []string{"diff", seqArg(a.From)}
		if a.To != nil {
			argv = append(argv, seqArg(*a.To))
		}
		return cli(withPaths(argv, a.Paths)...)
	})
	mcp.AddTool(s, &mcp.Tool{
		Name:        "zerofs_show",
		Description: "The content of a workspace file (or a symlink's target) as it was at a sequence.",
	}, func(_ context.Context, _ *mcp.CallToolRequest, a mcpShowArgs) (*mcp.CallToolResult, any, error) {
		return cli("show", seqArg(a.Seq), a.Path)
	})
	mcp.AddTool(s, &mcp.Tool{
		Name: "zerofs_step",
		Description: "Begin a new step before changing files, labelled with what you are about to do. " +
			"Each step can later be undone on its own; changes without a step of their own belong to the previous one.",
	}, func(_ context.Context, _ *mcp.CallToolRequest, a mcpStepArgs) (*mcp.CallToolResult, any, error) {
		return cli("step", a.Label)
	})
	mcp.AddTool(s, &mcp.Tool{
		Name: "zerofs_rewind",
		Description: "Roll the workspace (or only some paths) back to how it was at a sequence. The rewind is itself recorded and can be undone with zerofs_undo. " +
			"Use dry_run first to see what would be restored, deleted and created.",
	}, func(_ context.Context, _ *mcp.CallToolRequest, a mcpRewindArgs) (*mcp.CallToolResult, any, error) {
		argv := []string{"rewind"}
		if a.DryRun {
			argv = append(argv, "--dry-run")
		}
		return cli(withPaths(append(argv, seqArg(a.Seq)), a.Paths)...)
	})
	mcp.AddTool(s, &mcp.Tool{
		Name:        "zerofs_undo",
		Description: "Undo the last step (roll the workspace back to before it). Undos stack; zerofs_redo takes one back. Names the step it undid.",
	}, func(_ context.Context, _ *mcp.CallToolRequest, a mcpUndoArgs) (*mcp.CallToolResult, any, error) {
		return cli(dryRun([]string{"undo"}, a.DryRun)...)
	})
	mcp.AddTool(s, &mcp.Tool{
		Name:        "zerofs_redo",
		Description: "Take back the last undo.",
	}, func(_ context.Context, _ *mcp.CallToolRequest, a mcpUndoArgs) (*mcp.CallToolResult, any, error) {
		return cli(dryRun([]string{"redo"}, a.DryRun)...)
	})
	mcp.AddTool(s, &mcp.Tool{
		Name: "zerofs_revert",
		Description: "Undo what one step changed and keep every later change. If a later change touched the same paths, nothing changes and " +
			"the error names each conflicting path (force takes them back too).",
	}, func(_ context.Context, _ *mcp.CallToolRequest, a mcpRevertArgs) (*mcp.CallToolResult, any, error) {
		argv := dryRun([]string{"revert"}, a.DryRun)
		if a.Force {
			argv = append(argv, "--force")
		}
		return cli(append(argv, seqArg(a.Seq))...)
	})
	return s
}

// runForMCP runs one CLI command in process and turns its outcome into a
// tool result: its stdout on success; on failure a tool error with its
// one-line reason (stderr), so the agent reads why and the server goes on.
func runForMCP(cwd string, argv []string) (*mcp.CallToolResult, any, error) {
	var stdout, stderr bytes.Buffer
	code := run(argv, strings.NewReader(""), &stdout, &stderr, cwd)
	if code != 0 {
		msg := strings.TrimSpace(stderr.String())
		if msg == "" {
			msg = fmt.Sprintf("zerofs %s: exit status %d", argv[0], code)
		}
		return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: msg}}}, nil, nil
	}
	out := stdout.String()
	if out == "" {
		out = "ok"
	}
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: out}}}, nil, nil
}

// seqArg formats a sequence for the command line. A negative one is passed
// as is, for the command to refuse with its own message.
func seqArg(n int64) string { return strconv.FormatInt(n, 10) }

func withPaths(argv, paths []string) []string {
	if len(paths) == 0 {
		return argv
	}
	return append(append(argv, "--"), paths...)
}

func dryRun(argv []string, dry bool) []string {
	if dry {
		return append(argv, "--dry-run")
	}
	return argv
}
