package history

import (
	"errors"
	"fmt"
	"iter"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/zerofs/zerofs/blobstore"
	"github.com/zerofs/zerofs/eventlog"
	"github.com/zerofs/zerofs/internal/quote"
	"github.com/zerofs/zerofs/record"
	"github.com/zerofs/zerofs/rewind"
)

// FindingKind says what Verify found wrong.
type FindingKind string

// The kinds of damage.
const (
	// FindingCorruptLog: a line that does not parse, a sequence gap, ...
	// (Err is the *eventlog.CorruptError, naming the line).
	FindingCorruptLog FindingKind = "corrupt log"
	// FindingTornTail: bytes after the last whole line (an append cut short
	// by a crash; the next mount cuts them off).
	FindingTornTail FindingKind = "torn tail"
	// FindingBadPayload: a checkpoint whose payload does not parse.
	FindingBadPayload FindingKind = "bad checkpoint"
	// FindingBadRecord: a record zerofs never writes (a path leading out
	// of the workspace, an unknown kind, a bad blob id): the mount refuses
	// such a log (Err is rewind.CheckEvent's, naming the line).
	FindingBadRecord FindingKind = "bad record"
	// FindingBadIntent: a rewind intent the log contradicts (Err is
	// rewind.CheckIntentFile's).
	FindingBadIntent FindingKind = "bad intent"
	// FindingBadBlobID: a checkpoint names a blob that is no sha256.
	FindingBadBlobID FindingKind = "bad blob id"
	// FindingMissingBlob, FindingCorruptBlob, FindingUnreadableBlob: a blob
	// a kept state needs is gone, does not hash to its name, or cannot be
	// read.
	FindingMissingBlob    FindingKind = "missing blob"
	FindingCorruptBlob    FindingKind = "corrupt blob"
	FindingUnreadableBlob FindingKind = "unreadable blob"
	// FindingDamagedChunk: a chunk of a chunked blob is damaged or
	// missing; Chunk names it and Affected every needed blob that holds
	// it, with its path.
	FindingDamagedChunk FindingKind = "damaged chunk"
	// FindingDamagedPack: a range of a pack file holds no valid record
	// (Err is a *blobstore.Damage description); the blobs that were there
	// are reported missing.
	FindingDamagedPack FindingKind = "damaged pack"
	// FindingMissingStash: a removed file's record names a stash not yet
	// named (blobstore/stash.go) that the store does not hold as a regular
	// file: the next mount would record that before-state as lost.
	FindingMissingStash FindingKind = "missing stash"
)

// A Finding is one damaged thing in a store.
type Finding struct {
	Kind FindingKind
	// Seq is the event concerned (for a blob, the last checkpoint naming
	// it); 0 when none.
	Seq record.Seq
	// Path is the workspace path a blob or checkpoint entry is for.
	Path string
	// Blob is the blob id concerned, as the log spells it.
	Blob string
	// Bytes is a torn tail's length; Log the log's path.
	Bytes int64
	Log   string
	// Err is the underlying error, when there is one.
	Err error
	// Chunk is the damaged chunk (FindingDamagedChunk); Affected lists
	// each needed blob holding it as "BLOB (PATH at sequence SEQ)".
	Chunk    string
	Affected []string
}

// Error is the finding as one line, as `zerofs verify` prints it.
func (f Finding) Error() string {
	where := fmt.Sprintf("%s at sequence %d", quote.Name(f.Path), f.Seq)
	switch f.Kind {
	case FindingCorruptLog, FindingBadRecord, FindingBadIntent:
		return f.Err.Error()
	case FindingTornTail:
		return fmt.Sprintf("torn tail of %d bytes at end of log %s", f.Bytes, f.Log)
	case FindingBadPayload:
		return fmt.Sprintf("event %d: bad checkpoint payload: %v", f.Seq, f.Err)
	case FindingBadBlobID:
		return fmt.Sprintf("bad blob id %q (%s)", f.Blob, where)
	case FindingCorruptBlob, FindingUnreadableBlob:
		return fmt.Sprintf("%s %s (%s): %v", f.Kind, f.Blob, where, f.Err)
	case FindingMissingBlob:
		return fmt.Sprintf("missing blob %s (%s)", f.Blob, where)
	case FindingDamagedChunk:
		return fmt.Sprintf("damaged chunk %s of blob %s (%s): %v; it is part of %d blob(s): %s",
			f.Chunk, f.Blob, where, f.Err, len(f.Affected), strings.Join(f.Affected, ", "))
	case FindingDamagedPack:
		return fmt.Sprintf("damaged pack: %v", f.Err)
	case FindingMissingStash:
		return fmt.Sprintf("missing stash %s (%s)", f.Blob, where)
	}
	if f.Err != nil {
		return fmt.Sprintf("%s: %v", f.Kind, f.Err)
	}
	return string(f.Kind)
}

func (f Finding) Unwrap() error { return f.Err }

// VerifyResult is what Verify checked and found.
type VerifyResult struct {
	Events   record.Seq // the log's head
	Blobs    int        // blobs verified whole
	Findings []Finding
}

// VerifyOptions configure Verify.
type VerifyOptions struct {
	// Live says a daemon holds the log and may be appending while it is
	// read: an incomplete last line is then a line being written, not a
	// torn tail (eventlog.CheckLive).
	Live bool
	// Progress, when set, is called now and then with the blobs checked
	// so far and their number.
	Progress func(done, total int)
}

// Verify checks store read-only: the log parses with sequences 1..head,
// and every blob a kept state needs exists and hashes to its name. Damage
// is returned as findings; an error means the check itself failed.
func Verify(store string, opts VerifyOptions) (VerifyResult, error) {
	var res VerifyResult
	logPath := filepath.Join(store, record.LogName)
	check := eventlog.Check
	if opts.Live {
		check = eventlog.CheckLive
	}
	head, torn, err := check(logPath)
	var ce *eventlog.CorruptError
	switch {
	case errors.As(err, &ce):
		res.Findings = append(res.Findings, Finding{Kind: FindingCorruptLog, Seq: record.Seq(ce.Line), Log: logPath, Err: ce})
	case err != nil:
		return res, err
	}
	if torn > 0 {
		res.Findings = append(res.Findings, Finding{Kind: FindingTornTail, Bytes: torn, Log: logPath})
	}
	res.Events = head
	type use struct {
		seq  record.Seq // the last checkpoint naming it
		path string
	}
	var pruned record.Seq
	uses := map[string]use{}
	// ret folds the log as the engine's index does: only the before-states
	// that survive gc's cuts and thins need their blobs.
	ret := rewind.NewRetention()
	for ev, err := range eventlog.ReadFile(logPath, 1) {
		if err != nil {
			if ce == nil && torn == 0 { // else already reported
				res.Findings = append(res.Findings, Finding{Kind: FindingCorruptLog, Log: logPath, Err: err})
			}
			break
		}
		if ev.Seq > head {
			break
		}
		if err := record.CheckEvent(logPath, ev); err != nil {
			res.Findings = append(res.Findings, Finding{Kind: FindingBadRecord, Seq: ev.Seq, Log: logPath, Err: err})
			continue
		}
		if err := ret.Add(ev); err != nil {
			res.Findings = append(res.Findings, Finding{Kind: FindingBadPayload, Seq: ev.Seq, Err: err})
		}
	}
	pruned = ret.Pruned()
	ret.Records(func(seq record.Seq, st record.FileState) {
		if st.Blob != "" && seq > uses[st.Blob].seq {
			uses[st.Blob] = use{seq: seq, path: st.Path}
		}
	})
	if ce == nil && torn == 0 {
		events := func(from record.Seq) iter.Seq2[record.Event, error] { return eventlog.ReadFile(logPath, from) }
		if err := rewind.CheckIntentFile(store, head, pruned, events); err != nil {
			res.Findings = append(res.Findings, Finding{Kind: FindingBadIntent, Log: logPath, Err: err})
		}
	}
	// gc keeps only the blobs that states at or after its cut need: those
	// named by the before-states after it that no thin dropped.
	ids := make([]string, 0, len(uses))
	for id := range uses {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	blobDir := filepath.Join(store, rewind.BlobsName)
	var bs *blobstore.Store
	if _, err := os.Stat(blobDir); err == nil {
		if bs, err = blobstore.Open(blobDir, blobstore.Options{ReadOnly: true}); err != nil {
			return res, err
		}
		defer bs.Close()
		for _, d := range bs.Damaged() {
			res.Findings = append(res.Findings, Finding{Kind: FindingDamagedPack,
				Err: fmt.Errorf("pack %s: bytes %d..%d hold no valid record", d.Pack, d.Off, d.End)})
		}
	}
	// A record not yet named names its stash, which the next mount names.
	// (A live daemon may have named it and removed the stash since the log
	// was read: not checked then.)
	if !opts.Live {
		for _, u := range ret.Unnamed() {
			if bs == nil || !bs.HasStash(u.Kept) {
				res.Findings = append(res.Findings, Finding{Kind: FindingMissingStash, Seq: u.Seq, Path: u.Path, Blob: u.Kept})
			}
		}
	}
	// chunkUsers says which needed blobs hold each chunk, built at the
	// first damaged chunk, to name everything a damaged chunk affects.
	var chunkUsers map[blobstore.ID][]string
	users := func(chunk blobstore.ID) []string {
		if chunkUsers == nil {
			chunkUsers = map[blobstore.ID][]string{}
			for _, s := range ids {
				if id, err := blobstore.ParseID(s); err == nil {
					cs, _ := bs.Chunks(id)
					for _, c := range cs {
						chunkUsers[c] = append(chunkUsers[c], s)
					}
				}
			}
		}
		var out []string
		for _, b := range chunkUsers[chunk] {
			out = append(out, fmt.Sprintf("%s (%s at sequence %d)", b, quote.Name(uses[b].path), uses[b].seq))
		}
		return out
	}
	for i, s := range ids {
		u := uses[s]
		f := Finding{Seq: u.seq, Path: u.path, Blob: s}
		if opts.Progress != nil {
			opts.Progress(i, len(ids))
		}
		id, err := blobstore.ParseID(s)
		switch {
		case err != nil:
			f.Kind, f.Err = FindingBadBlobID, err
		case bs == nil:
			f.Kind = FindingMissingBlob
		default:
			var chErr *blobstore.ChunkError
			switch err := bs.Verify(id); {
			case errors.As(err, &chErr):
				f.Kind, f.Err, f.Chunk = FindingDamagedChunk, chErr.Err, chErr.Chunk.String()
				f.Affected = users(chErr.Chunk)
			case errors.Is(err, blobstore.ErrNotFound):
				f.Kind = FindingMissingBlob
			case errors.Is(err, blobstore.ErrCorrupt):
				f.Kind, f.Err = FindingCorruptBlob, err
			case err != nil:
				f.Kind, f.Err = FindingUnreadableBlob, err
			default:
				res.Blobs++
				continue
			}
		}
		res.Findings = append(res.Findings, f)
	}
	if opts.Progress != nil {
		opts.Progress(len(ids), len(ids))
	}
	return res, nil
}
