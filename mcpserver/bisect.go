package mcpserver

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/zerofs/zerofs/bisect"
	"github.com/zerofs/zerofs/history"
	"github.com/zerofs/zerofs/record"
)

type (
	mcpBisectArgs struct {
		Command        []string `json:"command" jsonschema:"the command and its arguments, one element each (never a shell string: for a pipeline give [\"sh\", \"-c\", \"...\"]); exit 0 means good, 125 skip, 1-127 bad"`
		TimeoutSeconds float64  `json:"timeout_seconds,omitempty" jsonschema:"kill the command after this many seconds at each state and count the state as bad (default 300)"`
		Turns          bool     `json:"turns,omitempty" jsonschema:"test turn boundaries only: name the first bad turn (a person's prompt and what followed)"`
		Good           uint64   `json:"good,omitempty" jsonschema:"a state where the command passes (default: the oldest state kept)"`
		Bad            uint64   `json:"bad,omitempty" jsonschema:"a state where the command fails (default: now)"`
	}
	mcpToolResult struct {
		Status     string `json:"status,omitempty" jsonschema:"ok or error; omitted when the agent did not say"`
		ExitCode   *int   `json:"exit_code,omitempty"`
		DurationMs *int64 `json:"duration_ms,omitempty"`
		Summary    string `json:"summary,omitempty" jsonschema:"the first line of the error"`
	}
	mcpProbe struct {
		State    uint64 `json:"state"`
		Step     uint64 `json:"step,omitempty" jsonschema:"the step (or turn) just before the state; omitted for the oldest state"`
		Label    string `json:"label,omitempty"`
		Verdict  string `json:"verdict" jsonschema:"good, bad, skip or timeout (counted as bad)"`
		ExitCode int    `json:"exit_code"`
		Ms       int64  `json:"ms"`
	}
	mcpBisectOut struct {
		FirstBad struct {
			Sequence uint64         `json:"sequence" jsonschema:"the step's (or turn's) sequence: zerofs_revert with this seq takes the step back"`
			Kind     string         `json:"kind" jsonschema:"step, rewind or turn"`
			Label    string         `json:"label"`
			Turn     uint64         `json:"turn,omitempty"`
			Before   uint64         `json:"before" jsonschema:"the state just before it (the command passes there)"`
			After    uint64         `json:"after" jsonschema:"the state just after it (the command fails there)"`
			Changes  []mcpChange    `json:"changes,omitempty"`
			Result   *mcpToolResult `json:"result,omitempty" jsonschema:"what came of the step's own tool call, when recorded"`
		} `json:"first_bad"`
		Good   uint64     `json:"good"`
		Bad    uint64     `json:"bad"`
		Steps  int        `json:"steps" jsonschema:"how many steps (or turns) lay between good and bad"`
		Probes []mcpProbe `json:"probes"`
		Tail   []string   `json:"tail,omitempty" jsonschema:"the command's last lines of output at the first bad state"`
	}
)

// registerBisect adds zerofs_bisect.
func (t *mcpTools) registerBisect(s *mcp.Server, schemas map[string]*jsonschema.Schema) {
	addTool(s, schemas, &mcp.Tool{Name: "zerofs_bisect", Title: "Find the step that broke a command",
		// It changes nothing in the workspace, but the command it runs may
		// do anything a command does.
		Annotations: &mcp.ToolAnnotations{DestructiveHint: boolp(false), IdempotentHint: true, OpenWorldHint: boolp(true)},
		Description: "Run a command (an argument vector, e.g. [\"go\", \"test\", \"./...\"]) against past states of the workspace and name the first step after which it fails, as git bisect run does: " +
			"exit 0 good, 125 skip, 1-127 bad. It must fail now. Each run is in a scratch copy outside the workspace; the workspace and its history are not changed. " +
			"Returns the step with its changes, each probe, and the command's last lines there; zerofs_revert with the step's sequence takes it back and keeps later changes."},
		map[string]mcpProp{"timeout_seconds": {min: floatp(0), max: 86400, def: "300"}}, t.bisect)
}

func (t *mcpTools) bisect(ctx context.Context, _ *mcp.CallToolRequest, a mcpBisectArgs) (*mcp.CallToolResult, mcpBisectOut, error) {
	var out mcpBisectOut
	if len(a.Command) == 0 || a.Command[0] == "" {
		return nil, out, errors.New("command is empty: give the program and its arguments, e.g. [\"go\", \"test\", \"./...\"]")
	}
	timeout := 300 * time.Second
	if a.TimeoutSeconds > 0 {
		timeout = time.Duration(a.TimeoutSeconds * float64(time.Second))
	}
	cmdline := strings.Join(a.Command, " ")
	err := t.with(ctx, func(ws *history.Workspace, src history.Source) error {
		rep, err := bisect.Run(ctx, src, bisect.Options{Argv: a.Command, Turns: a.Turns, Good: record.Seq(a.Good), Bad: record.Seq(a.Bad), Timeout: timeout})
		var se *bisect.SearchError
		switch {
		case errors.As(err, &se) && errors.Is(err, bisect.ErrNotBad):
			return fmt.Errorf("%s does not fail at the bad state %d: nothing to look for", cmdline, se.Report.Bad)
		case errors.As(err, &se) && errors.Is(err, bisect.ErrBadAtOldest):
			return fmt.Errorf("%s fails at the good state %d too: nothing between %d and %d broke it", cmdline, se.Report.Good, se.Report.Good, se.Report.Bad)
		case errors.As(err, &se) && errors.Is(err, bisect.ErrOnlySkipped):
			var seqs []string
			for _, c := range se.Candidates {
				seqs = append(seqs, strconv.FormatUint(uint64(c.Seq), 10))
			}
			return fmt.Errorf("no state that could tell could be tested (%s exited 125, or gc thinned it away): the first bad step is one of %s", cmdline, strings.Join(seqs, ", "))
		case err != nil:
			return mcpError(err)
		}
		fb := rep.FirstBad
		out.FirstBad.Sequence, out.FirstBad.Kind, out.FirstBad.Label = uint64(fb.Seq), fb.Kind, fb.Label
		out.FirstBad.Turn, out.FirstBad.Before, out.FirstBad.After = uint64(fb.Turn), uint64(fb.Before), uint64(fb.After)
		out.FirstBad.Result = mcpResultOf(fb.Result)
		if b := fb.Block(); b != nil {
			pruned, _ := src.PrunedBefore()
			if cs, err := history.Changes(src, b, pruned); err == nil {
				for _, c := range cs {
					out.FirstBad.Changes = append(out.FirstBad.Changes, mcpChange{Path: record.Readable(c.Path), PathBytes: record.ExactBytes(c.Path),
						Change: c.Change, From: record.Readable(c.From), FromBytes: record.ExactBytes(c.From)})
				}
			}
		}
		out.Good, out.Bad, out.Steps, out.Tail = uint64(rep.Good), uint64(rep.Bad), rep.Steps, rep.Tail
		for _, p := range rep.Probes {
			mp := mcpProbe{State: uint64(p.State), Verdict: string(p.Verdict), ExitCode: p.ExitCode, Ms: p.Took.Milliseconds()}
			if c := p.Candidate; c != nil {
				mp.Step, mp.Label = uint64(c.Seq), c.Label
			}
			out.Probes = append(out.Probes, mp)
		}
		return nil
	})
	if err != nil {
		return nil, mcpBisectOut{}, err
	}
	var b strings.Builder
	for _, p := range out.Probes {
		fmt.Fprintf(&b, "state %d (after %d %q): %s (exit %d, %d ms)\n", p.State, p.Step, p.Label, p.Verdict, p.ExitCode, p.Ms)
	}
	fmt.Fprintf(&b, "first bad %s %d %q; zerofs_revert with seq %d takes it back\n", out.FirstBad.Kind, out.FirstBad.Sequence, out.FirstBad.Label, out.FirstBad.Sequence)
	for _, l := range out.Tail {
		fmt.Fprintf(&b, "    %s\n", l)
	}
	return text(b.String()), out, nil
}

// mcpResultOf is a step's result as the MCP tools return it.
func mcpResultOf(r *record.ToolResultPayload) *mcpToolResult {
	if r == nil {
		return nil
	}
	return &mcpToolResult{Status: r.Status, ExitCode: r.ExitCode, DurationMs: r.DurationMs, Summary: r.Summary}
}

// mcpResultWords is what zerofs_log's text adds to a failed step's line,
// worded as log words it (history.ResultWords).
func mcpResultWords(r *mcpToolResult) string {
	if r == nil || r.Status != "error" {
		return ""
	}
	status, detail := history.ResultWords(&record.ToolResultPayload{Status: r.Status, ExitCode: r.ExitCode, DurationMs: r.DurationMs})
	s := " " + status
	if detail != "" {
		s += " (" + detail + ")"
	}
	if r.Summary != "" {
		s += ": " + strconv.Quote(r.Summary)
	}
	return s
}
