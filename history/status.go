package history

import (
	"encoding/json"

	"github.com/zerofs/zerofs/blobstore"
	"github.com/zerofs/zerofs/control"
	"github.com/zerofs/zerofs/eventlog"
	"github.com/zerofs/zerofs/rewind"
)

// Status is a workspace's state at a glance, read without taking the
// store's lock (so beside a running daemon).
type Status struct {
	Workspace *Workspace
	// Store is where the store was read; StoreName how the user knows it.
	Store, StoreName string
	// DaemonElsewhere is the pid of a daemon serving the store from another
	// mountpoint, when the workspace is not mounted here (0: none).
	DaemonElsewhere int
	Head            Seq
	// Step is the current step (sequence 0: none yet); "(after rewind)"
	// labels the implicit step after a rewind.
	Step  control.StepReport
	Steps int // tool_call events
	// StoreBytes is the log's and the blobs' size, in Blobs blobs.
	StoreBytes int64
	Blobs      int
	// Pruned is the start of history (the last gc's cut).
	Pruned Seq
	// NamedBytes is what the before-states the log names after the cut
	// would take stored whole, each time; the store's figures (content
	// kept once, compressed) are in Store; Reclaimable is what a gc
	// keeping all history would free (blobs no state needs).
	NamedBytes  int64
	BlobStats   blobstore.Stats
	Reclaimable blobstore.PruneResult
}

// StepAfterRewind labels the current step after a rewind ended the last.
const StepAfterRewind = "(after rewind)"

// StatusOf reads the status of the workspace around dir.
func StatusOf(dir string) (Status, error) {
	ws, err := Find(dir)
	if err != nil {
		return Status{}, err
	}
	store, err := ws.StoreDir()
	if err != nil {
		return Status{}, err
	}
	st := Status{Workspace: ws, Store: store, StoreName: ws.StoreName(store)}
	// named: the last checkpoint naming each blob; logical: per
	// checkpoint, the bytes of the before-states it names.
	named := map[blobstore.ID]Seq{}
	logical := map[Seq]int64{}
	for ev, err := range StoreEvents(store) {
		if err != nil {
			return Status{}, err
		}
		st.Head = ev.Seq
		switch ev.Type {
		case eventlog.TypeToolCall:
			var p struct {
				Name string `json:"name"`
			}
			json.Unmarshal(ev.Payload, &p)
			st.Steps++
			st.Step = control.StepReport{Sequence: ev.Seq, Label: p.Name}
		case eventlog.TypeRewind:
			st.Step = control.StepReport{Sequence: ev.Seq, Label: StepAfterRewind}
		case eventlog.TypeHistoryPruned:
			var p rewind.PrunedPayload
			if json.Unmarshal(ev.Payload, &p) == nil && p.Before > st.Pruned {
				st.Pruned = p.Before
			}
		case eventlog.TypeCheckpoint:
			var cp rewind.Checkpoint
			if json.Unmarshal(ev.Payload, &cp) != nil {
				continue
			}
			for _, f := range cp.Files {
				if id, err := blobstore.ParseID(f.Blob); err == nil {
					named[id] = ev.Seq
					logical[ev.Seq] += f.Bytes
				}
			}
		}
	}
	for s, n := range logical {
		if s > st.Pruned {
			st.NamedBytes += n
		}
	}
	bs, logBytes, would, err := StoreFigures(store, func(id blobstore.ID) bool { return named[id] > st.Pruned })
	if err != nil {
		return Status{}, err
	}
	st.StoreBytes, st.Blobs, st.BlobStats, st.Reclaimable = bs.DiskBytes+logBytes, bs.Blobs, bs, would
	if ws.Mounted {
		// The daemon's own view is newer than the file just read.
		if ws.Status.Step.Label != "" || ws.Status.Step.Sequence != st.Step.Sequence {
			st.Step = ws.Status.Step
		}
		st.Head = ws.Status.Head
	} else {
		st.DaemonElsewhere = DaemonPID(ws.Store)
	}
	return st, nil
}
