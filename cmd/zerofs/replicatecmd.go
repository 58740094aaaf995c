package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/zerofs/zerofs/control"
	"github.com/zerofs/zerofs/eventlog"
	"github.com/zerofs/zerofs/history"
	"github.com/zerofs/zerofs/internal/proc"
	"github.com/zerofs/zerofs/internal/quote"
	"github.com/zerofs/zerofs/record"
	"github.com/zerofs/zerofs/replicate"
	"github.com/zerofs/zerofs/rewind"
)

var replicateCmd = &command{
	name:    "replicate",
	usage:   "replicate [--once] [--replica-key FILE] URL",
	summary: "replicate an unmounted store to s3://BUCKET/PREFIX",
	about: `Copies this workspace's history to S3-compatible storage at URL
(s3://BUCKET/PREFIX): blobs first, then the log segments that name them,
then a base (the whole workspace at the current step's start) from which
'zerofs restore' writes any replicated state. With --once it brings the
replica up to date and exits; without, it goes on until Ctrl-C or SIGTERM,
looking for new history every 2 s. For a mounted workspace use
'zerofs mount --replicate URL'.

Credentials, region and endpoint come from the standard AWS variables and
files (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_REGION, AWS_PROFILE,
AWS_ENDPOINT_URL for another S3-compatible service). One store per prefix:
a prefix another store replicates to is refused.
`,
	flags: []flagDef{
		{name: "once", help: "bring the replica up to date and exit"},
		{name: "replica-key", arg: "FILE", help: `seal what is uploaded with this key (32 bytes, raw or as 64
hex digits; make one with 'head -c32 /dev/urandom > FILE'):
the bucket then holds only ciphertext: contents, paths and
labels sealed with XChaCha20-Poly1305, blob names that do
not reveal their content's hash. Keep the key: without it
the replica cannot be restored.`},
	},
	args: []argDef{{name: "URL", comp: compNone}},
	run:  runReplicate,
}

var restoreCmd = &command{
	name:    "restore",
	usage:   "restore URL DIR [--at SEQ] [--replica-key FILE] [--same-owner] [--accept-older]",
	summary: "a workspace from a replica, at any replicated state",
	about: `Writes the state at SEQ (default: the newest the replica offers) of the
replica at URL (s3://BUCKET/PREFIX) into DIR, which must not exist (its
parent must), with a store (DIR/.zero) holding the replicated history:
'zerofs mount DIR' then has every @T the replica has. A state before the
newest is reached by a rewind recorded in the new store's log. Every
object read is checked (content against its hash, the log's sequences); a
damaged replica is refused and nothing is left in DIR. An encrypted
replica needs its --replica-key FILE.

A replica written without --replica-key is not authenticated (whoever can
write the bucket can forge it), so its paths, and the states of the
history restored with them, become yours, without setuid or setgid bits,
without the group and other permissions your umask withholds, without
ACLs and with no xattrs but user.*; the restore says what it dropped.
--same-owner keeps them as the replica gives them (as root: its owners).
A sealed replica's owners, modes and xattrs are always kept.

What a replica offers (its newest state, its log's end, the store that
writes it) is noted for this user in ~/.local/state/zerofs/replicas.json
(by the writer after each base, and by each restore). A replica that
offers less than it already did, or is another store's, was rolled back
(an older copy put in its place) or cut: restore refuses it, saying what
it promised and what it holds; --accept-older restores what it offers now.
`,
	flags: []flagDef{
		{name: "at", arg: "SEQ", comp: compNone, help: "the state to write (default: the newest the replica offers)"},
		{name: "replica-key", arg: "FILE", help: "the key a sealed replica was written with"},
		{name: "same-owner", help: "keep the owners, modes and xattrs the replica gives"},
		{name: "accept-older", help: "restore a replica that offers less than it did before"},
	},
	args: []argDef{{name: "URL", comp: compNone}, {name: "DIR", comp: compDir}},
	run:  runRestore,
}

func runReplicate(e *env, c *command, args []string) error {
	o, pos, rest, err := c.parse(args)
	if err != nil {
		return err
	}
	once := o.Bool("once")
	keyFile := o.String("replica-key")
	pos = append(pos, rest...)
	if len(pos) != 1 {
		return usagef(c, "want URL")
	}
	u, err := replicate.ParseURL(pos[0])
	if err != nil {
		return usagef(c, "%v", err)
	}
	key, err := readKey(keyFile)
	if err != nil {
		return err
	}
	ws, err := history.Find(e.cwd)
	if errors.Is(err, history.ErrNoWorkspace) {
		return fmt.Errorf("%v: a workspace has a store from its first mount on; run 'zerofs mount --replicate %s DIR' (it replicates while it records), or run zerofs replicate inside a workspace mounted before", err, u)
	}
	if err != nil {
		return err
	}
	if ws.Mounted {
		return fmt.Errorf("%s is mounted: replicate it with 'zerofs mount --replicate %s' instead", quote.Name(ws.Root), u)
	}
	root, err := os.Open(ws.Root)
	if err != nil {
		return err
	}
	defer root.Close()
	eng, err := rewind.Open(e.ctx, root, rewind.Options{StoreDir: ws.Store, Logger: e.logger()})
	if errors.Is(err, eventlog.ErrLocked) {
		return fmt.Errorf("the store %s is in use (mounted elsewhere, or another command): replicate with 'zerofs mount --replicate %s'", quote.Name(ws.Store), u)
	}
	if err != nil {
		return err
	}
	defer eng.Close()
	b, err := replicate.OpenS3(e.ctx, u)
	if err != nil {
		return err
	}
	r, err := replicate.Open(eng, b, u, ws.Store, replicate.Options{Logger: e.logger(), Key: key, Seen: replicate.SeenFile()})
	if err != nil {
		return err
	}
	defer r.Close()
	if once {
		deleted := r.State().Deleted
		p := startProgress(e, "replicate")
		err := r.Once(p.with(e.ctx))
		p.Done()
		if err != nil {
			return err
		}
		st := r.State()
		events := "no events yet"
		if st.Logged > 0 {
			events = fmt.Sprintf("events 1..%d", st.Logged)
		}
		fmt.Fprintf(e.stdout, "replicated to %s: %s, restorable up to %d", u, events, st.Base)
		if n := st.Deleted - deleted; n > 0 {
			fmt.Fprintf(e.stdout, "; deleted %d objects no replicated state needs", n)
		}
		fmt.Fprintln(e.stdout)
		return nil
	}
	ctx, stop := signal.NotifyContext(e.ctx, syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	fmt.Fprintf(e.stderr, "zerofs: replicating to %s (Ctrl-C stops)\n", u)
	return r.Run(ctx)
}

func runRestore(e *env, c *command, args []string) error {
	o, pos, rest, err := c.parse(args)
	if err != nil {
		return err
	}
	at := o.String("at")
	keyFile := o.String("replica-key")
	sameOwner := o.Bool("same-owner")
	acceptOlder := o.Bool("accept-older")
	pos = append(pos, rest...)
	if len(pos) != 2 {
		return usagef(c, "want URL and DIR")
	}
	u, err := replicate.ParseURL(pos[0])
	if err != nil {
		return usagef(c, "%v", err)
	}
	key, err := readKey(keyFile)
	if err != nil {
		return err
	}
	opts := replicate.RestoreOptions{Logger: e.logger(), Key: key, SameOwner: sameOwner, Seen: replicate.SeenFile(), AcceptOlder: acceptOlder}
	if at != "" {
		n, err := strconv.ParseUint(at, 10, 64)
		if err != nil {
			return usagef(c, "--at wants a sequence number, not %q", at)
		}
		opts.At, opts.HasAt = record.Seq(n), true
	}
	dir := pos[1]
	if !filepath.IsAbs(dir) {
		dir = filepath.Join(e.cwd, dir)
	}
	b, err := replicate.OpenS3(e.ctx, u)
	if err != nil {
		return err
	}
	p := startProgress(e, "restore")
	res, err := replicate.Restore(p.with(e.ctx), b, u, dir, opts)
	p.Done()
	if err != nil {
		return restoreAdvice(err, u)
	}
	fmt.Fprintf(e.stdout, "restored @%d of %s into %s, with the history %d..%d\n", res.Sequence, u, quote.Name(res.Dir), res.From, res.History)
	fmt.Fprintf(e.stdout, "  wrote @%d: %d files, %d directories, %d symlinks, %s\n", res.History, res.Files, res.Dirs, res.Symlinks, byteSize(res.Bytes))
	if r := res.Rewound; r != nil {
		fmt.Fprintf(e.stdout, "  rewound to %d: restored %d, deleted %d, skipped %d\n", res.Sequence, r.Restored, r.Deleted, len(r.Skipped))
	}
	for _, p := range res.Skipped {
		fmt.Fprintf(e.stdout, "  skipped %s (its state was not kept)\n", quote.Name(p))
	}
	if d := res.Dropped; !d.Empty() {
		fmt.Fprintf(e.stdout, "  the replica is not sealed (no --replica-key), so it is given no privilege and grants no one but you access:\n")
		if len(d.Owners) > 0 {
			fmt.Fprintf(e.stdout, "  owned by other users in the replica, now yours: %s\n", someNames(d.Owners))
		}
		if len(d.SetID) > 0 {
			fmt.Fprintf(e.stdout, "  setuid or setgid bits dropped: %s\n", someNames(d.SetID))
		}
		if len(d.Capabilities) > 0 {
			fmt.Fprintf(e.stdout, "  file capabilities dropped: %s\n", someNames(d.Capabilities))
		}
		if len(d.Modes) > 0 {
			fmt.Fprintf(e.stdout, "  group or other permissions your umask (%04o) withholds dropped: %s\n", d.Umask, someNames(d.Modes))
		}
		if len(d.ACLs) > 0 {
			fmt.Fprintf(e.stdout, "  ACLs dropped: %s\n", someNames(d.ACLs))
		}
		if len(d.Xattrs) > 0 {
			fmt.Fprintf(e.stdout, "  trusted.* and security.* xattrs dropped: %s\n", someNames(d.Xattrs))
		}
		fmt.Fprintf(e.stdout, "  (restore --same-owner keeps them, if you trust whoever can write %s)\n", u)
	}
	return nil
}

// restoreAdvice words a restore's refusal of a state gc cut or thinned
// away with what restores instead (--at, not a rewind: there is no
// workspace yet); other errors are returned as they are.
func restoreAdvice(err error, u replicate.URL) error {
	var re *record.RefusedError
	if !errors.As(err, &re) {
		return err
	}
	switch {
	case re.Refusal == record.RefusedPruned:
		return fmt.Errorf("%v: restore --at %d restores the oldest state left ('zerofs log --replica %s' lists them)", err, re.PrunedBefore, u)
	case re.Refusal == record.RefusedThinned && re.Thinned != nil:
		return fmt.Errorf("%v: restore --at %d or --at %d restores the nearest state kept", err, re.Thinned.After, re.Thinned.Before)
	}
	return fmt.Errorf("%v ('zerofs log --replica %s' lists the states it offers)", err, u)
}

// someNames lists up to 5 of names, quoted, and how many more there are.
func someNames(names []string) string {
	var b strings.Builder
	for i, n := range names {
		if i == 5 {
			fmt.Fprintf(&b, " and %d more", len(names)-5)
			break
		}
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(quote.Name(n))
	}
	return b.String()
}

// replicationLines is what status says of replication, from the store's
// replica.json (none when the store never replicated).
func replicationLines(w io.Writer, store string, head record.Seq) {
	st, err := replicate.ReadState(store)
	if err != nil {
		return
	}
	behind := uint64(0)
	if head > st.Logged {
		behind = uint64(head - st.Logged)
	}
	fmt.Fprintf(w, "replica:   %s: events 1..%d replicated, restorable up to %d; behind by %s, %s\n",
		st.URL, st.Logged, st.Base, plural(int(behind), "event"), humanBytes(st.Pending))
	if !st.LastSuccess.IsZero() {
		fmt.Fprintf(w, "replica:   last success %s\n", st.LastSuccess.Local().Format(time.DateTime))
	}
	if q := liveStall(st); q != nil {
		fmt.Fprintf(w, "replica:   stalled: %s %s has had no answer for %s (attempt %d of %d, since %s)\n",
			q.Op, q.Object, time.Since(q.Since).Round(time.Second), q.Attempt, q.Of, q.Since.Local().Format(time.TimeOnly))
		if q.LastError != "" {
			fmt.Fprintf(w, "replica:   the attempt before: %s\n", oneLine(q.LastError))
		}
	}
	if st.LastError != "" {
		fmt.Fprintf(w, "replica:   last error %s: %s\n", st.LastErrorAt.Local().Format(time.DateTime), oneLine(st.LastError))
	}
	if k := st.Shrunk; k != nil {
		held := fmt.Sprintf("events 1..%d, no base", k.HeldLog)
		if k.HeldBased {
			held = fmt.Sprintf("events 1..%d, restorable up to %d", k.HeldLog, k.HeldBase)
		}
		now := "uploading what it lacks again"
		if st.Logged >= k.UploadedLog && st.Based && st.Base >= k.UploadedBase {
			now = "uploaded again since"
		}
		fmt.Fprintf(w, "replica:   warning: at %s the replica held less than this store had uploaded to it (events 1..%d, restorable up to %d; it held %s): an older copy was put in its place, or objects were deleted; %s\n",
			k.At.Local().Format(time.DateTime), k.UploadedLog, k.UploadedBase, held, now)
	}
}

// liveStall is st's stalled request while the writer that sent it runs
// (nil otherwise): a writer killed while it waited leaves its request in
// replica.json until the next replication run, and a request of a process
// that is gone waits for nothing.
func liveStall(st replicate.State) *replicate.Request {
	if q := st.Stalled; q != nil && q.PID > 0 && proc.Same(q.PID, q.Start) {
		return q
	}
	return nil
}

// replicaLeftBehind is the error `zerofs umount` returns when the daemon
// it unmounted (st, which has exited) left replication behind at its last
// attempt (replica.json's final report, written by that daemon since
// since): the events and bytes the replica lacks, and how to send them.
// nil when the daemon did not replicate or brought the replica up to
// date.
func replicaLeftBehind(st control.StatusReport, since time.Time) error {
	rs, err := replicate.ReadState(st.Store)
	if err != nil || rs.Final == nil || rs.Final.PID != st.PID || rs.Final.At.Before(since.Add(-time.Second)) {
		return nil
	}
	f := rs.Final
	if f.Events == 0 && f.Error == "" {
		return nil
	}
	why := ""
	if f.Error != "" {
		why = ": " + oneLine(f.Error)
	}
	if f.Events == 0 {
		return fmt.Errorf("unmounted %s, but its last replication attempt to %s failed%s: the replica may not restore the last step; 'zerofs replicate --once %s' (or the next 'zerofs mount --replicate') finishes it",
			quote.Name(st.Mountpoint), rs.URL, why, rs.URL)
	}
	return fmt.Errorf("unmounted %s, but its replication to %s was left behind: %s, %s not uploaded%s; they are safe in the store, and 'zerofs replicate %s' (or the next 'zerofs mount --replicate') uploads them",
		quote.Name(st.Mountpoint), rs.URL, plural(int(f.Events), "event"), humanBytes(f.Bytes), why, rs.URL)
}

// readKey reads --replica-key's file (nil when none was given).
func readKey(path string) ([]byte, error) {
	if path == "" {
		return nil, nil
	}
	return replicate.ReadKey(path)
}

// logReplica prints what a replica holds, without restoring it.
func logReplica(e *env, c *command, url, keyFile string, asJSON bool) error {
	u, err := replicate.ParseURL(url)
	if err != nil {
		return usagef(c, "--replica: %v", err)
	}
	key, err := readKey(keyFile)
	if err != nil {
		return err
	}
	b, err := replicate.OpenS3(e.ctx, u)
	if err != nil {
		return err
	}
	sum, err := replicate.Describe(e.ctx, b, u, key)
	if err != nil {
		return err
	}
	var rb *replicate.RollbackError
	if err := replicate.CheckPromise(replicate.SeenFile(), b, u, sum.Offers()); errors.As(err, &rb) {
		fmt.Fprintf(e.stderr, "zerofs: warning: %s offers states up to %d (store %s, log at %d), but it already offered up to %d (store %s, log at %d; seen %s): an older copy was put in its place, or its newer objects were deleted; a restore refuses it unless --accept-older\n",
			u, rb.Found.Base, rb.Found.Store, rb.Found.Logged, rb.Promised.Base, rb.Promised.Store, rb.Promised.Logged, rb.Promised.At.Local().Format(time.DateTime))
	} else if err != nil {
		e.logger().Warn("replicate: cannot note what the replica offers", "url", u.String(), "err", err)
	}
	if asJSON {
		enc := json.NewEncoder(e.stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(sum)
	}
	restorable := "none yet"
	if n := len(sum.Bases); n > 0 {
		restorable = fmt.Sprintf("%d..%d", sum.PrunedBefore, sum.Bases[n-1])
		if len(sum.Thinned) > 0 {
			restorable += fmt.Sprintf(" (%s thinned to one state a day)", plural(len(sum.Thinned), "interval"))
		}
	}
	fmt.Fprintf(e.stdout, "replica %s: events 1..%d in %s, %s; restorable %s\n",
		u, sum.Logged, plural(sum.Segments, "segment"), plural(len(sum.Bases), "base"), restorable)
	fmt.Fprintf(e.stdout, "written by store %s on %s since %s\n", sum.Lease.Store, quote.Name(sum.Lease.Host), sum.Lease.Since.Local().Format(time.DateTime))
	for i := len(sum.Steps) - 1; i >= 0; i-- {
		st := sum.Steps[i]
		kind := "step  "
		if st.Type == record.TypeRewind {
			kind = "rewind"
		}
		fmt.Fprintf(e.stdout, "%s %4d  %s  %s\n", kind, st.Seq, st.At.Local().Format(time.DateTime), quote.Name(st.Label))
	}
	return nil
}
