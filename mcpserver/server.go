package mcpserver

import (
	"log/slog"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// mcpInstructions tell an agent when to use which tool.
const mcpInstructions = `zerofs records every change to this workspace (by your tools, your shell commands, and anything else) so any of it can be taken back.

- Check first: zerofs_status says whether the workspace is mounted. Only a mounted workspace records changes; without it undo has nothing to go on.
- Before each change of your own, call zerofs_step with a label saying what you are about to do, unless your client's hooks already begin steps (zerofs hooks install). Each step can later be undone on its own.
- To see what happened: zerofs_log (the last 20 entries, newest first; turns group steps under the prompt that led to them), zerofs_diff (what changed between two sequences, or since one), zerofs_show (a file as it was at a sequence).
- To take something back: zerofs_undo takes back the last thing done (a step, or a rewind or revert if that came last), putting the whole workspace back to just before it (with turn: true, to just before the prompt that led to it); zerofs_redo takes back the last undo; zerofs_revert takes back one older step and keeps everything after it (it refuses, naming the paths, if later changes touched them: pass force: true to take those back too); zerofs_rewind puts the whole workspace, or some paths, back to a sequence (with before_turn, to just before a turn's prompt).
- To try something risky, or to work in parallel, without touching the workspace: zerofs_branch (action: create) makes a writable branch of it in a directory of its own, at once whatever its size; work there (its own history records it), then zerofs_merge with dir: the branch brings the work back, and zerofs_branch (action: delete) drops the branch. Claude Code's subagents with isolation: "worktree" get such branches when zerofs's worktree hooks are installed: zerofs_merge their worktree path.
- To bring back the work of a branch or a fork of this workspace (zerofs fork): zerofs_merge merges its changes since it began, as one action zerofs_undo takes back; a conflict changes nothing and names each path (settle: ours or theirs settles it).
- Use dry_run: true first on zerofs_rewind, zerofs_undo, zerofs_redo, zerofs_revert, zerofs_merge and zerofs_branch's delete: it lists what would be restored, deleted and created and changes nothing. Read the warnings in each result: they name changes made by someone else (a person, another agent session) that the action overwrites.
- When something that worked is broken now (a test, a build), zerofs_bisect with the command that shows it (an argument vector) names the step that broke it; zerofs_log marks steps whose tool call failed.
- Sequences are the numbers zerofs_log shows; 0 is the state before any recorded change.
- File names are bytes. A name that is not UTF-8 comes as a readable form (U+FFFD for each odd byte) with its exact bytes in base64 beside it (path_bytes, from_bytes, paths_bytes, entries_bytes...): two names that read the same there are different files. To name one, pass its bytes back: path_bytes in zerofs_show, paths_bytes in zerofs_log, zerofs_diff and zerofs_rewind.`

// mcpMaxSeq bounds sequences in the tools' schemas: the largest integer a
// JSON number holds exactly, so a larger one gets a clear refusal.
const mcpMaxSeq = 1<<53 - 1

// New makes the server with its tools, on the workspace around dir;
// version is what it says it is (zerofs's release). Run it on a transport
// (mcp.StdioTransport for `zerofs mcp`).
func New(dir, version string) *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "zerofs", Title: "zerofs: time travel for this workspace", Version: version},
		&mcp.ServerOptions{Instructions: mcpInstructions, Logger: slog.New(slog.DiscardHandler)})
	t := &mcpTools{dir: dir}
	schemas := map[string]*jsonschema.Schema{}
	t.register(s, schemas)
	s.AddReceivingMiddleware(checkNumbers(schemas))
	return s
}

// addTool registers a tool whose input and output schemas are derived
// from In and Out, with plain types (no ["null", T] unions, which some
// clients cannot use), integers bounded by mcpMaxSeq and never negative,
// and each property's description and default as props gives them.
func addTool[In, Out any](s *mcp.Server, schemas map[string]*jsonschema.Schema, tool *mcp.Tool, props map[string]mcpProp, h mcp.ToolHandlerFor[In, Out]) {
	in, err := jsonschema.For[In](nil)
	if err != nil {
		panic(err)
	}
	plainSchema(in)
	for name, p := range props {
		ps := in.Properties[name]
		if ps == nil {
			panic("addTool: " + tool.Name + " has no argument " + name)
		}
		if p.max > 0 {
			ps.Maximum = &p.max
		}
		if p.min != nil {
			ps.Minimum = p.min
		}
		if p.def != "" {
			ps.Default = []byte(p.def)
		}
	}
	out, err := jsonschema.For[Out](nil)
	if err != nil {
		panic(err)
	}
	plainSchema(out)
	tool.InputSchema, tool.OutputSchema = in, out
	schemas[tool.Name] = in
	mcp.AddTool(s, tool, h)
}

// mcpProp is what addTool adds to one argument's schema.
type mcpProp struct {
	min *float64
	max float64
	def string // JSON
}

// plainSchema makes every ["null", T] type in s plain T, and bounds every
// integer to 0..mcpMaxSeq.
func plainSchema(s *jsonschema.Schema) {
	if s == nil {
		return
	}
	if len(s.Types) > 0 {
		var keep []string
		for _, t := range s.Types {
			if t != "null" {
				keep = append(keep, t)
			}
		}
		if len(keep) == 1 {
			s.Type, s.Types = keep[0], nil
		} else {
			s.Types = keep
		}
	}
	if s.Type == "integer" {
		zero, top := 0.0, float64(mcpMaxSeq)
		s.Minimum, s.Maximum = &zero, &top
	}
	for _, p := range s.Properties {
		plainSchema(p)
	}
	plainSchema(s.Items)
	plainSchema(s.AdditionalProperties)
	for _, d := range s.Defs {
		plainSchema(d)
	}
}
