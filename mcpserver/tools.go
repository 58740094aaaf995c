package mcpserver

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/zerofs/zerofs/control"
	"github.com/zerofs/zerofs/history"
	"github.com/zerofs/zerofs/internal/quote"
	"github.com/zerofs/zerofs/record"
)

// mcpTools are the MCP server's tools, on the workspace around dir. Each
// call finds the workspace again and opens its history for the call only,
// so a server started before `zerofs mount` works once it is mounted.
type mcpTools struct{ dir string }

// The tools' arguments. JSON names and descriptions are what an agent sees
// in each tool's input schema.
type (
	mcpNoArgs  struct{}
	mcpLogArgs struct {
		N     int      `json:"n,omitempty" jsonschema:"how many steps, rewinds and gcs to return, newest first (default 20), each with the turn (prompt) it belongs to"`
		Paths []string `json:"paths,omitempty" jsonschema:"only the steps that changed these workspace paths (relative to the workspace root; a directory stands for everything under it)"`
		// PathsBytes, here and in every tool that takes paths, names a
		// path that is not UTF-8 by its exact bytes (mcpArgPaths).
		PathsBytes []string `json:"paths_bytes,omitempty" jsonschema:"paths that are not UTF-8, by their exact bytes in base64 (as paths_bytes or path_bytes in a result gives them): one for each entry of paths, empty for a path given as text there; or alone, every path as bytes"`
		All        bool     `json:"all,omitempty" jsonschema:"also list the steps that changed nothing (read-only tool calls)"`
		Details    bool     `json:"details,omitempty" jsonschema:"also return each step's payload (the tool's input, which may be large) and each change's blob id"`
	}
	mcpDiffArgs struct {
		From       uint64   `json:"from" jsonschema:"the sequence to diff from (a sequence zerofs_log shows)"`
		To         *uint64  `json:"to,omitempty" jsonschema:"the sequence to diff to; omitted: the workspace as it is now"`
		Paths      []string `json:"paths,omitempty" jsonschema:"only these workspace paths (relative to the workspace root)"`
		PathsBytes []string `json:"paths_bytes,omitempty" jsonschema:"paths that are not UTF-8, by their exact bytes in base64 (as paths_bytes or path_bytes in a result gives them): one for each entry of paths, empty for a path given as text there; or alone, every path as bytes"`
	}
	mcpShowArgs struct {
		Seq       uint64 `json:"seq" jsonschema:"the sequence"`
		Path      string `json:"path,omitempty" jsonschema:"the workspace path, relative to the workspace root (empty or omitted: the root directory)"`
		PathBytes string `json:"path_bytes,omitempty" jsonschema:"a path that is not UTF-8: its exact bytes in base64 (as path_bytes in a result gives them); it wins over path"`
	}
	mcpStepArgs struct {
		Label string `json:"label" jsonschema:"what you are about to do, one line (e.g. Edit app.py)"`
	}
	mcpRewindArgs struct {
		Seq        *uint64  `json:"seq,omitempty" jsonschema:"the sequence to roll back to: the workspace (or the paths) become as they were then (give seq or before_turn)"`
		BeforeTurn uint64   `json:"before_turn,omitempty" jsonschema:"instead of seq: a turn's sequence (a turn entry of zerofs_log): the whole workspace goes back to just before that prompt, taking back everything done since, by every step and command"`
		Paths      []string `json:"paths,omitempty" jsonschema:"restore only these workspace paths (a directory with everything under it); omitted: the whole workspace"`
		PathsBytes []string `json:"paths_bytes,omitempty" jsonschema:"paths that are not UTF-8, by their exact bytes in base64 (as paths_bytes or path_bytes in a result gives them): one for each entry of paths, empty for a path given as text there; or alone, every path as bytes"`
		DryRun     bool     `json:"dry_run,omitempty" jsonschema:"only say what would be restored, deleted and created; change nothing"`
	}
	mcpUndoArgs struct {
		Turn   bool `json:"turn,omitempty" jsonschema:"take back the whole turn of the last step instead: the whole workspace goes back to just before the prompt that led to it"`
		DryRun bool `json:"dry_run,omitempty" jsonschema:"only say what would change; change nothing"`
	}
	mcpRedoArgs struct {
		DryRun bool `json:"dry_run,omitempty" jsonschema:"only say what would change; change nothing"`
	}
	mcpRevertArgs struct {
		Seq    uint64 `json:"seq" jsonschema:"the sequence of the step to take back (a step's sequence as zerofs_log shows it); later changes are kept"`
		Force  bool   `json:"force,omitempty" jsonschema:"also take back the paths that later changes touched too"`
		DryRun bool   `json:"dry_run,omitempty" jsonschema:"only say what would change; change nothing"`
	}
)

// The tools' structured results (each tool's output schema). A name that
// is not UTF-8 travels as the log and `log --json` carry it (SPEC,
// pathBytes): the name field holds a readable form (U+FFFD for each byte
// that is not UTF-8) and a sibling "..._bytes" field its exact bytes in
// base64, left out when the name is UTF-8; a list of names has a sibling
// list with an entry for each name ("" for one that is UTF-8), left out
// when every name is. JSON cannot carry such a name as it is: encoding it
// would make "bad\xff" and "bad\xfe" one name.
type (
	mcpStepRef struct {
		Sequence uint64 `json:"sequence"`
		Label    string `json:"label"`
	}
	// mcpActed is what an action acted on (history.Name words it).
	mcpActed struct {
		Kind     string `json:"kind" jsonschema:"step, turn or rewind"`
		Sequence uint64 `json:"sequence" jsonschema:"the step's tool_call (an implicit step's first change), the turn's or the rewind's sequence"`
		Label    string `json:"label" jsonschema:"a step's label; a rewind's form (rewind, paths, revert, undo, redo, turn)"`
		Implicit bool   `json:"implicit" jsonschema:"changes made outside any step"`
		Prompt   string `json:"prompt,omitempty" jsonschema:"a turn's prompt (absent when it was kept out)"`
		Name     string `json:"name" jsonschema:"how zerofs names it, as the CLI and the log do"`
	}
	mcpStatusOut struct {
		Workspace       string `json:"workspace"`
		WorkspaceBytes  string `json:"workspace_bytes,omitempty" jsonschema:"the workspace's exact bytes in base64, when its path is not UTF-8"`
		Mounted         bool   `json:"mounted"`
		Recording       bool   `json:"recording" jsonschema:"whether changes to the workspace are recorded now (only a mounted workspace records them)"`
		Mountpoint      string `json:"mountpoint,omitempty"`
		MountpointBytes string `json:"mountpoint_bytes,omitempty" jsonschema:"the mountpoint's exact bytes in base64, when it is not UTF-8"`
		Head            uint64 `json:"head" jsonschema:"the last sequence written"`
		// Step is the current step.
		Step         *mcpStepRef `json:"step,omitempty"`
		Steps        int         `json:"steps" jsonschema:"how many steps were recorded"`
		PrunedBefore uint64      `json:"pruned_before" jsonschema:"history starts here (gc forgot the states before)"`
		StoreBytes   int64       `json:"store_bytes"`
		// IgnoredPatterns are what .zeroignore and --ignore leave alone.
		IgnoredPatterns []string `json:"ignored_patterns" jsonschema:"gitignore patterns (.zeroignore's, then mount --ignore's): the paths they match are never recorded and never touched by rewinds, undo or revert; empty: everything is recorded"`
		Warnings        []string `json:"warnings,omitempty"`
	}
	mcpChange struct {
		Path      string `json:"path" jsonschema:"the workspace path (a readable form when it is not UTF-8: path_bytes then holds it)"`
		PathBytes string `json:"path_bytes,omitempty" jsonschema:"the path's exact bytes in base64, when it is not UTF-8 (pass it back as path_bytes or paths_bytes)"`
		Change    string `json:"change" jsonschema:"added, deleted, modified, mode, renamed, skipped or unknown"`
		From      string `json:"from,omitempty" jsonschema:"a renamed path's old name"`
		FromBytes string `json:"from_bytes,omitempty" jsonschema:"the old name's exact bytes in base64, when it is not UTF-8"`
		Blob      string `json:"blob,omitempty"`
	}
	mcpEntry struct {
		Type         string         `json:"type" jsonschema:"step, rewind, gc or turn"`
		Sequence     uint64         `json:"sequence"`
		Time         string         `json:"time"`
		Label        string         `json:"label,omitempty"`
		Turn         uint64         `json:"turn,omitempty" jsonschema:"the turn (a person's prompt) the step belongs to"`
		Prompt       string         `json:"prompt,omitempty"`
		Agent        string         `json:"agent,omitempty"`
		AgentSession string         `json:"agent_session,omitempty"`
		Title        string         `json:"title,omitempty" jsonschema:"what a rewind was, as zerofs log words it"`
		Target       *uint64        `json:"target,omitempty" jsonschema:"a rewind's target sequence (0: the state before any recorded change)"`
		Restored     *int           `json:"restored,omitempty" jsonschema:"how many paths a rewind restored"`
		Deleted      *int           `json:"deleted,omitempty" jsonschema:"how many paths a rewind deleted, everything beneath a deleted directory included"`
		Changes      []mcpChange    `json:"changes,omitempty"`
		Payload      map[string]any `json:"payload,omitempty"`
		Result       *mcpToolResult `json:"result,omitempty" jsonschema:"what came of the step's tool call (an agent's after-tool hook, zerofs run), when recorded"`
	}
	mcpLogOut struct {
		Head    uint64     `json:"head"`
		Entries []mcpEntry `json:"entries"`
		More    bool       `json:"more" jsonschema:"older entries were left out: ask for a larger n"`
	}
	mcpDiffOut struct {
		From uint64  `json:"from"`
		To   *uint64 `json:"to,omitempty" jsonschema:"omitted: the workspace as it is now"`
		Diff string  `json:"diff" jsonschema:"a unified diff, empty when nothing changed"`
	}
	mcpShowOut struct {
		Seq       uint64 `json:"seq"`
		Path      string `json:"path"`
		PathBytes string `json:"path_bytes,omitempty" jsonschema:"the path's exact bytes in base64, when it is not UTF-8"`
		Exists    bool   `json:"exists"`
		Kind      string `json:"kind,omitempty" jsonschema:"file, dir or symlink"`
		Bytes     *int64 `json:"bytes,omitempty" jsonschema:"a file's size (0 for an empty file); absent for a directory or symlink"`
		// Content is a text file's content; ContentBase64 a binary one's.
		Content       string   `json:"content,omitempty"`
		ContentBase64 string   `json:"content_base64,omitempty"`
		Truncated     bool     `json:"truncated,omitempty" jsonschema:"the content was cut at 1 MiB"`
		Target        string   `json:"target,omitempty" jsonschema:"a symlink's target"`
		TargetBytes   string   `json:"target_bytes,omitempty" jsonschema:"the target's exact bytes in base64, when it is not UTF-8"`
		Entries       []string `json:"entries,omitempty" jsonschema:"a directory's names"`
		EntriesBytes  []string `json:"entries_bytes,omitempty" jsonschema:"when a name in entries is not UTF-8: each name's exact bytes in base64, at its position in entries (empty for a name that is UTF-8)"`
	}
	mcpPreview struct {
		Action    string `json:"action" jsonschema:"restore, delete or create"`
		Path      string `json:"path"`
		PathBytes string `json:"path_bytes,omitempty" jsonschema:"the path's exact bytes in base64, when it is not UTF-8"`
		Kind      string `json:"kind"`
		Added     *int   `json:"added,omitempty" jsonschema:"lines the file gains (absent when it is not text or too large to compare)"`
		Removed   *int   `json:"removed,omitempty" jsonschema:"lines the file loses (absent when it is not text or too large to compare)"`
	}
	mcpActionOut struct {
		Action   string `json:"action" jsonschema:"rewind, undo, redo or revert"`
		Form     string `json:"form" jsonschema:"what was done: rewind, paths, revert, undo, redo or turn (a whole turn taken back)"`
		DryRun   bool   `json:"dry_run"`
		Sequence uint64 `json:"sequence,omitempty" jsonschema:"the rewind event recording this action (none for a dry run)"`
		Target   uint64 `json:"target" jsonschema:"the sequence whose state was restored"`
		Before   uint64 `json:"before" jsonschema:"the last sequence before this action: zerofs_rewind to it takes the action back"`
		Restored int    `json:"restored"`
		Deleted  int    `json:"deleted"`
		// Unchanged: the workspace already was as the action would make
		// it; nothing was changed or recorded.
		Unchanged bool `json:"unchanged,omitempty" jsonschema:"the workspace already was as the action would make it: nothing changed, nothing recorded"`
		// Step is what an undo, redo, revert or turn form acted on.
		Step           *mcpActed    `json:"step,omitempty"`
		Paths          []string     `json:"paths,omitempty"`
		PathsBytes     []string     `json:"paths_bytes,omitempty" jsonschema:"when a name in paths is not UTF-8: each name's exact bytes in base64, at its position in paths (empty for a name that is UTF-8)"`
		Skipped        []string     `json:"skipped,omitempty" jsonschema:"paths whose earlier state was not kept"`
		SkippedBytes   []string     `json:"skipped_bytes,omitempty" jsonschema:"when a name in skipped is not UTF-8: each name's exact bytes in base64, at its position in skipped (empty for a name that is UTF-8)"`
		Preview        []mcpPreview `json:"preview,omitempty"`
		Conflicts      []string     `json:"conflicts,omitempty"`
		ConflictsBytes []string     `json:"conflicts_bytes,omitempty" jsonschema:"when a name in conflicts is not UTF-8: each name's exact bytes in base64, at its position in conflicts (empty for a name that is UTF-8)"`
		Warnings       []string     `json:"warnings,omitempty" jsonschema:"changes made by someone else (a person, another agent session) that this action overwrites, and a person's changes it leaves alone"`
		Text           string       `json:"text" jsonschema:"the result in words, as zerofs's CLI says it"`
	}
)

func boolp(b bool) *bool { return &b }

func floatp(f float64) *float64 { return &f }

// readOnly, additive and destructive are the tools' annotations.
var (
	readOnly    = &mcp.ToolAnnotations{ReadOnlyHint: true, IdempotentHint: true, OpenWorldHint: boolp(false)}
	additive    = &mcp.ToolAnnotations{DestructiveHint: boolp(false), OpenWorldHint: boolp(false)}
	destructive = func(idempotent bool) *mcp.ToolAnnotations {
		return &mcp.ToolAnnotations{DestructiveHint: boolp(true), IdempotentHint: idempotent, OpenWorldHint: boolp(false)}
	}
)

func (t *mcpTools) register(s *mcp.Server, schemas map[string]*jsonschema.Schema) {
	addTool(s, schemas, &mcp.Tool{Name: "zerofs_status", Title: "Is recording on?", Annotations: readOnly,
		Description: "Whether this workspace is mounted (only then are changes recorded and can be undone), its head sequence, the current step and how many steps there are. Call it before relying on undo."},
		nil, t.status)
	addTool(s, schemas, &mcp.Tool{Name: "zerofs_log", Title: "History", Annotations: readOnly,
		Description: "The workspace's history, newest first: steps (tool calls) with the paths each changed, rewinds, gcs, and turns (a person's prompt; each step names its turn). " +
			"By default the last 20 entries, without the steps that changed nothing, and without payloads and blob ids (details: true adds them). " +
			"A path that is not UTF-8 comes as a readable form with its exact bytes (base64) in path_bytes (from_bytes for a rename's old name): pass those back in paths_bytes. " +
			"Use a step's sequence with zerofs_diff, zerofs_show, zerofs_revert or zerofs_record."},
		map[string]mcpProp{"n": {min: floatp(1), max: 1000, def: "20"}}, t.log)
	addTool(s, schemas, &mcp.Tool{Name: "zerofs_diff", Title: "Diff", Annotations: readOnly,
		Description: "A unified diff of the workspace from sequence `from` to sequence `to` (omitted: the workspace now), optionally only of some paths. To see what the step at sequence S did: from S-1 to the step's end (the next entry's sequence minus one), or from S-1 to now."},
		nil, t.diff)
	addTool(s, schemas, &mcp.Tool{Name: "zerofs_show", Title: "A file at a sequence", Annotations: readOnly,
		Description: "A workspace path as it was at a sequence: a file's content (text, or base64 for binary, cut at 1 MiB), a symlink's target, or a directory's names. " +
			"Name a path that is not UTF-8 by path_bytes, its exact bytes in base64 (as zerofs_log's path_bytes gives them); a name in the result that is not UTF-8 has its bytes beside it (path_bytes, target_bytes, entries_bytes)."},
		nil, t.show)
	addTool(s, schemas, &mcp.Tool{Name: "zerofs_step", Title: "Begin a step", Annotations: additive,
		Description: "Begin a new step before changing files, labelled with what you are about to do (one line). Every change until the next step belongs to it, and zerofs_undo or zerofs_revert can take it back on its own. Not needed when the client's hooks begin steps (zerofs hooks install)."},
		nil, t.step)
	addTool(s, schemas, &mcp.Tool{Name: "zerofs_rewind", Title: "Rewind", Annotations: destructive(true),
		Description: "Put the whole workspace (or only some paths) back to how it was at a sequence, overwriting every later change to it, by anyone. " +
			"With before_turn instead of seq, take back a whole turn: the workspace goes back to just before that prompt (a turn entry of zerofs_log). " +
			"The rewind is itself recorded: zerofs_undo right after it takes it back (so does zerofs_rewind to the result's `before`, the sequence just before it). " +
			"Call it with dry_run: true first, and read the result's warnings: they name changes by a person or another agent session that it overwrites."},
		nil, t.rewind)
	addTool(s, schemas, &mcp.Tool{Name: "zerofs_undo", Title: "Undo the last step", Annotations: destructive(false),
		Description: "Take back the last thing done and still in effect, and name it: the last step that changed something, or a rewind, path rewind or revert if that came last (as jj undo does). " +
			"The whole workspace goes back to just before it: every change since, by anyone (a person's changes excepted, which it leaves alone and names), not only the files the step touched. " +
			"With turn: true it takes back the whole turn of that step instead (everything since the prompt that led to it). " +
			"Call it with dry_run: true first: it lists what would be restored, deleted and created and changes nothing. " +
			"Undos stack: each call goes one further back; zerofs_redo takes the last one back."},
		nil, t.undo)
	addTool(s, schemas, &mcp.Tool{Name: "zerofs_redo", Title: "Redo", Annotations: destructive(false),
		Description: "Take back the last undo not yet taken back. A step that changes something after an undo ends the redo chain."},
		nil, t.redo)
	addTool(s, schemas, &mcp.Tool{Name: "zerofs_revert", Title: "Revert one step", Annotations: destructive(false),
		Description: "Take back what one step changed and keep every later change. If a later change touched the same paths, nothing changes and the error names each of them; call again with force: true to take those back too."},
		nil, t.revert)
	t.registerMerge(s, schemas)
	t.registerBranch(s, schemas)
	t.registerBisect(s, schemas)
}

// open finds the workspace and opens its history for one call.
func (t *mcpTools) open(ctx context.Context) (*history.Workspace, history.Source, error) {
	ws, err := history.Find(t.dir)
	if err != nil {
		return nil, nil, fmt.Errorf("%v: this server was started outside a zerofs workspace; start `zerofs mcp` inside one (or with --workspace DIR) after `zerofs mount DIR`", err)
	}
	src, err := history.Open(ctx, ws, history.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		return nil, nil, mcpError(err)
	}
	return ws, src, nil
}

// with runs fn on the workspace's history and closes it.
func (t *mcpTools) with(ctx context.Context, fn func(ws *history.Workspace, src history.Source) error) error {
	ws, src, err := t.open(ctx)
	if err != nil {
		return err
	}
	err = fn(ws, src)
	if cerr := src.Close(); err == nil && cerr != nil {
		err = mcpError(cerr)
	}
	return err
}

func text(s string) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: s}}}
}

func (t *mcpTools) status(ctx context.Context, _ *mcp.CallToolRequest, _ mcpNoArgs) (*mcp.CallToolResult, mcpStatusOut, error) {
	st, err := history.StatusWith(t.dir, history.StatusOptions{})
	if err != nil {
		_, _, oerr := t.open(ctx)
		if oerr != nil {
			return nil, mcpStatusOut{}, oerr
		}
		return nil, mcpStatusOut{}, mcpError(err)
	}
	out := mcpStatusOut{Workspace: record.Readable(st.Workspace.Root), WorkspaceBytes: record.ExactBytes(st.Workspace.Root), Mounted: st.Workspace.Mounted, Recording: st.Workspace.Mounted,
		Head: uint64(st.Head), Steps: st.Steps, PrunedBefore: uint64(st.Pruned), StoreBytes: st.StoreBytes}
	if st.Workspace.Mounted {
		mp := st.Workspace.Status.Mountpoint
		out.Mountpoint, out.MountpointBytes = record.Readable(mp), record.ExactBytes(mp)
	} else {
		w := "not mounted: changes made now are not recorded, and undo cannot take them back (zerofs mount " + quote.Name(st.Workspace.Root) + ")"
		if st.DaemonElsewhere > 0 {
			w = fmt.Sprintf("mounted elsewhere (pid %d), not here: changes made through this path are not recorded", st.DaemonElsewhere)
		}
		out.Warnings = append(out.Warnings, w)
	}
	if st.Step.Sequence > 0 {
		out.Step = &mcpStepRef{Sequence: uint64(st.Step.Sequence), Label: st.Step.Label}
	}
	out.IgnoredPatterns = append(append([]string{}, st.Ignore.File...), st.Ignore.Flags...)
	if st.Ignore.Err != "" {
		out.Warnings = append(out.Warnings, fmt.Sprintf("%s not used (%s): everything is recorded but what mount --ignore matches", record.IgnoreFile, st.Ignore.Err))
	}
	var b strings.Builder
	fmt.Fprintf(&b, "workspace %s: ", quote.Name(st.Workspace.Root))
	if out.Recording {
		fmt.Fprintf(&b, "mounted, recording")
	} else {
		fmt.Fprintf(&b, "NOT recording")
	}
	fmt.Fprintf(&b, "; head %d, %d steps", out.Head, out.Steps)
	if out.Step != nil {
		fmt.Fprintf(&b, "; current step %d %s", out.Step.Sequence, quote.Line(out.Step.Label))
	}
	if n := len(out.IgnoredPatterns); n > 0 {
		fmt.Fprintf(&b, "; ignoring what %s match (never recorded nor rewound)", plural(n, "pattern"))
	}
	for _, w := range out.Warnings {
		fmt.Fprintf(&b, "\nwarning: %s", w)
	}
	return text(b.String()), out, nil
}

func (t *mcpTools) log(ctx context.Context, _ *mcp.CallToolRequest, a mcpLogArgs) (*mcp.CallToolResult, mcpLogOut, error) {
	if a.N <= 0 {
		a.N = 20 // the schema's default, for clients that send 0
	}
	var out mcpLogOut
	err := t.with(ctx, func(ws *history.Workspace, src history.Source) error {
		paths, err := mcpArgPaths(a.Paths, a.PathsBytes)
		if err != nil {
			return err
		}
		head, err := src.Head()
		if err != nil {
			return mcpError(err)
		}
		page, err := history.LogPage(src, history.LogOptions{Changes: true, Limit: a.N, Paths: paths, All: a.All})
		if err != nil {
			return mcpError(err)
		}
		out.Head, out.Entries, out.More = uint64(head), []mcpEntry{}, page.More
		for _, e := range page.Entries {
			out.Entries = append(out.Entries, compactEntry(e, a.Details))
		}
		return nil
	})
	if err != nil {
		return nil, mcpLogOut{}, err
	}
	var b strings.Builder
	for _, e := range out.Entries {
		writeEntryLine(&b, e)
	}
	if len(out.Entries) == 0 {
		b.WriteString("no history yet\n")
	}
	if out.More {
		fmt.Fprintf(&b, "(older entries left out: n > %d shows more)\n", a.N)
	}
	return text(b.String()), out, nil
}

// compactEntry is a log entry as zerofs_log returns it.
func compactEntry(e history.Entry, details bool) mcpEntry {
	m := mcpEntry{Type: e.Type, Sequence: uint64(e.Sequence), Time: e.Time.UTC().Format(time.RFC3339), Label: e.Label,
		Turn: uint64(e.Turn), Prompt: e.Prompt, Agent: e.Agent, AgentSession: e.AgentSession, Result: mcpResultOf(e.Result)}
	if e.Person {
		m.Label = "(a person)"
	} else if e.Implicit {
		m.Label = "(no step)"
	}
	if r := e.Rewind; r != nil {
		target, restored, deleted := uint64(r.TargetSequence), r.Report.Restored, r.Report.Deleted
		m.Target, m.Restored, m.Deleted, m.Title = &target, &restored, &deleted, e.Title
	}
	for _, c := range e.Changes {
		mc := mcpChange{Path: record.Readable(c.Path), PathBytes: record.ExactBytes(c.Path), Change: c.Change,
			From: record.Readable(c.From), FromBytes: record.ExactBytes(c.From)}
		if details {
			mc.Blob = c.Blob
		}
		m.Changes = append(m.Changes, mc)
	}
	if details && len(e.Payload) > 0 {
		json.Unmarshal(e.Payload, &m.Payload)
	}
	return m
}

// writeEntryLine is one entry of zerofs_log's text.
func writeEntryLine(b *strings.Builder, e mcpEntry) {
	switch e.Type {
	case history.EntryTurn:
		p := "(prompt kept out)"
		if e.Prompt != "" {
			p = strconv.Quote(history.CutLine(e.Prompt, 72))
		}
		fmt.Fprintf(b, "turn %d %s %s\n", e.Sequence, e.Time, p)
		return
	case history.BlockRewind:
		ind := ""
		if e.Turn != 0 {
			ind = "  "
		}
		what := e.Title
		if what == "" {
			what = fmt.Sprintf("rewind to %d", deref(e.Target))
		}
		fmt.Fprintf(b, "%srewind %d %s %s: restored %d, deleted %d\n", ind, e.Sequence, e.Time, what, deref(e.Restored), deref(e.Deleted))
	default:
		ind := ""
		if e.Turn != 0 {
			ind = "  "
		}
		fmt.Fprintf(b, "%s%s %d %s %s%s\n", ind, e.Type, e.Sequence, e.Time, quote.Line(e.Label), mcpResultWords(e.Result))
	}
	for _, c := range e.Changes {
		name := quote.Name(exactName(c.Path, c.PathBytes))
		if c.From != "" {
			name = quote.Name(exactName(c.From, c.FromBytes)) + " -> " + name
		}
		fmt.Fprintf(b, "    %-8s %s\n", c.Change, name)
	}
}

func (t *mcpTools) diff(ctx context.Context, _ *mcp.CallToolRequest, a mcpDiffArgs) (*mcp.CallToolResult, mcpDiffOut, error) {
	paths, err := mcpArgPaths(a.Paths, a.PathsBytes)
	if err != nil {
		return nil, mcpDiffOut{}, err
	}
	out := mcpDiffOut{From: a.From, To: a.To}
	err = t.with(ctx, func(ws *history.Workspace, src history.Source) error {
		to := history.Now
		if a.To != nil {
			to = record.Seq(*a.To)
		}
		for _, s := range []record.Seq{record.Seq(a.From), to} {
			if err := t.checkSeq(src, s); err != nil {
				return err
			}
		}
		fds, err := history.Diff(src, record.Seq(a.From), to, paths)
		if err != nil {
			return mcpError(history.ExplainSeq(src, record.Seq(a.From), err))
		}
		var b strings.Builder
		for _, fd := range fds {
			b.WriteString(fd.Text)
		}
		out.Diff = b.String()
		return nil
	})
	if err != nil {
		return nil, mcpDiffOut{}, err
	}
	msg := out.Diff
	if msg == "" {
		msg = "no differences"
	}
	return text(msg), out, nil
}

// checkSeq refuses a sequence the history does not hold (s is history.Now
// for the workspace now).
func (t *mcpTools) checkSeq(src history.Source, s record.Seq) error {
	if s == history.Now {
		return nil
	}
	head, err := src.Head()
	if err != nil {
		return mcpError(err)
	}
	pruned, err := src.PrunedBefore()
	if err != nil {
		return mcpError(err)
	}
	if s > head || s < pruned {
		return mcpError(history.ExplainSeq(src, s, record.ErrNoSuchSeq))
	}
	if _, ok := history.ThinnedAt(src, s); ok {
		return mcpError(history.ExplainSeq(src, s, record.ErrNoSuchSeq))
	}
	return nil
}

// maxShow bounds what zerofs_show returns of a file.
const maxShow = 1 << 20

func (t *mcpTools) show(ctx context.Context, _ *mcp.CallToolRequest, a mcpShowArgs) (*mcp.CallToolResult, mcpShowOut, error) {
	p, err := mcpArgPath(a.Path, a.PathBytes)
	if err != nil {
		return nil, mcpShowOut{}, err
	}
	out := mcpShowOut{Seq: a.Seq, Path: record.Readable(p), PathBytes: record.ExactBytes(p)}
	if p != "" {
		if err := record.CleanPath(p); err != nil {
			return nil, out, fmt.Errorf("path %s is not a workspace path: give it relative to the workspace root, without . or .. (%v)", quote.Name(p), err)
		}
	}
	var entries []string // exact names
	var target string
	err = t.with(ctx, func(ws *history.Workspace, src history.Source) error {
		seq := record.Seq(a.Seq)
		n, err := src.Stat(p, seq)
		if err != nil {
			return mcpError(history.ExplainSeq(src, seq, err))
		}
		if !n.Exists {
			return fmt.Errorf("%s did not exist at %d (path)", quote.Name(p), a.Seq)
		}
		out.Exists, out.Kind = true, string(n.Kind)
		if n.Kind == record.KindFile {
			b := n.Bytes
			out.Bytes = &b
		}
		switch n.Kind {
		case record.KindDir:
			entries, err = src.List(p, seq)
			out.Entries, out.EntriesBytes = record.ReadableAll(entries), record.ExactBytesAll(entries)
			return mcpError(err)
		case record.KindSymlink:
			target = n.Target
			out.Target, out.TargetBytes = record.Readable(target), record.ExactBytes(target)
			return nil
		}
		b, err := src.Content(p, seq)
		if err != nil {
			return mcpError(err)
		}
		if len(b) > maxShow {
			b, out.Truncated = b[:maxShow], true
		}
		if utf8.Valid(b) {
			out.Content = string(b)
		} else {
			out.ContentBase64 = base64.StdEncoding.EncodeToString(b)
		}
		return nil
	})
	if err != nil {
		return nil, mcpShowOut{}, err
	}
	msg := out.Content
	switch {
	case out.Kind == string(record.KindDir):
		msg = strings.Join(quoteAll(entries), "\n")
	case out.Kind == string(record.KindSymlink):
		msg = "symlink to " + quote.Name(target)
	case out.ContentBase64 != "":
		msg = fmt.Sprintf("binary file of %d bytes (content_base64 holds it)", deref(out.Bytes))
	}
	return text(msg), out, nil
}

func quoteAll(names []string) []string {
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = quote.Name(n)
	}
	return out
}

func (t *mcpTools) step(ctx context.Context, _ *mcp.CallToolRequest, a mcpStepArgs) (*mcp.CallToolResult, mcpStepRef, error) {
	label := strings.TrimSpace(a.Label)
	switch {
	case label == "":
		return nil, mcpStepRef{}, errors.New("label is empty: say what you are about to do")
	case strings.ContainsAny(label, "\n\r"):
		return nil, mcpStepRef{}, errors.New("label must be one line")
	case len(label) > control.MaxRequest-64:
		return nil, mcpStepRef{}, fmt.Errorf("label is %d bytes: keep it to a line", len(label))
	}
	var out mcpStepRef
	err := t.with(ctx, func(ws *history.Workspace, src history.Source) error {
		if !ws.Mounted {
			// As `zerofs step` refuses: a step nothing records changes in.
			return fmt.Errorf("%s is not mounted, so nothing would be recorded in the step (zerofs mount %s); zerofs_status says when it is", quote.Name(ws.Root), quote.Name(ws.Root))
		}
		if err := src.BeginStep(ctx, label, nil); err != nil {
			return mcpError(err)
		}
		head, err := src.Head()
		out = mcpStepRef{Sequence: uint64(head), Label: label}
		return mcpError(err)
	})
	if err != nil {
		return nil, mcpStepRef{}, err
	}
	return text(fmt.Sprintf("step %d %s begun", out.Sequence, quote.Line(label))), out, nil
}

func (t *mcpTools) rewind(ctx context.Context, _ *mcp.CallToolRequest, a mcpRewindArgs) (*mcp.CallToolResult, mcpActionOut, error) {
	paths, err := mcpArgPaths(a.Paths, a.PathsBytes)
	if err != nil {
		return nil, mcpActionOut{}, err
	}
	if a.BeforeTurn != 0 {
		if a.Seq != nil || len(paths) > 0 {
			return nil, mcpActionOut{}, errors.New("before_turn takes a whole turn back: give it alone, without seq or paths")
		}
		return t.act(ctx, "rewind", record.Request{Turn: record.Seq(a.BeforeTurn), DryRun: a.DryRun})
	}
	if a.Seq == nil {
		return nil, mcpActionOut{}, errors.New("seq: missing: give the sequence to roll back to (or before_turn, a turn's sequence)")
	}
	if (a.Paths != nil || a.PathsBytes != nil) && len(paths) == 0 {
		return nil, mcpActionOut{}, errors.New("paths is empty: omit it to rewind the whole workspace")
	}
	return t.act(ctx, "rewind", record.Request{Target: record.Seq(*a.Seq), Paths: paths, DryRun: a.DryRun})
}

func (t *mcpTools) undo(ctx context.Context, _ *mcp.CallToolRequest, a mcpUndoArgs) (*mcp.CallToolResult, mcpActionOut, error) {
	return t.act(ctx, "undo", record.Request{Undo: true, WholeTurn: a.Turn, DryRun: a.DryRun})
}

func (t *mcpTools) redo(ctx context.Context, _ *mcp.CallToolRequest, a mcpRedoArgs) (*mcp.CallToolResult, mcpActionOut, error) {
	return t.act(ctx, "redo", record.Request{Redo: true, DryRun: a.DryRun})
}

func (t *mcpTools) revert(ctx context.Context, _ *mcp.CallToolRequest, a mcpRevertArgs) (*mcp.CallToolResult, mcpActionOut, error) {
	if a.Seq == 0 {
		return nil, mcpActionOut{}, errors.New("seq 0 names no step: give a step's sequence as zerofs_log shows it")
	}
	return t.act(ctx, "revert", record.Request{Revert: record.Seq(a.Seq), Force: a.Force, DryRun: a.DryRun})
}

// act runs one rewind request, one request to the daemon: its report
// names what it acted on and the changes made by others that it
// overwrote (or, dry, would), so nothing is asked twice and nothing is
// read back from the log.
func (t *mcpTools) act(ctx context.Context, action string, req record.Request) (*mcp.CallToolResult, mcpActionOut, error) {
	out := mcpActionOut{Action: action, DryRun: req.DryRun}
	var words history.Words
	err := t.with(ctx, func(ws *history.Workspace, src history.Source) error {
		head, err := src.Head()
		if err != nil {
			return mcpError(err)
		}
		out.Before = uint64(head)
		guard := history.GuardHooks(ws.Root) // the hook files installed before it
		rep, err := src.Rewind(ctx, req)
		var re *record.RefusedError
		switch {
		case req.Turn != 0 && errors.As(err, &re) && re.Refusal == record.RefusedNoSuchSeq && re.Seq == req.Turn:
			return fmt.Errorf("before_turn: %d is not a turn (zerofs_log lists each turn with its sequence)", req.Turn)
		case errors.Is(err, record.ErrNoSuchSeq) && !req.Undo && !req.Redo && req.Turn == 0:
			s := req.Target
			if req.Revert != 0 {
				s = req.Revert
			}
			err = history.ExplainSeq(src, s, err)
		}
		if err != nil {
			var ce *record.ConflictError
			if errors.As(err, &ce) {
				return fmt.Errorf("nothing changed: later changes also touched %s; call zerofs_revert again with force: true to take those back too (dry_run: true shows what that does)",
					quote.Names(ce.Paths, ", "))
			}
			return mcpError(err)
		}
		verb := "overwrote"
		if req.DryRun {
			verb = "would overwrite"
		}
		out.Warnings = history.ForeignWarnings(rep.Foreign, verb, map[string]bool{})
		out.Form = rep.Form
		out.Warnings = append(out.Warnings, guard.Warnings(rep)...)
		out.Sequence, out.Target = uint64(rep.Sequence), uint64(rep.TargetSequence)
		if req.DryRun {
			out.Sequence = 0
		}
		out.Restored, out.Deleted, out.Unchanged = rep.Report.Restored, rep.Report.Deleted, rep.Unchanged
		if len(rep.Report.Skipped) > 0 {
			out.Skipped, out.SkippedBytes = record.ReadableAll(rep.Report.Skipped), record.ExactBytesAll(rep.Report.Skipped)
		}
		out.Paths, out.PathsBytes = record.ReadableAll(rep.Paths), record.ExactBytesAll(rep.Paths)
		out.Conflicts, out.ConflictsBytes = record.ReadableAll(rep.Conflicts), record.ExactBytesAll(rep.Conflicts)
		if s := rep.Step; s != nil {
			out.Step = &mcpActed{Kind: s.Kind, Sequence: uint64(s.Sequence), Label: s.Label, Implicit: s.Implicit, Prompt: s.Prompt, Name: history.Name(s)}
		}
		out.Preview = previewOf(rep.Preview)
		words = history.Describe(rep)
		return nil
	})
	if err != nil {
		return nil, mcpActionOut{}, err
	}
	out.Text = words.Head
	return text(actionText(out, words)), out, nil
}

// actionText is an action's result for people: the report's words (as the
// CLI prints them), what takes it back, and the warnings.
func actionText(o mcpActionOut, words history.Words) string {
	var b strings.Builder
	b.WriteString(words.Head)
	if !o.DryRun && !o.Unchanged {
		fmt.Fprintf(&b, "; zerofs_rewind to %d takes it back", o.Before)
	}
	if o.Unchanged {
		b.WriteString(" (nothing recorded)")
	}
	b.WriteByte('\n')
	for _, l := range words.Lines {
		b.WriteString(l)
		b.WriteByte('\n')
	}
	for _, w := range o.Warnings {
		fmt.Fprintf(&b, "warning: %s\n", w)
	}
	return b.String()
}

// plural is "1 pattern", "2 patterns".
func plural(n int, what string) string {
	if n == 1 {
		return fmt.Sprintf("1 %s", what)
	}
	return fmt.Sprintf("%d %ss", n, what)
}

// deref is *p, 0 for nil.
func deref[T int | int64 | uint64](p *T) T {
	if p == nil {
		return 0
	}
	return *p
}

// exactName is the name a result's readable form and "..._bytes" field
// stand for (its text's own form when the field is empty).
func exactName(text, b64 string) string {
	if n, err := record.FromBytes("path", text, b64); err == nil {
		return n
	}
	return text
}

// mcpArgPath is the path a tool's path and path_bytes arguments name: the
// exact bytes when given (a name that is not UTF-8, as a result's
// path_bytes gives it), the text otherwise.
func mcpArgPath(path, b64 string) (string, error) {
	if b64 == "" {
		return path, nil
	}
	raw, err := base64.StdEncoding.DecodeString(b64)
	if err != nil {
		return "", fmt.Errorf("path_bytes: not base64 (give a path's exact bytes in base64, as path_bytes in a result has them): %v", err)
	}
	return string(raw), nil
}

// mcpArgPaths checks the workspace paths a tool's paths and paths_bytes
// arguments name: paths_bytes holds, at each path's position, the exact
// bytes in base64 of a path that is not UTF-8 ("" for one given as text in
// paths), as a result's paths_bytes does; or, with no paths, every path.
func mcpArgPaths(paths, b64 []string) ([]string, error) {
	if len(b64) == 0 {
		return mcpPaths(paths)
	}
	alone := len(paths) == 0
	if !alone && len(paths) != len(b64) {
		return nil, fmt.Errorf("paths_bytes has %d entries for %d paths: give one for each entry of paths (empty for a path given as text), or give paths_bytes alone", len(b64), len(paths))
	}
	out := make([]string, len(b64))
	for i, b := range b64 {
		switch {
		case b != "":
			raw, err := base64.StdEncoding.DecodeString(b)
			if err != nil {
				return nil, fmt.Errorf("paths_bytes[%d]: not base64 (give a path's exact bytes in base64, as path_bytes in a result has them): %v", i, err)
			}
			out[i] = string(raw)
		case alone:
			return nil, fmt.Errorf("paths_bytes[%d] is empty: with no paths, give every path's bytes", i)
		default:
			out[i] = paths[i]
		}
	}
	return mcpPaths(out)
}

// mcpPaths checks workspace paths given as an argument.
func mcpPaths(paths []string) ([]string, error) {
	var out []string
	for i, p := range paths {
		p = strings.TrimSuffix(p, "/")
		if err := record.CleanPath(p); err != nil {
			return nil, fmt.Errorf("paths[%d] %s is not a workspace path: give it relative to the workspace root, without . or .. (%v)", i, quote.Name(p), err)
		}
		out = append(out, p)
	}
	return out, nil
}

// mcpError words a library error for an agent: the reason, with the
// arguments to change named as MCP arguments, not CLI flags.
func mcpError(err error) error {
	if err == nil {
		return nil
	}
	var se *history.SeqError
	var re *record.RefusedError
	switch {
	case errors.As(err, &re) && (re.Refusal == record.RefusedNoSuchSeq || re.Refusal == record.RefusedPruned || re.Refusal == record.RefusedThinned) && re.Op == "":
		return fmt.Errorf("%s (seq: %d; zerofs_log shows the sequences there are)", re.Error(), re.Seq)
	case errors.As(err, &re) && re.Refusal == record.RefusedBadRequest:
		return errors.New(mcpArgWords(re.Error()) + " (check the arguments against the tool's input schema)")
	case errors.As(err, &se):
		return fmt.Errorf("%s (seq: %d; zerofs_log shows the sequences there are)", se.Error(), se.Seq)
	case errors.Is(err, record.ErrNothingToUndo):
		return errors.New("nothing to undo: no step or rewind is in effect (zerofs_log shows the history)")
	case errors.Is(err, record.ErrNothingToRedo):
		return errors.New("nothing to redo: no undo is waiting to be taken back")
	}
	return errors.New(mcpArgWords(err.Error()))
}

// mcpArgWords replaces the CLI's flag names in a message with the MCP
// arguments that mean the same.
func mcpArgWords(s string) string {
	return strings.NewReplacer("--force", "force: true", "--dry-run", "dry_run: true", "--all", "all: true",
		"zerofs undo", "zerofs_undo", "zerofs redo", "zerofs_redo", "zerofs log", "zerofs_log").Replace(s)
}

// previewOf is a dry run's path changes as MCP returns them.
func previewOf(changes []record.PathChange) []mcpPreview {
	var out []mcpPreview
	for _, c := range changes {
		p := mcpPreview{Action: string(c.Action), Path: record.Readable(c.Path), PathBytes: record.ExactBytes(c.Path), Kind: string(c.Kind)}
		if c.Lines != nil {
			added, removed := c.Lines.Added, c.Lines.Removed
			p.Added, p.Removed = &added, &removed
		}
		out = append(out, p)
	}
	return out
}
