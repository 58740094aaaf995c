package mcpserver

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/zerofs/zerofs/history"
	"github.com/zerofs/zerofs/internal/quote"
	"github.com/zerofs/zerofs/record"
)

type (
	mcpMergeArgs struct {
		Dir    string   `json:"dir" jsonschema:"the branch's directory (zerofs_branch, zerofs branch) or the fork's (zerofs fork) of this workspace: absolute, or relative to the workspace root"`
		Settle string   `json:"settle,omitempty" jsonschema:"ours or theirs: settle conflicts by keeping this workspace's side or taking the branch's (or fork's)"`
		Paths  []string `json:"paths,omitempty" jsonschema:"with settle: settle only these workspace paths (each with everything beneath it); omitted: every conflict"`
		DryRun bool     `json:"dry_run,omitempty" jsonschema:"only say what would change, and what conflicts; change nothing"`
	}
	mcpMergeConflict struct {
		Path   string      `json:"path"`
		Why    string      `json:"why"`
		Ours   *mcpStepRef `json:"ours,omitempty" jsonschema:"the step of this workspace that last changed the path"`
		Theirs *mcpStepRef `json:"theirs,omitempty" jsonschema:"the step of the branch (or fork) that last changed the path"`
	}
	mcpMergeOut struct {
		DryRun    bool   `json:"dry_run"`
		Fork      string `json:"fork" jsonschema:"the branch or fork merged"`
		Side      string `json:"side,omitempty" jsonschema:"branch or fork: what dir is"`
		Since     uint64 `json:"since,omitempty" jsonschema:"a branch merged before: the sequence of that merge, whose state of the branch is this merge's base"`
		Base      uint64 `json:"base" jsonschema:"the sequence of this workspace the branch or fork began from (for a branch merged before, that merge: git's rule)"`
		Sequence  uint64 `json:"sequence,omitempty" jsonschema:"the rewind event recording the merge (none for a dry run); zerofs_undo takes it back"`
		Before    uint64 `json:"before" jsonschema:"the last sequence before the merge"`
		Restored  int    `json:"restored"`
		Deleted   int    `json:"deleted"`
		Unchanged bool   `json:"unchanged,omitempty" jsonschema:"the workspace already had every change of the branch or fork: nothing changed, nothing recorded"`
		// Steps are the branch's or fork's steps the merge brings in.
		Steps     []mcpStepRef       `json:"steps"`
		Merged    []string           `json:"merged,omitempty" jsonschema:"files whose changes on both sides were merged line by line"`
		Preview   []mcpPreview       `json:"preview,omitempty"`
		Conflicts []mcpMergeConflict `json:"conflicts,omitempty" jsonschema:"paths both sides changed in ways that do not merge: nothing changed; settle them with settle"`
	}
)

// registerMerge adds zerofs_merge.
func (t *mcpTools) registerMerge(s *mcp.Server, schemas map[string]*jsonschema.Schema) {
	addTool(s, schemas, &mcp.Tool{Name: "zerofs_merge", Title: "Merge a branch or fork back", Annotations: destructive(false),
		Description: "Bring the changes a branch of this workspace (zerofs_branch) or a fork (zerofs fork) made since it began into the workspace, as one recorded action that zerofs_undo takes back whole. " +
			"Each path merges three ways: changed only in the branch, taken; only here, kept; on both sides, text merged line by line when the changes do not overlap. " +
			"Anything else is a conflict: nothing changes, and the error names each path; call again with settle: ours or theirs (and paths) to settle them. " +
			"Call it with dry_run: true first: its result lists what would change and each conflict with the step of each side that last changed it."},
		nil, t.merge)
}

func (t *mcpTools) merge(ctx context.Context, _ *mcp.CallToolRequest, a mcpMergeArgs) (*mcp.CallToolResult, mcpMergeOut, error) {
	out := mcpMergeOut{DryRun: a.DryRun, Steps: []mcpStepRef{}}
	if a.Dir == "" {
		return nil, out, errors.New("dir names no branch or fork: give its directory")
	}
	if a.Settle != "" && a.Settle != record.SettleOurs && a.Settle != record.SettleTheirs {
		return nil, out, fmt.Errorf("settle %q: want ours or theirs", a.Settle)
	}
	if len(a.Paths) > 0 && a.Settle == "" {
		return nil, out, errors.New("paths go with settle: ours or theirs")
	}
	var conflictErr error
	var words history.Words
	err := t.with(ctx, func(ws *history.Workspace, src history.Source) error {
		head, err := src.Head()
		if err != nil {
			return mcpError(err)
		}
		out.Before = uint64(head)
		dir := a.Dir
		if !filepath.IsAbs(dir) {
			dir = filepath.Join(ws.Root, dir)
		}
		mr := &record.MergeRequest{Dir: filepath.Clean(dir), Settle: a.Settle}
		for _, p := range a.Paths {
			if err := record.CleanPath(p); err != nil || p == "" {
				return fmt.Errorf("path %q is not a workspace path (relative to its root)", p)
			}
			mr.Paths = append(mr.Paths, p)
		}
		rep, err := src.Rewind(ctx, record.Request{Merge: mr, DryRun: a.DryRun})
		out.Fork = mr.Dir
		if rep.Merge != nil {
			rec := rep.Merge.Record
			out.Fork, out.Base, out.Merged = rec.Dir, uint64(rec.Base), rec.Merged
			out.Side, out.Since = rec.Side(), uint64(rec.Since)
			for _, s := range rec.Steps {
				out.Steps = append(out.Steps, mcpStepRef{Sequence: uint64(s.Sequence), Label: s.Label})
			}
			for _, c := range rep.Merge.Conflicts {
				mc := mcpMergeConflict{Path: c.Path, Why: c.Why}
				if c.Ours != nil {
					mc.Ours = &mcpStepRef{Sequence: uint64(c.Ours.Sequence), Label: c.Ours.Label}
				}
				if c.Theirs != nil {
					mc.Theirs = &mcpStepRef{Sequence: uint64(c.Theirs.Sequence), Label: c.Theirs.Label}
				}
				out.Conflicts = append(out.Conflicts, mc)
			}
		}
		var ce *record.MergeConflictError
		if errors.As(err, &ce) && a.DryRun {
			return nil // a dry run lists the conflicts in its result
		}
		if errors.As(err, &ce) {
			var names []string
			for _, c := range ce.Conflicts {
				names = append(names, quote.Name(c.Path)+" ("+c.Why+")")
			}
			conflictErr = fmt.Errorf("nothing changed: both sides changed %s; call zerofs_merge again with settle: ours or theirs (and paths to settle only some)",
				strings.Join(names, ", "))
			return nil
		}
		if err != nil {
			return mcpError(err)
		}
		if !a.DryRun {
			out.Sequence = uint64(rep.Sequence)
		}
		out.Restored, out.Deleted, out.Unchanged = rep.Report.Restored, rep.Report.Deleted, rep.Unchanged
		out.Preview = previewOf(rep.Preview)
		words = history.Describe(rep)
		return nil
	})
	if err != nil {
		return nil, mcpMergeOut{}, err
	}
	if conflictErr != nil {
		return nil, mcpMergeOut{}, conflictErr
	}
	if len(out.Conflicts) > 0 {
		return text(fmt.Sprintf("would change nothing: %d conflicting path(s) (see conflicts); settle: ours or theirs settles them", len(out.Conflicts))), out, nil
	}
	// The report in the one wording (history.Describe), as zerofs merge
	// prints it, and the branch's or fork's steps it brings in.
	return text(fmt.Sprintf("%s; %d step(s) of %s\n", words.Head, len(out.Steps), quote.Name(out.Fork))), out, nil
}
