package replicate

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"

	"golang.org/x/sys/unix"

	"github.com/zerofs/zerofs/blobstore"
	"github.com/zerofs/zerofs/eventlog"
	"github.com/zerofs/zerofs/internal/wsdir"
	"github.com/zerofs/zerofs/rewind"
)

// RestoreOptions say which state to restore.
type RestoreOptions struct {
	// At is the state to write (when HasAt; else the newest the replica
	// offers).
	At    eventlog.Seq
	HasAt bool
	// Logger for the restored engine's notes. Default slog.Default().
	Logger *slog.Logger
	// Key is the replica key the replica was written with (nil: none).
	Key []byte
}

// RestoreResult is what a restore wrote.
type RestoreResult struct {
	Dir string `json:"dir"`
	URL string `json:"url"`
	// Sequence is the state written; History the last event of the
	// replicated history the new store holds (its newest base).
	Sequence eventlog.Seq `json:"sequence"`
	History  eventlog.Seq `json:"history"`
	// Files to Bytes count the newest base's tree as written; Rewound
	// what the rewind to Sequence then did (nil when Sequence is History).
	Rewound  *rewind.Report `json:"rewound,omitempty"`
	Files    int            `json:"files"`
	Dirs     int            `json:"dirs"`
	Symlinks int            `json:"symlinks"`
	Bytes    int64          `json:"bytes"`
	Blobs    int            `json:"blobs"`
	Skipped  []string       `json:"skipped"`
}

// ErrNoState: the replica offers no such state (or none at all yet).
var ErrNoState = errors.New("replicate: no such state in the replica")

// maxDecoded bounds a segment's or base's decoded size.
const maxDecoded = 1 << 30

// Restore writes the state at opts.At of the replica u into dir, a new
// directory (its parent must exist), with a store (dir/.zero) holding the
// replicated history up to the newest base: so `zerofs mount dir` has
// every @T the replica has. The newest base's state is written first; a
// state before it is then reached by a rewind, recorded in the new
// store's log like any other. Everything is written beneath one directory
// descriptor; on failure nothing is left.
func Restore(ctx context.Context, b Bucket, u URL, dir string, opts RestoreOptions) (RestoreResult, error) {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	c, err := newCodec(opts.Key)
	if err != nil {
		return RestoreResult{}, err
	}
	lease, err := readLease(ctx, b, u)
	if errors.Is(err, ErrNotFound) {
		return RestoreResult{}, fmt.Errorf("%w: %s holds no replica (no %s)", ErrNoState, u, leaseName)
	}
	if err != nil {
		return RestoreResult{}, err
	}
	if err := checkKey(u, lease, c.keyCheck()); err != nil {
		return RestoreResult{}, err
	}
	segs, bases, err := listReplica(ctx, b)
	if err != nil {
		return RestoreResult{}, err
	}
	run, end := chain(segs)
	var base baseRef
	found := false
	for _, br := range bases {
		if br.Seq <= end && (!found || br.Seq > base.Seq) {
			base, found = br, true
		}
	}
	if !found {
		return RestoreResult{}, fmt.Errorf("%w: %s holds no restorable state yet (no base)", ErrNoState, u)
	}
	at := base.Seq
	if opts.HasAt {
		if opts.At > base.Seq {
			return RestoreResult{}, fmt.Errorf("%w: %s offers states up to %d; %d is beyond them", ErrNoState, u, base.Seq, opts.At)
		}
		at = opts.At
	}
	bs, err := fetchBase(ctx, b, c, base)
	if err != nil {
		return RestoreResult{}, err
	}

	abs, err := filepath.Abs(dir)
	if err != nil {
		return RestoreResult{}, err
	}
	root, err := wsdir.Create(abs)
	if err != nil {
		return RestoreResult{}, fmt.Errorf("replicate: restore: %w", err)
	}
	res := RestoreResult{Dir: abs, URL: u.String(), Sequence: at, History: base.Seq, Skipped: []string{}}
	fail := func(err error) (RestoreResult, error) {
		wsdir.RemoveBeneath(root.Fd())
		var st, now unix.Stat_t
		if unix.Fstat(root.Fd(), &st) == nil && unix.Lstat(abs, &now) == nil && st.Dev == now.Dev && st.Ino == now.Ino {
			unix.Rmdir(abs)
		}
		root.Close()
		return RestoreResult{}, err
	}
	if err := unix.Mkdirat(root.Fd(), rewind.StoreName, 0o700); err != nil {
		return fail(err)
	}
	sfd, err := root.Open(rewind.StoreName, unix.O_RDONLY|unix.O_DIRECTORY)
	if err != nil {
		return fail(err)
	}
	defer unix.Close(sfd)
	store := "/proc/self/fd/" + strconv.Itoa(sfd)

	need, cut, err := writeLog(ctx, b, c, run, base.Seq, sfd)
	if err != nil {
		return fail(err)
	}
	blobs, err := blobstore.Open(filepath.Join(store, rewind.BlobsName), blobstore.Options{})
	if err != nil {
		return fail(err)
	}
	for _, e := range bs.Files {
		if e.Kind == rewind.KindFile && !e.Skipped {
			id, _ := blobstore.ParseID(e.Blob)
			need[id] = ^eventlog.Seq(0)
		}
	}
	for id, seq := range need {
		err := fetchBlob(ctx, b, c, blobs, id)
		if errors.Is(err, ErrNotFound) && seq < cut {
			continue // history a gc cut: no state needs it
		}
		if err != nil {
			blobs.Close()
			return fail(err)
		}
		res.Blobs++
	}
	if err := blobs.Sync(); err != nil {
		blobs.Close()
		return fail(err)
	}
	w := &treeWriter{root: root, res: &res}
	for _, e := range bs.Files {
		if e.Skipped {
			res.Skipped = append(res.Skipped, e.Path)
			continue
		}
		var content *blobstore.Reader
		if e.Kind == rewind.KindFile {
			id, _ := blobstore.ParseID(e.Blob)
			if content, err = blobs.Open(id); err != nil {
				blobs.Close()
				return fail(err)
			}
		}
		var werr error
		if content != nil {
			werr = w.write(e, content)
			content.Close()
		} else {
			werr = w.write(e, nil)
		}
		if werr != nil {
			blobs.Close()
			return fail(werr)
		}
	}
	if err := blobs.Close(); err != nil {
		return fail(err)
	}
	if err := w.finish(bs.Root); err != nil {
		return fail(err)
	}
	// The engine checks every event as it opens the store (a damaged log
	// is refused), and takes the workspace back to at.
	rfd, err := unix.Dup(root.Fd())
	if err != nil {
		return fail(err)
	}
	rf := os.NewFile(uintptr(rfd), abs)
	defer rf.Close()
	eng, err := rewind.Open(ctx, rf, rewind.Options{StoreDir: store, Sync: true, Logger: opts.Logger})
	if err != nil {
		return fail(fmt.Errorf("replicate: restore: the replicated history: %w", err))
	}
	if at < base.Seq {
		rr, err := eng.Rewind(ctx, at)
		if err != nil {
			eng.Close()
			return fail(fmt.Errorf("replicate: restore: rewind to %d: %w", at, err))
		}
		res.Rewound = &rr.Report
	}
	if err := eng.Close(); err != nil {
		return fail(err)
	}
	root.Close()
	return res, nil
}

// fetchBase reads and checks a base.
func fetchBase(ctx context.Context, b Bucket, c *codec, ref baseRef) (Base, error) {
	body, err := b.Get(ctx, ref.Name)
	if err != nil {
		return Base{}, err
	}
	if hashHex(body) != ref.Hash {
		return Base{}, &DamageError{Object: ref.Name, Why: "its bytes do not hash to its name"}
	}
	raw, err := c.open(ref.Name, baseLogical(ref.Seq), body, maxDecoded)
	if err != nil {
		return Base{}, err
	}
	var bs Base
	if err := json.Unmarshal(raw, &bs); err != nil {
		return Base{}, &DamageError{Object: ref.Name, Why: err.Error()}
	}
	if bs.Sequence != ref.Seq || bs.Format != 1 {
		return Base{}, &DamageError{Object: ref.Name, Why: fmt.Sprintf("it says sequence %d, format %d", bs.Sequence, bs.Format)}
	}
	dirs := map[string]bool{"": true}
	for _, e := range bs.Files {
		p := e.name()
		if err := rewind.CleanPath(p); err != nil || p == "" {
			return Base{}, &DamageError{Object: ref.Name, Why: fmt.Sprintf("path %q: not a clean workspace path", p)}
		}
		parent, _ := wsdir.Split(p)
		if !dirs[parent] || dirs[p] {
			return Base{}, &DamageError{Object: ref.Name, Why: fmt.Sprintf("path %q: its directory is not listed before it, or it is listed twice", p)}
		}
		if e.Mode > 0o7777 {
			return Base{}, &DamageError{Object: ref.Name, Why: fmt.Sprintf("path %q: mode %#o", p, e.Mode)}
		}
		if e.Skipped {
			continue
		}
		switch e.Kind {
		case rewind.KindDir:
			dirs[p] = true
		case rewind.KindFile:
			if _, err := blobstore.ParseID(e.Blob); err != nil {
				return Base{}, &DamageError{Object: ref.Name, Why: fmt.Sprintf("path %q: %v", p, err)}
			}
		case rewind.KindSymlink:
			if e.target() == "" {
				return Base{}, &DamageError{Object: ref.Name, Why: fmt.Sprintf("symlink %q without a target", p)}
			}
		default:
			return Base{}, &DamageError{Object: ref.Name, Why: fmt.Sprintf("path %q: kind %q", p, e.Kind)}
		}
	}
	return bs, nil
}

// writeLog writes events 1..upto from the segments of run into the
// store's events.jsonl (beneath sfd) and returns the blobs their
// checkpoints name (with the first event naming each) and the gc cut the
// history ends with. Each segment must hash to its name and hold exactly
// the sequences it names, in order.
func writeLog(ctx context.Context, b Bucket, c *codec, run []segment, upto eventlog.Seq, sfd int) (map[blobstore.ID]eventlog.Seq, eventlog.Seq, error) {
	fd, err := unix.Openat(sfd, rewind.LogName, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return nil, 0, err
	}
	f := os.NewFile(uintptr(fd), rewind.LogName)
	defer f.Close()
	need := map[blobstore.ID]eventlog.Seq{}
	var cut, next eventlog.Seq = 0, 1
	for _, s := range run {
		if next > upto {
			break
		}
		body, err := b.Get(ctx, s.Name)
		if err != nil {
			return nil, 0, err
		}
		if hashHex(body) != s.Hash {
			return nil, 0, &DamageError{Object: s.Name, Why: "its bytes do not hash to its name"}
		}
		raw, err := c.open(s.Name, segmentLogical(s.First, s.Last), body, maxDecoded)
		if err != nil {
			return nil, 0, err
		}
		want := s.First
		for len(raw) > 0 {
			i := bytes.IndexByte(raw, '\n')
			if i < 0 {
				return nil, 0, &DamageError{Object: s.Name, Why: "its last line has no newline"}
			}
			line := raw[:i+1]
			raw = raw[i+1:]
			var ev struct {
				Seq     eventlog.Seq    `json:"sequence"`
				Type    string          `json:"type"`
				Payload json.RawMessage `json:"payload"`
			}
			if err := json.Unmarshal(line, &ev); err != nil || ev.Seq != want {
				return nil, 0, &DamageError{Object: s.Name, Why: fmt.Sprintf("line of sequence %d: not the event it should be (%v)", want, err)}
			}
			want++
			if ev.Seq < next || ev.Seq > upto {
				continue // overlap with the segment before, or past the base
			}
			switch ev.Type {
			case eventlog.TypeCheckpoint:
				var cp rewind.Checkpoint
				if err := json.Unmarshal(ev.Payload, &cp); err != nil {
					return nil, 0, &DamageError{Object: s.Name, Why: fmt.Sprintf("event %d: %v", ev.Seq, err)}
				}
				for _, fs := range cp.Files {
					if fs.Blob == "" {
						continue
					}
					id, err := blobstore.ParseID(fs.Blob)
					if err != nil {
						return nil, 0, &DamageError{Object: s.Name, Why: fmt.Sprintf("event %d: %v", ev.Seq, err)}
					}
					if _, ok := need[id]; !ok {
						need[id] = ev.Seq
					}
				}
			case eventlog.TypeHistoryPruned:
				var pp rewind.PrunedPayload
				if json.Unmarshal(ev.Payload, &pp) == nil && pp.Before > cut {
					cut = pp.Before
				}
			}
			if _, err := f.Write(line); err != nil {
				return nil, 0, err
			}
			next = ev.Seq + 1
		}
		if want != s.Last+1 {
			return nil, 0, &DamageError{Object: s.Name, Why: fmt.Sprintf("it ends at sequence %d, its name says %d", want-1, s.Last)}
		}
	}
	if next != upto+1 {
		return nil, 0, fmt.Errorf("%w: the replica's log ends at %d, before its base at %d", ErrNoState, next-1, upto)
	}
	if err := f.Sync(); err != nil {
		return nil, 0, err
	}
	return need, cut, nil
}

// fetchBlob copies blob id from the replica into the store, verified.
func fetchBlob(ctx context.Context, b Bucket, c *codec, blobs *blobstore.Store, id blobstore.ID) error {
	if blobs.Has(id) {
		return nil
	}
	name := c.blobName(id)
	body, err := b.Get(ctx, name)
	if err != nil {
		return err
	}
	data, err := c.open(name, name, body, maxObject)
	if err != nil {
		return err
	}
	if blobstore.ID(sha256.Sum256(data)) != id {
		return &DamageError{Object: name, Why: "its content does not hash to its name"}
	}
	got, _, err := blobs.Put(bytes.NewReader(data))
	if err != nil {
		return err
	}
	if got != id {
		return fmt.Errorf("replicate: blob %s stored as %s", id.Short(), got.Short())
	}
	return nil
}
