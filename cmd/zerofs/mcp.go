package main

import (
	"fmt"
	"path/filepath"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/zerofs/zerofs/history"
	"github.com/zerofs/zerofs/mcpserver"
)

var mcpCmd = &command{
	name:    "mcp",
	usage:   "mcp [--workspace DIR]",
	summary: "serve this workspace's history to an agent over the Model Context Protocol (stdio)",
	about: `Serves the tools zerofs_status, zerofs_log, zerofs_diff, zerofs_show,
zerofs_step, zerofs_rewind, zerofs_undo, zerofs_redo, zerofs_revert and
zerofs_merge over
stdin and stdout, on the workspace around the current directory (or
--workspace DIR). Each tool returns structured content that matches its
output schema, and a short text for people. Arguments are values, never
flags: a label "--help" is a label. A failure comes back as a tool error
naming the argument to change, never as an end of the server; a server
started outside any workspace still answers, and each tool says why it
cannot work.
`,
	flags: []flagDef{{name: "workspace", arg: "DIR", comp: compDir, help: "the workspace (default: found from the current directory)"}},
	run:   runMCP,
}

func runMCP(e *env, c *command, args []string) error {
	o, pos, rest, err := c.parse(args)
	if err != nil {
		return err
	}
	dir := o.String("workspace")
	if len(pos)+len(rest) != 0 {
		return usagef(c, "unexpected arguments %q", append(pos, rest...))
	}
	cwd := e.cwd
	if dir != "" {
		cwd = dir
		if !filepath.IsAbs(cwd) {
			cwd = filepath.Join(e.cwd, cwd)
		}
	}
	// Outside a workspace the server still starts: an agent's client
	// shows the tools' errors, which say why, rather than a dead server.
	if _, err := history.Find(cwd); err != nil {
		fmt.Fprintf(e.stderr, "zerofs: warning: %v; every tool will say so until there is a workspace here\n", err)
	}
	return mcpserver.New(cwd, releaseVersion()).Run(e.ctx, &mcp.StdioTransport{})
}
