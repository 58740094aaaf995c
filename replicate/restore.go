package replicate

import (
	"bufio"
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/zerofs/zerofs/blobstore"
	"github.com/zerofs/zerofs/eventlog"
	"github.com/zerofs/zerofs/internal/wsdir"
	"github.com/zerofs/zerofs/record"
	"github.com/zerofs/zerofs/rewind"
)

// RestoreOptions say which state to restore.
type RestoreOptions struct {
	// At is the state to write (when HasAt; else the newest the replica
	// offers).
	At    record.Seq
	HasAt bool
	// Logger for the restored engine's notes. Default slog.Default().
	Logger *slog.Logger
	// Key is the replica key the replica was written with (nil: none).
	Key []byte
	// SameOwner keeps the owners, modes, ACLs and xattrs a plain replica
	// (no Key) gives its paths (owners.go): without it they are the
	// restoring user's, without set-id bits, masked by the umask, without
	// ACLs and with no xattr but user.*. A sealed replica's are always
	// kept.
	SameOwner bool
	// Seen is the file of this user's notes of what replicas promised
	// (SeenFile; "" for none): a replica that offers less than it did is
	// refused (*RollbackError) unless AcceptOlder, and what it offers is
	// noted after the restore.
	Seen        string
	AcceptOlder bool
}

// RestoreResult is what a restore wrote.
type RestoreResult struct {
	Dir string `json:"dir"`
	URL string `json:"url"`
	// Sequence is the state written; History the last event of the
	// replicated history the new store holds (its newest base).
	Sequence record.Seq `json:"sequence"`
	History  record.Seq `json:"history"`
	// Files to Bytes count the newest base's tree as written; Rewound
	// what the rewind to Sequence then did (nil when Sequence is History).
	Rewound  *record.Report `json:"rewound,omitempty"`
	Files    int            `json:"files"`
	Dirs     int            `json:"dirs"`
	Symlinks int            `json:"symlinks"`
	Bytes    int64          `json:"bytes"`
	Blobs    int            `json:"blobs"`
	Skipped  []string       `json:"skipped"`
	// From is the first state the restored history offers (a gc's cut
	// before it).
	From record.Seq `json:"from"`
	// Dropped is what a plain replica gave that the restore did not take
	// (owners.go); empty for a sealed one, or with SameOwner.
	Dropped Ownership `json:"dropped"`
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
//
// The replica's writer deletes what a newer base makes unneeded (collect):
// a restore that listed the replica before finds an object gone, and
// begins again from a new listing; if that keeps happening it fails,
// saying so.
//
// A rewind.Progress in ctx hears how far it has come, phase by phase,
// with the totals the listing gives: the history's objects (the base and
// the segments up to it: rewind.Counting's "objects"), the blobs they
// name ("blobs", with their bytes, heard as they come), the paths it
// writes with their bytes, then the rewind to opts.At.
func Restore(ctx context.Context, b Bucket, u URL, dir string, opts RestoreOptions) (RestoreResult, error) {
	var err error
	prev := ""
	for range relist {
		var res RestoreResult
		var base string
		res, err = restore(ctx, b, u, dir, opts, &base)
		if !errors.Is(err, ErrNotFound) {
			return res, err
		}
		if base == prev {
			// The same base as the attempt before: the replica lacks
			// an object it needs, nobody is deleting it under us.
			return RestoreResult{}, fmt.Errorf("replicate: %s is damaged: its base %s needs an object it lacks: %w", u, base, err)
		}
		prev = base
		opts.logger().Info("replicate: restore: an object is gone (the replica's writer deleted what a newer base no longer needs); listing again", "err", err)
	}
	return RestoreResult{}, changing(u, err)
}

// relist is how many listings a restore or a describe reads before it
// gives up on a replica whose objects keep going away under it.
const relist = 4

func changing(u URL, err error) error {
	return fmt.Errorf("replicate: %s changed while it was read %d times in a row (its writer deleted objects a newer base no longer needs); try again: %w", u, relist, err)
}

func (o RestoreOptions) logger() *slog.Logger {
	if o.Logger == nil {
		return slog.Default()
	}
	return o.Logger
}

// restore is one attempt of Restore from one listing; *used is the base
// it read.
func restore(ctx context.Context, b Bucket, u URL, dir string, opts RestoreOptions, used *string) (RestoreResult, error) {
	opts.Logger = opts.logger()
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
	if err := gap(segs, bases, end); err != nil {
		return RestoreResult{}, err
	}
	base, found := newestBase(bases, end)
	offers := Promise{Store: lease.Store, Logged: end, Base: base.Seq}
	if !opts.AcceptOlder {
		if err := checkSeen(opts.Seen, b, u, offers); err != nil {
			return RestoreResult{}, err
		}
	}
	if !found {
		return RestoreResult{}, fmt.Errorf("%w: %s holds no restorable state yet (no base)", ErrNoState, u)
	}
	*used = base.Name
	at := base.Seq
	if opts.HasAt {
		if opts.At > base.Seq {
			return RestoreResult{}, fmt.Errorf("%w: %s offers states up to %d; %d is beyond them", ErrNoState, u, base.Seq, opts.At)
		}
		at = opts.At
	}
	// What it downloads is known from the listing: the segments up to
	// the base and the base (their sizes are not: a count of objects),
	// then, from those, the blobs with their lengths.
	pr := rewind.ProgressIn(ctx)
	rewind.BeginCounting(pr, "restore: download history", "objects", int64(len(upTo(run, base.Seq))+1), 0)

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
	if err := unix.Mkdirat(root.Fd(), record.StoreName, 0o700); err != nil {
		return fail(err)
	}
	sfd, err := root.Open(record.StoreName, unix.O_RDONLY|unix.O_DIRECTORY)
	if err != nil {
		return fail(err)
	}
	defer unix.Close(sfd)
	store := "/proc/self/fd/" + strconv.Itoa(sfd)

	var d *disowner
	if c == nil && !opts.SameOwner {
		d = newDisowner()
	}
	ret, err := writeLog(ctx, b, c, run, base.Seq, sfd, store, d)
	if err != nil {
		return fail(err)
	}
	res.From = ret.Pruned()
	// A state a gc cut or thinned away is refused now, from the log
	// alone: before the base and the blobs are fetched for nothing.
	if r := rewind.Refuse(at, base.Seq, ret.Pruned(), ret.Thinned()); r != nil {
		return fail(fmt.Errorf("replicate: restore: rewind to %d: %w", at, r))
	}
	bs, err := fetchBase(ctx, b, c, base)
	if err != nil {
		return fail(err)
	}
	if d != nil {
		d.entry(&bs.Root)
		for i := range bs.Files {
			d.entry(&bs.Files[i])
		}
		res.Dropped = d.result()
	}
	pr.Add(1, 0)
	blobs, err := blobstore.Open(filepath.Join(store, rewind.BlobsName), blobstore.Options{})
	if err != nil {
		return fail(err)
	}
	// The blobs of the base, and those of the before-states the history
	// keeps (what its cuts and thins dropped, no state needs).
	// Each with the largest length a state gives it: more is refused.
	need := map[blobstore.ID]int64{}
	for _, e := range bs.Files {
		if e.Kind == record.KindFile && !e.Skipped {
			id, _ := blobstore.ParseID(e.Blob)
			need[id] = max(need[id], e.Bytes)
		}
	}
	ret.Records(func(_ record.Seq, fs record.FileState) {
		if id, err := blobstore.ParseID(fs.Blob); err == nil {
			need[id] = max(need[id], fs.Bytes)
		}
	})
	var needBytes int64
	for _, size := range need {
		needBytes += size
	}
	rewind.BeginCounting(pr, "restore: download blobs", "blobs", int64(len(need)), needBytes)
	for id, size := range need {
		err := fetchBlob(ctx, b, c, blobs, id, size, store)
		if err != nil {
			blobs.Close()
			return fail(err)
		}
		pr.Add(1, 0) // its bytes as they came (fetchBlob)
		res.Blobs++
	}
	if err := blobs.Sync(); err != nil {
		blobs.Close()
		return fail(err)
	}
	var paths, bytes int64
	for _, e := range bs.Files {
		if !e.Skipped {
			paths++
			bytes += e.Bytes
		}
	}
	pr.Begin("restore: write", paths, bytes)
	w := &treeWriter{root: root, res: &res}
	for _, e := range bs.Files {
		if e.Skipped {
			res.Skipped = append(res.Skipped, e.Path)
			continue
		}
		var content *blobstore.Reader
		if e.Kind == record.KindFile {
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
		pr.Add(1, e.Bytes)
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
	if err := noteSeen(opts.Seen, b, u, offers, opts.AcceptOlder); err != nil {
		opts.Logger.Warn("replicate: cannot note what the replica offers", "url", u.String(), "err", err)
	}
	return res, nil
}

// fetchBase reads and checks a base (spooled to the system's temporary
// directory: the restore's own does not exist yet).
func fetchBase(ctx context.Context, b Bucket, c *codec, ref baseRef) (Base, error) {
	r, err := readChecked(ctx, b, c, ref.Name, ref.Hash, baseLogical(ref.Seq), "")
	if err != nil {
		return Base{}, err
	}
	defer r.Close()
	var bs Base
	dec := json.NewDecoder(r)
	err = dec.Decode(&bs)
	if err == nil {
		if _, terr := dec.Token(); terr != io.EOF {
			err = errors.New("more after the base")
		}
	}
	if err != nil {
		var de *DamageError
		if errors.As(err, &de) {
			return Base{}, err
		}
		return Base{}, &DamageError{Object: ref.Name, Why: err.Error()}
	}
	if bs.Sequence != ref.Seq || bs.Format != 1 {
		return Base{}, &DamageError{Object: ref.Name, Why: fmt.Sprintf("it says sequence %d, format %d", bs.Sequence, bs.Format)}
	}
	dirs := map[string]bool{"": true}
	for _, e := range bs.Files {
		p := e.name()
		if err := record.CleanPath(p); err != nil || p == "" {
			return Base{}, &DamageError{Object: ref.Name, Why: fmt.Sprintf("path %q: not a clean workspace path", p)}
		}
		parent, _ := wsdir.Split(p)
		if !dirs[parent] || dirs[p] {
			return Base{}, &DamageError{Object: ref.Name, Why: fmt.Sprintf("path %q: its directory is not listed before it, or it is listed twice", p)}
		}
		if e.Mode > 0o7777 {
			return Base{}, &DamageError{Object: ref.Name, Why: fmt.Sprintf("path %q: mode %#o", p, e.Mode)}
		}
		if why := record.CheckXattrs(e.Xattrs); why != "" {
			return Base{}, &DamageError{Object: ref.Name, Why: fmt.Sprintf("path %q: %s", p, why)}
		}
		if e.Skipped {
			continue
		}
		switch e.Kind {
		case record.KindDir:
			dirs[p] = true
		case record.KindFile:
			if _, err := blobstore.ParseID(e.Blob); err != nil {
				return Base{}, &DamageError{Object: ref.Name, Why: fmt.Sprintf("path %q: %v", p, err)}
			}
		case record.KindSymlink:
			if e.target() == "" {
				return Base{}, &DamageError{Object: ref.Name, Why: fmt.Sprintf("symlink %q without a target", p)}
			}
		default:
			return Base{}, &DamageError{Object: ref.Name, Why: fmt.Sprintf("path %q: kind %q", p, e.Kind)}
		}
	}
	return bs, nil
}

// upTo is the start of run (a chain) that writeLog reads to reach event
// upto.
func upTo(run []segment, upto record.Seq) []segment {
	var next record.Seq = 1
	for i, s := range run {
		if next > upto {
			return run[:i]
		}
		next = max(next, min(s.Last, upto)+1)
	}
	return run
}

// progressWriter tells pr of the bytes written through it.
type progressWriter struct{ pr rewind.Progress }

func (w progressWriter) Write(b []byte) (int, error) {
	w.pr.Add(0, int64(len(b)))
	return len(b), nil
}

// writeLog writes events 1..upto from the segments of run into the
// store's events.jsonl (beneath sfd) and returns them folded as the
// engine folds them (which before-states survive, so which blobs the
// history needs). Each segment must hash to its name and hold exactly the
// sequences it names, in order, and each event must be one zerofs writes.
//
// A base at a step's start may name a file removed before it whose stash
// was named after it (Replicator.nameAhead): its stash_named event lies
// past upto. While a record up to upto is unnamed, writeLog reads on in
// run for such names, folds them (NameAhead) and writes them as one
// stash_named event of the restore's own at upto+1, so that the restored
// engine finds every record named (a stash the restore has not would be
// named lost).
//
// With d (a plain replica restored without SameOwner), every checkpoint's
// before-states are written as the restoring user's (owners.go).
func writeLog(ctx context.Context, b Bucket, c *codec, run []segment, upto record.Seq, sfd int, store string, d *disowner) (*rewind.Retention, error) {
	fd, err := unix.Openat(sfd, record.LogName, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return nil, err
	}
	f := os.NewFile(uintptr(fd), record.LogName)
	defer f.Close()
	ret := rewind.NewRetention()
	pr := rewind.ProgressIn(ctx)
	var next record.Seq = 1
	ahead := map[string]record.Named{} // names past upto, by stash
	for _, s := range run {
		counted := next <= upto // as upTo counts the segments for the progress
		if !counted && !ret.HasUnnamed() {
			break
		}
		want := s.First
		err := eachLine(ctx, b, c, s, store, func(line []byte) error {
			var ev record.Event
			if err := json.Unmarshal(line, &ev); err != nil || ev.Seq != want {
				return &DamageError{Object: s.Name, Why: fmt.Sprintf("line of sequence %d: not the event it should be (%v)", want, err)}
			}
			want++
			if ev.Seq < next {
				return nil // overlap with the segment before
			}
			if ev.Seq > upto {
				next = ev.Seq + 1
				if ev.Type != record.TypeStashNamed {
					return nil
				}
				return nameAhead(s.Name, ret, ev, upto, ahead)
			}
			if err := record.CheckEvent(s.Name, ev); err != nil {
				return &DamageError{Object: s.Name, Why: err.Error()}
			}
			if err := ret.Add(ev); err != nil {
				return &DamageError{Object: s.Name, Why: err.Error()}
			}
			if d != nil {
				var err error
				if line, err = d.event(ev, line); err != nil {
					return &DamageError{Object: s.Name, Why: err.Error()}
				}
			}
			if _, err := f.Write(line); err != nil {
				return err
			}
			next = ev.Seq + 1
			return nil
		})
		if err != nil {
			return nil, err
		}
		if want != s.Last+1 {
			return nil, &DamageError{Object: s.Name, Why: fmt.Sprintf("it ends at sequence %d, its name says %d", want-1, s.Last)}
		}
		if counted {
			pr.Add(1, 0)
		}
	}
	if next <= upto {
		return nil, fmt.Errorf("%w: the replica's log ends at %d, before its base at %d", ErrNoState, next-1, upto)
	}
	if err := f.Sync(); err != nil {
		return nil, err
	}
	if len(ahead) > 0 {
		if err := appendNamed(ctx, store, ahead); err != nil {
			return nil, err
		}
	}
	return ret, nil
}

// nameAhead folds the names stash_named event ev (past upto, in segment
// obj) gives records up to upto, and keeps them in ahead.
func nameAhead(obj string, ret *rewind.Retention, ev record.Event, upto record.Seq, ahead map[string]record.Named) error {
	if err := record.CheckEvent(obj, ev); err != nil {
		return &DamageError{Object: obj, Why: err.Error()}
	}
	var p record.NamedPayload
	if err := json.Unmarshal(ev.Payload, &p); err != nil { // checked just above
		return &DamageError{Object: obj, Why: err.Error()}
	}
	for _, n := range p.Named {
		if n.Sequence <= upto {
			ahead[n.Kept] = n
		}
	}
	if err := ret.NameAhead(ev); err != nil {
		return &DamageError{Object: obj, Why: err.Error()}
	}
	return nil
}

// appendNamed appends one stash_named event with names to the restored
// log (store's events.jsonl), durable before the engine opens it.
func appendNamed(ctx context.Context, store string, names map[string]record.Named) error {
	p := record.NamedPayload{Named: make([]record.Named, 0, len(names))}
	for _, n := range names {
		p.Named = append(p.Named, n)
	}
	slices.SortFunc(p.Named, func(a, b record.Named) int {
		return cmp.Or(cmp.Compare(a.Sequence, b.Sequence), strings.Compare(a.Kept, b.Kept))
	})
	l, err := eventlog.Open(filepath.Join(store, record.LogName), eventlog.Options{Sync: true})
	if err != nil {
		return err
	}
	if _, err := l.Append(ctx, record.TypeStashNamed, p); err != nil {
		l.Close()
		return err
	}
	return l.Close()
}

// eachLine gives fn each line of segment s (spooled to a temporary file
// in tmp and checked whole first: readChecked), one at a time.
func eachLine(ctx context.Context, b Bucket, c *codec, s segment, tmp string, fn func(line []byte) error) error {
	r, err := readChecked(ctx, b, c, s.Name, s.Hash, segmentLogical(s.First, s.Last), tmp)
	if err != nil {
		return err
	}
	defer r.Close()
	br := bufio.NewReaderSize(r, 64<<10)
	for {
		line, err := br.ReadBytes('\n')
		if err == io.EOF {
			if len(line) > 0 {
				return &DamageError{Object: s.Name, Why: "its last line has no newline"}
			}
			return nil
		}
		if err != nil {
			return err
		}
		if err := fn(line); err != nil {
			return err
		}
	}
}

// fetchBlob copies blob id (of at most size bytes) from the replica into
// the store: decoded into a temporary file in dir, it is stored only once
// all of it hashes to id. The Progress in ctx hears its bytes as they
// come.
func fetchBlob(ctx context.Context, b Bucket, c *codec, blobs *blobstore.Store, id blobstore.ID, size int64, dir string) error {
	if blobs.Has(id) {
		return nil
	}
	name := c.blobName(id)
	body, err := b.GetReader(ctx, name)
	if err != nil {
		return err
	}
	defer body.Close()
	plain, err := c.openReader(name, name, body, size)
	if err != nil {
		return err
	}
	defer plain.Close()
	tmp, err := tempIn(dir)
	if err != nil {
		return err
	}
	defer tmp.Close()
	h := sha256.New()
	if _, err := io.Copy(io.MultiWriter(tmp, h, progressWriter{rewind.ProgressIn(ctx)}), plain); err != nil {
		var de *DamageError
		if errors.As(err, &de) || errors.Is(err, ErrKey) {
			return err
		}
		return fmt.Errorf("replicate: get %s: %w", name, err)
	}
	if blobstore.ID(h.Sum(nil)) != id {
		return &DamageError{Object: name, Why: "its content does not hash to its name"}
	}
	if _, err := tmp.Seek(0, io.SeekStart); err != nil {
		return err
	}
	got, _, err := blobs.Put(tmp)
	if err != nil {
		return err
	}
	if got != id {
		return fmt.Errorf("replicate: blob %s stored as %s", id.Short(), got.Short())
	}
	return nil
}
