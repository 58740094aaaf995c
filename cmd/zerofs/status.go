package main

import (
	"encoding/json"
	"fmt"

	"github.com/zerofs/zerofs/eventlog"
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
	ws, store, err := findStore(e)
	if err != nil {
		return err
	}
	var (
		head     Seq
		steps    int
		stepSeq  Seq
		stepName string
	)
	for ev, err := range history.StoreEvents(store) {
		if err != nil {
			return err
		}
		head = ev.Seq
		switch ev.Type {
		case eventlog.TypeToolCall:
			var p struct {
				Name string `json:"name"`
			}
			json.Unmarshal(ev.Payload, &p)
			steps++
			stepSeq, stepName = ev.Seq, p.Name
		case eventlog.TypeRewind:
			stepSeq, stepName = ev.Seq, "(after rewind)"
		}
	}
	size, blobs, err := history.StoreUsage(store)
	if err != nil {
		return err
	}
	w := e.stdout
	fmt.Fprintf(w, "workspace: %s\n", ws.Root)
	if ws.Mounted {
		st := ws.Status
		// The daemon's own view is newer than the file we just read.
		if st.Step.Label != "" || st.Step.Sequence != stepSeq {
			stepSeq, stepName = st.Step.Sequence, st.Step.Label
		}
		head = st.Head
		fmt.Fprintf(w, "mounted:   at %s by pid %d (workspace %s, sync %s, auto-step %s)\n",
			st.Mountpoint, st.PID, st.Workspace, st.Sync, st.AutoStep)
	} else if pid := history.DaemonPID(ws.Store); pid > 0 {
		fmt.Fprintf(w, "mounted:   elsewhere, by pid %d (run zerofs inside that mount)\n", pid)
	} else {
		fmt.Fprintf(w, "mounted:   no\n")
	}
	fmt.Fprintf(w, "head:      %d\n", head)
	if stepSeq > 0 {
		fmt.Fprintf(w, "step:      %d %s\n", stepSeq, stepName)
	} else {
		fmt.Fprintf(w, "step:      none\n")
	}
	fmt.Fprintf(w, "steps:     %d\n", steps)
	fmt.Fprintf(w, "store:     %s, %s (%d bytes) in %d blobs and the log\n", ws.StoreName(store), humanBytes(size), size, blobs)
	return nil
}
