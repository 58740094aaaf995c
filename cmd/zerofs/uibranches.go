package main

import (
	"context"

	"github.com/zerofs/zerofs/branch"
	"github.com/zerofs/zerofs/history"
	"github.com/zerofs/zerofs/timeline"
)

// uiBranches lists the branches of the workspace at root for the
// timeline, which mounts nothing and so does not list them itself.
func uiBranches(root string) func(context.Context) ([]timeline.Branch, error) {
	return func(ctx context.Context) ([]timeline.Branch, error) {
		ws, err := history.Find(root)
		if err != nil {
			return nil, err
		}
		infos, err := branch.List(ctx, ws)
		if err != nil {
			return nil, err
		}
		out := make([]timeline.Branch, 0, len(infos))
		for _, in := range infos {
			out = append(out, timeline.Branch{Dir: in.Dir, Base: in.Base, Mounted: in.Mounted, Changed: in.Changed, Merged: in.Merged, Unmerged: in.Unmerged})
		}
		return out, nil
	}
}
