package history

import (
	"encoding/json"
	"os"
	"syscall"
	"time"

	"github.com/zerofs/zerofs/blobstore"
	"github.com/zerofs/zerofs/control"
	"github.com/zerofs/zerofs/record"
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
	Head            record.Seq
	// Step is the current step (sequence 0: none yet); "(after rewind)"
	// labels the implicit step after a rewind.
	Step  control.StepReport
	Steps int // tool_call events
	// StoreBytes is the log's and the blobs' size, in Blobs blobs.
	StoreBytes int64
	Blobs      int
	// Pruned is the start of history (the last gc's cut).
	Pruned record.Seq
	// NamedBytes is what the before-states the log names after the cut
	// would take stored whole, each time; the store's figures (content
	// kept once, compressed) are in Store; Reclaimable is what a gc
	// keeping all history would free (blobs no state needs).
	NamedBytes  int64
	BlobStats   blobstore.Stats
	Reclaimable blobstore.PruneResult
	// Thinned is the intervals of states gc thinned away.
	Thinned []record.ThinInterval
	// ThinAfter is StatusOptions.ThinAfter; when > 0, Thin is what `gc
	// --thin-after ThinAfter` would thin now (nil: nothing) and
	// ThinReclaimable what that gc would free.
	ThinAfter       time.Duration
	Thin            []record.ThinInterval
	ThinReclaimable blobstore.PruneResult
	// Captures is how removed files are captured: rewind.CaptureLink, or
	// "copy: " and why (the running daemon's word when mounted).
	Captures string
	// Ignore is what .zeroignore (and, mounted, --ignore) leave out of
	// history: the daemon's word when mounted, else .zeroignore's.
	Ignore record.IgnoreStatus
}

// StatusOptions select what StatusWith computes besides the basics.
type StatusOptions struct {
	// ThinAfter, when > 0: also what a gc thinning the history older than
	// it would give up and free (Status.Thin, ThinReclaimable).
	ThinAfter time.Duration
}

// StepAfterRewind labels the current step after a rewind ended the last.
const StepAfterRewind = "(after rewind)"

// StatusOf reads the status of the workspace around dir.
func StatusOf(dir string) (Status, error) { return StatusWith(dir, StatusOptions{}) }

// StatusWith reads the status of the workspace around dir, with what opts
// asks for.
func StatusWith(dir string, opts StatusOptions) (Status, error) {
	ws, err := Find(dir)
	if err != nil {
		return Status{}, err
	}
	store, err := ws.StoreDir()
	if err != nil {
		return Status{}, err
	}
	st := Status{Workspace: ws, Store: store, StoreName: ws.StoreName(store), ThinAfter: opts.ThinAfter}
	// ret folds the log as the engine's index does: which before-states
	// survive gc's cuts and thins. thinCut is the state current ThinAfter
	// ago (KeepCut).
	ret := rewind.NewRetention()
	thinCut, cutFound := record.Seq(0), false
	since := time.Now().Add(-opts.ThinAfter)
	for ev, err := range StoreEvents(store) {
		if err != nil {
			return Status{}, err
		}
		st.Head = ev.Seq
		if !cutFound && ev.CreatedAt.After(since) {
			thinCut, cutFound = ev.Seq-1, true
		}
		ret.Add(ev) // a damaged event folds in nothing: verify reports it
		switch ev.Type {
		case record.TypeToolCall:
			var p struct {
				Name string `json:"name"`
			}
			json.Unmarshal(ev.Payload, &p)
			st.Steps++
			st.Step = control.StepReport{Sequence: ev.Seq, Label: p.Name}
		case record.TypeRewind:
			st.Step = control.StepReport{Sequence: ev.Seq, Label: StepAfterRewind}
		}
	}
	if !cutFound {
		thinCut = st.Head
	}
	st.Pruned, st.Thinned = ret.Pruned(), ret.Thinned()
	needed := func() map[blobstore.ID]bool {
		keep := map[blobstore.ID]bool{}
		ret.Records(func(_ record.Seq, f record.FileState) {
			if id, err := blobstore.ParseID(f.Blob); err == nil {
				keep[id] = true
			}
		})
		return keep
	}
	ret.Records(func(_ record.Seq, f record.FileState) {
		if f.Blob != "" {
			st.NamedBytes += f.Bytes
		}
	})
	keep := needed()
	bs, logBytes, would, err := StoreFigures(store, func(id blobstore.ID) bool { return keep[id] })
	if err != nil {
		return Status{}, err
	}
	st.StoreBytes, st.Blobs, st.BlobStats, st.Reclaimable = bs.DiskBytes+logBytes, bs.Blobs, bs, would
	if opts.ThinAfter > 0 {
		st.Thin = ret.Thin(thinCut)
		keep := needed()
		if _, _, st.ThinReclaimable, err = StoreFigures(store, func(id blobstore.ID) bool { return keep[id] }); err != nil {
			return Status{}, err
		}
	}
	st.Captures = captureMode(ws.Root, store)
	if ws.Mounted {
		if ws.Status.Captures != "" {
			st.Captures = ws.Status.Captures
		}
		if ws.Status.Ignore != nil {
			st.Ignore = *ws.Status.Ignore
		}
		// The daemon's own view is newer than the file just read.
		if ws.Status.Step.Label != "" || ws.Status.Step.Sequence != st.Step.Sequence {
			st.Step = ws.Status.Step
		}
		st.Head = ws.Status.Head
	} else {
		st.DaemonElsewhere = DaemonPID(ws.Store)
		if root, err := os.Open(ws.Root); err == nil {
			st.Ignore = rewind.ReadIgnore(root)
			root.Close()
		}
	}
	return st, nil
}

// captureMode is how a mount of the workspace at root with its store at
// store captures removed files: linked when both are on one filesystem.
func captureMode(root, store string) string {
	a, errA := os.Stat(root)
	b, errB := os.Stat(store)
	if errA != nil || errB != nil {
		return rewind.CaptureLink
	}
	sa, okA := a.Sys().(*syscall.Stat_t)
	sb, okB := b.Sys().(*syscall.Stat_t)
	if okA && okB && sa.Dev != sb.Dev {
		return "copy: " + rewind.CopyOtherFS
	}
	return rewind.CaptureLink
}
