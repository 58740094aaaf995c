package mcpserver

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/zerofs/zerofs/branch"
	"github.com/zerofs/zerofs/history"
	"github.com/zerofs/zerofs/internal/quote"
	"github.com/zerofs/zerofs/record"
)

type (
	mcpBranchArgs struct {
		Action string   `json:"action" jsonschema:"create, list or delete"`
		Dirs   []string `json:"dirs,omitempty" jsonschema:"create: each new branch's directory (absolute, or relative to the workspace root: ../app-try-1 is beside it); each must be outside the workspace and missing or empty"`
		At     *uint64  `json:"at,omitempty" jsonschema:"create: the sequence the branches begin from (a sequence zerofs_log shows); omitted: the workspace as it is now"`
		Dir    string   `json:"dir,omitempty" jsonschema:"delete: the branch's directory"`
		Force  bool     `json:"force,omitempty" jsonschema:"delete: also when the branch holds changes no merge brought in (they are lost)"`
		DryRun bool     `json:"dry_run,omitempty" jsonschema:"create: check the directories and say where each branch would begin; delete: say whether it holds changes not merged; change nothing"`
	}
	mcpBranch struct {
		Dir      string `json:"dir"`
		Base     uint64 `json:"base" jsonschema:"the sequence of this workspace the branch began from"`
		Mounted  bool   `json:"mounted" jsonschema:"a zerofs mount answers at dir: work there, and zerofs_merge with dir brings the work in"`
		Changed  int    `json:"changed" jsonschema:"paths its copy-up layer holds: each path it changed, and the directories above them"`
		Merged   uint64 `json:"merged,omitempty" jsonschema:"the sequence of its last merge into this workspace"`
		Unmerged bool   `json:"unmerged" jsonschema:"it changed something no merge brought in: delete refuses without force"`
	}
	mcpBranchOut struct {
		Action   string      `json:"action"`
		DryRun   bool        `json:"dry_run"`
		Branches []mcpBranch `json:"branches" jsonschema:"the branches made, listed or deleted (for a dry run: that would be)"`
	}
)

// registerBranch adds zerofs_branch.
func (t *mcpTools) registerBranch(s *mcp.Server, schemas map[string]*jsonschema.Schema) {
	addTool(s, schemas, &mcp.Tool{Name: "zerofs_branch", Title: "Branches of this workspace", Annotations: destructive(false),
		Description: "Make, list or delete branches: writable copies of this workspace, made at once whatever its size, each mounted at a directory of its own with a history of its own. " +
			"Writes in a branch never reach the workspace, and later changes here never reach it. " +
			"action: create with dirs (and at, to begin from an earlier sequence); list; delete with dir. " +
			"To try something risky or to work in parallel, create a branch, work in its directory, then bring the work back with zerofs_merge (dir: the branch), and delete it. " +
			"delete refuses a branch holding changes no merge brought in unless force: true (they are lost). dry_run: true checks and changes nothing."},
		nil, t.branch)
}

func (t *mcpTools) branch(ctx context.Context, _ *mcp.CallToolRequest, a mcpBranchArgs) (*mcp.CallToolResult, mcpBranchOut, error) {
	out := mcpBranchOut{Action: a.Action, DryRun: a.DryRun, Branches: []mcpBranch{}}
	switch a.Action {
	case "create":
		if len(a.Dirs) == 0 {
			return nil, out, errors.New("dirs names no directory: give each new branch's directory")
		}
		if a.Dir != "" || a.Force {
			return nil, out, errors.New("dir and force go with action: delete; create takes dirs")
		}
	case "delete":
		if a.Dir == "" {
			return nil, out, errors.New("dir names no branch: give the branch's directory")
		}
		if len(a.Dirs) > 0 || a.At != nil {
			return nil, out, errors.New("dirs and at go with action: create; delete takes dir")
		}
	case "list":
		if len(a.Dirs) > 0 || a.At != nil || a.Dir != "" || a.Force || a.DryRun {
			return nil, out, errors.New("list takes no other argument")
		}
	default:
		return nil, out, fmt.Errorf("action %q: want create, list or delete", a.Action)
	}
	ws, err := history.Find(t.dir)
	if err != nil {
		return nil, out, fmt.Errorf("%v: this server was started outside a zerofs workspace; start `zerofs mcp` inside one (or with --workspace DIR) after `zerofs mount DIR`", err)
	}
	abs := func(d string) string {
		if !filepath.IsAbs(d) {
			d = filepath.Join(ws.Root, d)
		}
		return filepath.Clean(d)
	}
	switch a.Action {
	case "list":
		infos, err := branch.List(ctx, ws)
		if err != nil {
			return nil, out, mcpError(err)
		}
		for _, in := range infos {
			out.Branches = append(out.Branches, mcpBranchOf(in))
		}
		return text(fmt.Sprintf("%d branch(es) of %s", len(infos), quote.Name(ws.Root))), out, nil
	case "delete":
		in, err := branch.Find(ctx, ws, abs(a.Dir))
		if err != nil {
			return nil, out, mcpBranchError(err, a.Dir)
		}
		if a.DryRun {
			out.Branches = append(out.Branches, mcpBranchOf(in))
			if in.Unmerged && !a.Force {
				return text(fmt.Sprintf("would refuse: %s holds changes not merged (%d changed paths); zerofs_merge with dir brings them in", quote.Name(in.Dir), in.Changed)), out, nil
			}
			return text("would delete the branch " + quote.Name(in.Dir)), out, nil
		}
		in, err = branch.Delete(ctx, ws, in.Dir, a.Force, branch.Options{})
		var ue *branch.UnmergedError
		if errors.As(err, &ue) {
			return nil, out, fmt.Errorf("nothing deleted: the branch %s holds changes not merged into this workspace (%d changed paths); call zerofs_merge with dir: %q first, or zerofs_branch again with force: true (its changes are lost)",
				quote.Name(in.Dir), in.Changed, in.Dir)
		}
		if err != nil {
			return nil, out, mcpBranchError(err, a.Dir)
		}
		out.Branches = append(out.Branches, mcpBranchOf(in))
		return text("deleted the branch " + quote.Name(in.Dir)), out, nil
	}
	at := history.Now
	if a.At != nil {
		at = record.Seq(*a.At)
	}
	if !ws.Mounted {
		return nil, out, fmt.Errorf("%s is not mounted, and a branch reads its base through the mount: mount it (zerofs mount) first", quote.Name(ws.Root))
	}
	if a.DryRun {
		base := at
		if at == history.Now {
			base = ws.Status.Head
		}
		for _, d := range a.Dirs {
			dir, err := branch.Check(ws, abs(d))
			if err != nil {
				return nil, out, mcpBranchError(err, d)
			}
			out.Branches = append(out.Branches, mcpBranch{Dir: dir, Base: uint64(base)})
		}
		return text(fmt.Sprintf("would make %d branch(es) of %s at sequence %d", len(a.Dirs), quote.Name(ws.Root), base)), out, nil
	}
	var made []string
	for _, d := range a.Dirs {
		in, err := branch.Create(ctx, ws, abs(d), at, branch.Options{})
		if err != nil {
			if len(made) > 0 {
				err = fmt.Errorf("%w (made before it: %s)", err, strings.Join(made, ", "))
			}
			return nil, out, mcpBranchError(err, d)
		}
		made = append(made, quote.Name(in.Dir))
		out.Branches = append(out.Branches, mcpBranchOf(in))
	}
	return text(fmt.Sprintf("made %s, at sequence %d of %s", strings.Join(made, ", "), out.Branches[0].Base, quote.Name(ws.Root))), out, nil
}

func mcpBranchOf(in branch.Info) mcpBranch {
	return mcpBranch{Dir: in.Dir, Base: uint64(in.Base), Mounted: in.Mounted, Changed: in.Changed, Merged: uint64(in.Merged), Unmerged: in.Unmerged}
}

// mcpBranchError words a branch failure for the agent.
func mcpBranchError(err error, dir string) error {
	if errors.Is(err, record.ErrNotBranch) {
		return fmt.Errorf("%s is not a branch of this workspace (zerofs_branch with action: list lists them)", quote.Name(dir))
	}
	return mcpError(err)
}
