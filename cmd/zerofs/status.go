package main

import (
	"fmt"

	"github.com/zerofs/zerofs/history"
)

var statusCmd = &command{
	name:    "status",
	usage:   "status",
	summary: "mounted or not, head, current step, store size",
	help: `Reads the log without taking the store's lock, so it works next to a
running zerofs.
`,
	run: runStatus,
}

func runStatus(e *env, c *command, args []string) error {
	if err := noArgs(c, args); err != nil {
		return err
	}
	st, err := history.StatusOf(e.cwd)
	if err != nil {
		return err
	}
	ws := st.Workspace
	w := e.stdout
	fmt.Fprintf(w, "workspace: %s\n", ws.Root)
	switch m := ws.Status; {
	case ws.Mounted:
		fmt.Fprintf(w, "mounted:   at %s by pid %d (workspace %s, sync %s, auto-step %s)\n",
			m.Mountpoint, m.PID, m.Workspace, m.Sync, m.AutoStep)
	case st.DaemonElsewhere > 0:
		fmt.Fprintf(w, "mounted:   elsewhere, by pid %d (run zerofs inside that mount)\n", st.DaemonElsewhere)
	default:
		fmt.Fprintf(w, "mounted:   no\n")
	}
	fmt.Fprintf(w, "head:      %d\n", st.Head)
	if st.Step.Sequence > 0 {
		fmt.Fprintf(w, "step:      %d %s\n", st.Step.Sequence, st.Step.Label)
	} else {
		fmt.Fprintf(w, "step:      none\n")
	}
	fmt.Fprintf(w, "steps:     %d\n", st.Steps)
	fmt.Fprintf(w, "store:     %s, %s (%d bytes) in %d blobs and the log\n", st.StoreName, humanBytes(st.StoreBytes), st.StoreBytes, st.Blobs)
	b := st.BlobStats
	fmt.Fprintf(w, "blobs:     %s of before-states named since %d, %s once each (dedup %s), %s stored (compression %s); %d chunks, %d packs, %d loose\n",
		humanBytes(st.NamedBytes), st.Pruned, humanBytes(b.UniqueBytes), ratio(st.NamedBytes, b.UniqueBytes),
		humanBytes(b.StoredBytes), ratio(b.UniqueBytes, b.StoredBytes), b.Chunks, b.Packs, b.Loose)
	fmt.Fprintf(w, "gc:        would free %s (%d blobs no state since %d needs)\n", humanBytes(st.Reclaimable.BytesFreed), len(st.Reclaimable.Removed), st.Pruned)
	return nil
}

// ratio is a/b as "2.31x" ("-" when b is 0).
func ratio(a, b int64) string {
	if b == 0 {
		return "-"
	}
	return fmt.Sprintf("%.2fx", float64(a)/float64(b))
}
