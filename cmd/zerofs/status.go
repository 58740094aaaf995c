package main

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"time"

	"github.com/zerofs/zerofs/daemon"
	"github.com/zerofs/zerofs/history"
	"github.com/zerofs/zerofs/internal/quote"
	"github.com/zerofs/zerofs/record"
	"github.com/zerofs/zerofs/replicate"
)

var statusCmd = &command{
	name:    "status",
	usage:   "status [--json] [--thin-after DURATION] [--ignored]",
	summary: "mounted or not, head, current step, store size",
	about: `Reads the log without taking the store's lock, so it works next to a
running zerofs. When mounted, "log:" says where the daemon's log can be read:
STORE/daemon.log, or, while an in-place mount hides the store, the daemon's
own descriptor of it (/proc/PID/fd/2, readable by its user and root).
`,
	flags: []flagDef{
		{name: "json", help: "one JSON object instead, with the fields of the text"},
		{name: "thin-after", arg: "DURATION", def: 7 * 24 * time.Hour, comp: compNone,
			help: "also say what `zerofs gc --thin-after DURATION` would\nthin and free now (default 7d; 0: do not)"},
		{name: "ignored", help: `also list the paths present that .zeroignore (and the
mount's --ignore) leave out of history: an ignored
directory once, not what is in it`},
	},
	run: runStatus,
}

func runStatus(e *env, c *command, args []string) error {
	o, pos, rest, err := c.parse(args)
	if err != nil {
		return err
	}
	asJSON := o.Bool("json")
	thinAfter := o.Duration("thin-after")
	listIgnored := o.Bool("ignored")
	if len(pos)+len(rest) > 0 {
		return usagef(c, "unexpected argument %q", append(pos, rest...)[0])
	}
	if thinAfter < 0 {
		return usagef(c, "--thin-after must be positive")
	}
	st, err := history.StatusWith(e.cwd, history.StatusOptions{ThinAfter: thinAfter})
	if err != nil {
		return err
	}
	warnBacking(e)
	var ignored []string
	if listIgnored {
		if ignored, err = ignoredPresent(st); err != nil {
			return err
		}
	}
	if asJSON {
		return writeStatusJSON(e, st, ignored, listIgnored)
	}
	ws := st.Workspace
	w := e.stdout
	fmt.Fprintf(w, "workspace: %s\n", quote.Name(ws.Root))
	switch m := ws.Status; {
	case ws.Mounted:
		fmt.Fprintf(w, "mounted:   at %s by pid %d (workspace %s, sync %s, auto-step %s)\n",
			quote.Name(m.Mountpoint), m.PID, quote.Name(m.Workspace), m.Sync, autoStepWords(m.AutoStep))
	case st.DaemonElsewhere > 0:
		fmt.Fprintf(w, "mounted:   elsewhere, by pid %d (run zerofs inside that mount)\n", st.DaemonElsewhere)
	default:
		fmt.Fprintf(w, "mounted:   no\n")
	}
	fmt.Fprintf(w, "head:      %d\n", st.Head)
	if st.Step.Sequence > 0 {
		fmt.Fprintf(w, "step:      %d %s\n", st.Step.Sequence, quote.Name(st.Step.Label))
	} else {
		fmt.Fprintf(w, "step:      none\n")
	}
	fmt.Fprintf(w, "steps:     %d\n", st.Steps)
	fmt.Fprintf(w, "store:     %s, %s (%d bytes) in %d blobs and the log\n", st.StoreName, humanBytes(st.StoreBytes), st.StoreBytes, st.Blobs)
	b := st.BlobStats
	fmt.Fprintf(w, "blobs:     %s of before-states named since %d, %s once each (dedup %s), %s stored (compression %s); %d chunks, %d packs, %d loose (%d kept)\n",
		humanBytes(st.NamedBytes), st.Pruned, humanBytes(b.UniqueBytes), ratio(st.NamedBytes, b.UniqueBytes),
		humanBytes(b.StoredBytes), ratio(b.UniqueBytes, b.StoredBytes), b.Chunks, b.Packs, b.Loose, b.Kept)
	fmt.Fprintf(w, "captures:  %s\n", st.Captures)
	writeIgnoreLines(w, st, ignored, listIgnored)
	replicationLines(w, st.Store, st.Head)
	if ws.Mounted {
		switch log, hidden := daemon.LogPath(ws.Status.Store, ws.Status.Mountpoint, ws.Status.PID); {
		case log != "" && hidden:
			fmt.Fprintf(w, "log:       %s (the daemon's %s, which the mount hides)\n", log, quote.Name(filepath.Join(ws.Status.Store, "daemon.log")))
		case log != "":
			fmt.Fprintf(w, "log:       %s\n", quote.Name(log))
		}
	}
	if ws.Mounted {
		for _, warn := range ws.Status.Warnings {
			fmt.Fprintf(w, "warning:   %s\n", warn)
		}
	}
	fmt.Fprintf(w, "gc:        would free up to %s (%s no state since %d needs)\n", humanBytes(st.Reclaimable.BytesFreed), plural(len(st.Reclaimable.Removed), "blob"), st.Pruned)
	if n := len(st.Thinned); n > 0 {
		steps := 0
		for _, iv := range st.Thinned {
			steps += int(iv.Before - iv.After - 1)
		}
		fmt.Fprintf(w, "thinned:   %s of old history keep one state a day (%s gone)\n", plural(n, "interval"), plural(steps, "sequence"))
	}
	if st.ThinAfter > 0 {
		if len(st.Thin) == 0 {
			fmt.Fprintf(w, "thin:      gc --thin-after %s would thin nothing\n", formatDuration(st.ThinAfter))
		} else {
			steps, recs := 0, 0
			for _, iv := range st.Thin {
				steps += iv.Steps
				recs += iv.Records
			}
			fmt.Fprintf(w, "thin:      gc --thin-after %s would give up the states of %s (%s) in %s and free up to %s (%s)\n",
				formatDuration(st.ThinAfter), plural(steps, "step"), plural(recs, "before-state"), plural(len(st.Thin), "interval"),
				humanBytes(st.ThinReclaimable.BytesFreed), plural(len(st.ThinReclaimable.Removed), "blob"))
		}
	}
	return nil
}

// ratio is a/b as "2.31x" ("-" when b is 0).
func ratio(a, b int64) string {
	if b == 0 {
		return "-"
	}
	return fmt.Sprintf("%.2fx", float64(a)/float64(b))
}

// autoStepWords is the daemon's auto-step setting as people write it.
func autoStepWords(s string) string {
	if d, err := time.ParseDuration(s); err == nil {
		return formatDuration(d)
	}
	return s
}

// statusJSON is `zerofs status --json`. Field names are a contract for
// scripts: add fields, never rename them.
type statusJSON struct {
	Workspace string `json:"workspace"`
	Mounted   bool   `json:"mounted"`
	// Mountpoint, PID, Sync and AutoStep describe the mount when Mounted.
	Mountpoint string `json:"mountpoint,omitempty"`
	PID        int    `json:"pid,omitempty"`
	Sync       string `json:"sync,omitempty"`
	AutoStep   string `json:"autoStep,omitempty"`
	// DaemonLog is where the mount's daemon log can be read now (status's
	// "log:" line; daemon.LogPath), when mounted.
	DaemonLog string `json:"daemonLog,omitempty"`
	// DaemonElsewhere is a daemon serving the store from another mountpoint.
	DaemonElsewhere int        `json:"daemonElsewhere,omitempty"`
	Head            record.Seq `json:"head"`
	// Step is the current step (null before the first).
	Step         *stepJSON  `json:"step"`
	Steps        int        `json:"steps"`
	Store        string     `json:"store"`
	StoreBytes   int64      `json:"storeBytes"`
	Blobs        int        `json:"blobs"`
	PrunedBefore record.Seq `json:"prunedBefore"`
	Captures     string     `json:"captures"`
	// GCWouldFree is what a gc keeping all history would free now.
	GCWouldFree int64 `json:"gcWouldFreeBytes"`
	// InBacking is true when the caller's working directory is the
	// directory under the mount (nothing changed from there is recorded).
	InBacking bool `json:"inBacking"`
	// Replica is replication's state (replica.json), when the store
	// replicates; BehindEvents how many events the replica lacks.
	Replica      *replicate.State `json:"replica,omitempty"`
	BehindEvents uint64           `json:"replicaBehindEvents,omitempty"`
	// Ignore is what .zeroignore and --ignore leave out of history (absent:
	// nothing); Ignored the paths present they match (with --ignored).
	Ignore  *record.IgnoreStatus `json:"ignore,omitempty"`
	Ignored *[]string            `json:"ignored,omitempty"`
}

type stepJSON struct {
	Sequence record.Seq `json:"sequence"`
	Label    string     `json:"label"`
}

func writeStatusJSON(e *env, st history.Status, ignored []string, listed bool) error {
	ws := st.Workspace
	out := statusJSON{
		Workspace: ws.Root, Mounted: ws.Mounted, DaemonElsewhere: st.DaemonElsewhere,
		Head: st.Head, Steps: st.Steps, Store: st.StoreName, StoreBytes: st.StoreBytes,
		Blobs: st.Blobs, PrunedBefore: st.Pruned, Captures: st.Captures,
		GCWouldFree: max(st.Reclaimable.BytesFreed, 0), InBacking: daemon.InBacking(e.cwd),
	}
	if ws.Mounted {
		m := ws.Status
		out.Mountpoint, out.PID, out.Sync, out.AutoStep = m.Mountpoint, m.PID, m.Sync, autoStepWords(m.AutoStep)
		out.DaemonLog, _ = daemon.LogPath(m.Store, m.Mountpoint, m.PID)
	}
	if ig := st.Ignore; ig.Patterns > 0 || ig.Err != "" {
		out.Ignore = &ig
	}
	if listed {
		list := append([]string{}, ignored...)
		out.Ignored = &list
	}
	if st.Step.Sequence > 0 {
		out.Step = &stepJSON{Sequence: st.Step.Sequence, Label: st.Step.Label}
	}
	if rs, err := replicate.ReadState(st.Store); err == nil {
		rs.Stalled = liveStall(rs)
		out.Replica = &rs
		if st.Head > rs.Logged {
			out.BehindEvents = uint64(st.Head - rs.Logged)
		}
	}
	enc := json.NewEncoder(e.stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(out)
}
