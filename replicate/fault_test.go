package replicate

import (
	"context"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"sync/atomic"
	"testing"
	"time"

	"github.com/zerofs/zerofs/internal/testsupport"
	"github.com/zerofs/zerofs/record"
)

// faultProxy stands between the replicator and the S3 server and, by
// mode, answers errors, answers slowly, drops connections, or passes
// requests on.
type faultProxy struct {
	mode atomic.Value // "ok", "error", "slow", "drop"
	rp   *httputil.ReverseProxy
	hits atomic.Int64
	// held counts requests the proxy is holding unanswered right now.
	held atomic.Int64
}

// faultTimeout bounds one attempt of the replicator under test: short, so
// that requests the proxy holds time out within the test, yet long enough
// for an attempt's uploads to finish on a loaded machine under -race (at
// one second an attempt that uploaded a segment never finished at load 24,
// so the replica never caught up).
const faultTimeout = 4 * time.Second

func (p *faultProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p.hits.Add(1)
	switch p.mode.Load().(string) {
	case "error":
		w.WriteHeader(http.StatusServiceUnavailable)
		return
	case "slow":
		p.held.Add(1)
		defer p.held.Add(-1)
		select {
		case <-time.After(2 * faultTimeout):
		case <-r.Context().Done():
			return
		}
	case "drop":
		if hj, ok := w.(http.Hijacker); ok {
			if c, _, err := hj.Hijack(); err == nil {
				c.Close()
				return
			}
		}
	}
	p.rp.ServeHTTP(w, r)
}

// TestFaultyEndpoint: while the endpoint fails (errors, timeouts, dropped
// connections) the workspace's changes go on at their own speed, the
// failure is recorded in replica.json, and once the endpoint is back the
// replica catches up and restores to the local @T.
func TestFaultyEndpoint(t *testing.T) {
	srv := startS3(t)
	target, _ := url.Parse(srv.Endpoint)
	proxy := &faultProxy{rp: httputil.NewSingleHostReverseProxy(target)}
	proxy.mode.Store("ok")
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := &http.Server{Handler: proxy}
	go hs.Serve(l)
	defer hs.Close()
	t.Setenv("AWS_ENDPOINT_URL", "http://"+l.Addr().String())

	rng := testsupport.Rand(t)
	dir := t.TempDir()
	seedTree(t, dir)
	w := openWorkspace(t, dir)
	defer w.close()
	u := URL{Bucket: "replicas", Prefix: "faulty"}
	r := replicator(t, w, u, Options{Every: 50 * time.Millisecond, BaseEvery: 100 * time.Millisecond, Timeout: faultTimeout, Logger: quiet})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); r.Run(ctx) }()
	defer func() { cancel(); <-done }()

	var slowest time.Duration
	var faulted int64
	// whileHeld counts changes made from start to end while the proxy
	// held a request of the replicator's unanswered: a change that waited
	// for the network could not finish then.
	whileHeld := 0
	sawError := false
	for _, mode := range []string{"ok", "error", "slow", "drop", "error", "ok"} {
		proxy.mode.Store(mode)
		before := proxy.hits.Load()
		deadline := time.Now().Add(1500 * time.Millisecond)
		for time.Now().Before(deadline) {
			start := time.Now()
			heldBefore := proxy.held.Load() > 0
			w.change(t, rng)
			slowest = max(slowest, time.Since(start))
			if heldBefore && proxy.held.Load() > 0 {
				whileHeld++
			}
			time.Sleep(5 * time.Millisecond) // real time: changes spread across the fault window
		}
		if mode != "ok" {
			// After a few failures the replicator backs off (its pause
			// doubles), so a later window may see no request at all.
			faulted += proxy.hits.Load() - before
			if st, err := ReadState(w.store); err == nil && st.LastError != "" {
				sawError = true
			}
		}
	}
	// Changes run while requests fail or hang for seconds: none of them
	// may wait for the network. Shown by changes made while a request hung
	// in the proxy, not by a time bound (the machine's load decides those;
	// scripts/bench-replicate.sh measures the speed).
	if whileHeld == 0 {
		t.Errorf("no change was made while the proxy held a request (held %d times)", proxy.hits.Load())
	}
	if faulted == 0 {
		t.Errorf("the replicator made no request while the endpoint was failing")
	}
	if !sawError {
		t.Errorf("no failure was recorded in %s", StateName)
	}
	if _, err := w.eng.BeginStep(context.Background(), "last", nil); err != nil {
		t.Fatal(err)
	}
	head, step := w.eng.Head(), w.eng.Step().Seq
	if err := testsupport.Poll(60*time.Second, func() bool {
		st := r.State()
		// (The base may lie past the step, over a stash named after it.)
		return st.Logged == w.eng.Head() && st.Logged >= head && st.Base >= step && st.LastError == ""
	}); err != nil {
		t.Fatalf("the replica did not catch up: %+v, want log %d base %d", r.State(), head, step)
	}
	for _, at := range []record.Seq{step, record.Seq(rng.IntN(int(step) + 1))} {
		if w.eng.HasState(at) {
			sameTree(t, "restore --at "+itoa(at)+" after the faults", treeOf(t, restoreAt(t, u, at)), stateAt(t, w.eng, at))
		}
	}
	t.Logf("head %d, slowest change %v, %d changes made while a request hung", head, slowest, whileHeld)
}
