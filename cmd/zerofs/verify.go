package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"os"
	"path/filepath"
	"sort"
	"time"

	"github.com/zerofs/zerofs/blobstore"
	"github.com/zerofs/zerofs/eventlog"
	"github.com/zerofs/zerofs/rewind"
)

var verifyCmd = &command{
	name:    "verify",
	usage:   "verify",
	summary: "check the log and every blob; exit 1 on damage",
	help: `Checks, without changing anything, that the event log parses with
sequences 1..head, and that every blob a checkpoint still needs exists and
hashes to its name. Prints each damaged thing on its own line and exits 1,
or "ok: N events, M blobs verified". A torn tail (an append cut short by a
crash) counts as damage here; the next mount cuts it off, as it was never
acknowledged. Works mounted (reading the store beside the daemon) and not.
`,
	run: runVerify,
}

func runVerify(e *env, c *command, args []string) error {
	if err := noArgs(c, args); err != nil {
		return err
	}
	ws, store, err := findStore(e)
	if err != nil {
		return err
	}
	var progress io.Writer
	if isTerminal(e.stderr) {
		progress = e.stderr
	}
	res, err := verifyStore(store, ws.Mounted, progress)
	if err != nil {
		return err
	}
	for _, p := range res.problems {
		fmt.Fprintln(e.stdout, p)
	}
	if n := len(res.problems); n > 0 {
		return fmt.Errorf("verify: %d problem(s) in %s", n, displayStore(ws, store))
	}
	fmt.Fprintf(e.stdout, "ok: %d events, %d blobs verified\n", res.events, res.blobs)
	return nil
}

type verifyResult struct {
	events   Seq
	blobs    int
	problems []string
}

// blobUse is where a blob is needed, for naming it in a report.
type blobUse struct {
	seq  Seq // the last checkpoint naming it
	path string
}

// verifyStore checks store read-only. live says a daemon may be appending
// while we read: a tail that looks torn is then looked at again, as it may
// be a line being written.
func verifyStore(store string, live bool, progress io.Writer) (verifyResult, error) {
	var res verifyResult
	logPath := filepath.Join(store, "events.jsonl")
	head, torn, err := eventlog.Check(logPath)
	for try := 0; live && torn > 0 && err == nil && try < 5; try++ {
		time.Sleep(20 * time.Millisecond)
		head, torn, err = eventlog.Check(logPath)
	}
	var ce *eventlog.CorruptError
	switch {
	case errors.As(err, &ce):
		res.problems = append(res.problems, ce.Error())
	case err != nil:
		return res, err
	}
	if torn > 0 {
		res.problems = append(res.problems, fmt.Sprintf("torn tail of %d bytes at end of log %s", torn, logPath))
	}
	res.events = head
	var pruned Seq
	uses := map[string]blobUse{}
	for ev, err := range eventlog.ReadFile(logPath, 1) {
		if err != nil {
			if ce == nil && torn == 0 { // else already reported
				res.problems = append(res.problems, err.Error())
			}
			break
		}
		if ev.Seq > head {
			break
		}
		// Records zerofs never writes (a path leading out of the
		// workspace, an unknown kind, a bad blob id) are damage: the
		// mount refuses such a log.
		if err := rewind.CheckEvent(logPath, ev); err != nil {
			res.problems = append(res.problems, err.Error())
			continue
		}
		switch ev.Type {
		case eventlog.TypeHistoryPruned:
			var p rewind.PrunedPayload
			if json.Unmarshal(ev.Payload, &p) == nil && p.Before > pruned {
				pruned = p.Before
			}
		case eventlog.TypeCheckpoint:
			var cp rewind.Checkpoint
			if err := json.Unmarshal(ev.Payload, &cp); err != nil {
				res.problems = append(res.problems, fmt.Sprintf("event %d: bad checkpoint payload: %v", ev.Seq, err))
				continue
			}
			for _, f := range cp.Files {
				if f.Blob != "" {
					uses[f.Blob] = blobUse{seq: ev.Seq, path: f.Path}
				}
			}
		}
	}
	if ce == nil && torn == 0 {
		events := func(from Seq) iter.Seq2[eventlog.Event, error] { return eventlog.ReadFile(logPath, from) }
		if err := rewind.CheckIntentFile(store, head, pruned, events); err != nil {
			res.problems = append(res.problems, err.Error())
		}
	}
	// gc keeps only the blobs that states at or after its cut need: those
	// named by checkpoints after it.
	ids := make([]string, 0, len(uses))
	for id, u := range uses {
		if u.seq > pruned {
			ids = append(ids, id)
		}
	}
	sort.Strings(ids)
	blobDir := filepath.Join(store, "blobs")
	var bs *blobstore.Store
	if _, err := os.Stat(blobDir); err == nil {
		if bs, err = blobstore.Open(blobDir, blobstore.Options{}); err != nil {
			return res, err
		}
	}
	last := time.Now()
	for i, s := range ids {
		u := uses[s]
		where := fmt.Sprintf("%s at sequence %d", u.path, u.seq)
		if progress != nil && time.Since(last) > 100*time.Millisecond {
			fmt.Fprintf(progress, "\rverifying blobs: %d/%d", i, len(ids))
			last = time.Now()
		}
		id, err := blobstore.ParseID(s)
		if err != nil {
			res.problems = append(res.problems, fmt.Sprintf("bad blob id %q (%s)", s, where))
			continue
		}
		if bs == nil {
			res.problems = append(res.problems, fmt.Sprintf("missing blob %s (%s)", s, where))
			continue
		}
		switch err := bs.Verify(id); {
		case errors.Is(err, blobstore.ErrNotFound):
			res.problems = append(res.problems, fmt.Sprintf("missing blob %s (%s)", s, where))
		case errors.Is(err, blobstore.ErrCorrupt):
			res.problems = append(res.problems, fmt.Sprintf("corrupt blob %s (%s): %v", s, where, err))
		case err != nil:
			res.problems = append(res.problems, fmt.Sprintf("unreadable blob %s (%s): %v", s, where, err))
		default:
			res.blobs++
		}
	}
	if progress != nil && len(ids) > 0 {
		fmt.Fprintf(progress, "\r%*s\r", 40, "")
	}
	return res, nil
}

// checkedEvents passes on events, checked as Open checks them: the file
// is read again, and what was written to it since the daemon checked it
// is untrusted too. It stops at the first damaged one with its error.
func checkedEvents(path string, events iter.Seq2[eventlog.Event, error]) iter.Seq2[eventlog.Event, error] {
	return func(yield func(eventlog.Event, error) bool) {
		for ev, err := range events {
			if err == nil {
				err = rewind.CheckEvent(path, ev)
			}
			if !yield(ev, err) || err != nil {
				return
			}
		}
	}
}
