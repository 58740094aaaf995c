package daemon

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/zerofs/zerofs/replicate"
	"github.com/zerofs/zerofs/rewind"
)

// finalReplicationTimeout bounds the last replication attempt a daemon
// makes at unmount (daemonReplication.final).
var finalReplicationTimeout = 30 * time.Second

// daemonReplication is a mounted engine's replicator, run in the
// background.
type daemonReplication struct {
	r      *replicate.Replicator
	url    string
	logger *slog.Logger
	cancel context.CancelFunc
	done   chan struct{} // closed when Run returned
	once   sync.Once
}

// startReplication runs a replicator for a mounted engine in the
// background. It never waits for the network: a slow or absent endpoint
// only delays replication. final (at unmount, before the engine closes)
// or stop ends it.
func startReplication(ctx context.Context, eng *rewind.Engine, url, keyFile, store string, logger *slog.Logger) (*daemonReplication, error) {
	u, err := replicate.ParseURL(url)
	if err != nil {
		return nil, err
	}
	var key []byte
	if keyFile != "" {
		if key, err = replicate.ReadKey(keyFile); err != nil {
			return nil, err
		}
	}
	b, err := replicate.OpenS3(ctx, u)
	if err != nil {
		return nil, err
	}
	r, err := replicate.Open(eng, b, u, store, replicate.Options{Logger: logger, Key: key, Seen: replicate.SeenFile()})
	if err != nil {
		return nil, err
	}
	// The lease is asked for now, a while at most: a prefix another store
	// holds, or a key that is not the replica's, refuses the mount at once
	// (no retry would change it). An endpoint that does not answer in
	// time only delays replication.
	cctx, ccancel := context.WithTimeout(ctx, claimTimeout)
	err = r.Claim(cctx)
	ccancel()
	if replicate.Permanent(err) {
		r.Close()
		return nil, err
	}
	if err != nil {
		logger.Warn("replicate: the endpoint did not answer at mount; replicating once it does", "url", u.String(), "err", err)
	}
	rctx, cancel := context.WithCancel(context.Background())
	d := &daemonReplication{r: r, url: u.String(), logger: logger, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(d.done)
		if err := r.Run(rctx); err != nil {
			logger.Error("replicate: replication stopped; the workspace goes on without it", "url", u.String(), "err", err)
		}
	}()
	return d, nil
}

// claimTimeout bounds how long a mount waits for the replica's lease
// (startReplication).
var claimTimeout = 5 * time.Second

// halt ends Run and waits for it (a while: an upload cut short returns at
// once, a stuck one may not); ok says it returned.
func (d *daemonReplication) halt() (ok bool) {
	d.cancel()
	select {
	case <-d.done:
		return true
	case <-time.After(30 * time.Second):
		d.logger.Warn("replicate: the replicator did not stop", "url", d.url)
		return false
	}
}

// final ends Run and makes one last attempt, bounded by timeout (ctx's
// end abandons it), that uploads whatever is not replicated yet: the
// history is final (the mount takes no more changes, the log is synced).
// The daemon's log says how it went and what it left behind; status says
// it too, from replica.json.
func (d *daemonReplication) final(ctx context.Context, timeout time.Duration) {
	d.once.Do(func() {
		defer d.r.Close()
		if !d.halt() {
			return // still running: not two attempts at once
		}
		d.logger.Info("replicate: last attempt before unmounting", "url", d.url, "timeout", timeout)
		start := time.Now()
		behind, pending, err := d.r.Final(ctx, timeout)
		took := time.Since(start).Round(time.Millisecond)
		switch {
		case err == nil:
			d.logger.Info("replicate: replica up to date at unmount", "url", d.url, "events", d.r.State().Logged, "took", took)
		case ctx.Err() != nil:
			d.logger.Warn("replicate: last attempt abandoned; left behind until the next mount or 'zerofs replicate'", "url", d.url, "events", behind, "bytes", pending, "took", took)
		default:
			d.logger.Warn("replicate: last attempt failed; left behind until the next mount or 'zerofs replicate'", "url", d.url, "events", behind, "bytes", pending, "err", err, "took", took)
		}
	})
}

// stop ends Run without a last attempt (nothing is done if final ran).
func (d *daemonReplication) stop() {
	d.once.Do(func() {
		d.halt()
		d.r.Close()
	})
}
