package replicate

import (
	"context"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// hangingEndpoint points AWS_ENDPOINT_URL at a listener that accepts
// connections and never answers.
func hangingEndpoint(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var held []net.Conn
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			held = append(held, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		l.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range held {
			c.Close()
		}
	})
	t.Setenv("AWS_ENDPOINT_URL", "http://"+l.Addr().String())
}

// shortRequests makes requests give up after d of silence and show as
// stalled after stall, for the test.
func shortRequests(t *testing.T, d, stall time.Duration) {
	oldT, oldS := requestTimeout, stallAfter
	requestTimeout, stallAfter = d, stall
	t.Cleanup(func() { requestTimeout, stallAfter = oldT, oldS })
}

// TestHungEndpointRequestDeadline: against an endpoint that accepts and
// never answers, an attempt (whose own bound is 5 minutes) fails once its
// requests have each waited their deadline and been retried, saying the
// endpoint did not answer, and while a request waits replica.json shows
// it (what status prints). It blocked for the whole attempt's bound,
// saying nothing (issue 27, section 6).
func TestHungEndpointRequestDeadline(t *testing.T) {
	startS3(t) // credentials; the endpoint is replaced
	hangingEndpoint(t)
	shortRequests(t, time.Second, 200*time.Millisecond)
	w := openWorkspace(t, t.TempDir())
	defer w.close()
	u := URL{Bucket: "replicas", Prefix: "hung"}
	r := replicator(t, w, u, Options{Timeout: 5 * time.Minute, Logger: quiet})
	var sawStalled atomic.Bool
	stop := make(chan struct{})
	go func() {
		for {
			select {
			case <-stop:
				return
			case <-time.After(50 * time.Millisecond):
			}
			if st, err := ReadState(w.store); err == nil && st.Stalled != nil && st.Stalled.Object == leaseName && st.Stalled.Op == "PUT" {
				sawStalled.Store(true)
			}
		}
	}()
	start := time.Now()
	done := make(chan error, 1)
	go func() { done <- r.Once(context.Background()) }()
	var err error
	select {
	case err = <-done:
	case <-time.After(60 * time.Second):
		t.Fatalf("an attempt against a hung endpoint still runs after 60 s")
	}
	close(stop)
	took := time.Since(start)
	if err == nil || !strings.Contains(err.Error(), "no answer from the endpoint") || !strings.Contains(err.Error(), "attempt 4 of 4") {
		t.Errorf("attempt against a hung endpoint: %v, want no answer after 4 attempts", err)
	}
	if !sawStalled.Load() {
		t.Errorf("replica.json never showed the PUT of %s waiting", leaseName)
	}
	st, _ := ReadState(w.store)
	if st.Stalled != nil || st.LastError == "" {
		t.Errorf("after the attempt: stalled %+v, last error %q", st.Stalled, st.LastError)
	}
	t.Logf("the attempt gave up after %v: %v", took, err)
}

// TestFlakyEndpointRetried: an endpoint that answers the first try of
// every request with 503 costs retries, not attempts: one attempt brings
// the replica up to date, and it restores.
func TestFlakyEndpointRetried(t *testing.T) {
	srv := startS3(t)
	target, _ := url.Parse(srv.Endpoint)
	rp := httputil.NewSingleHostReverseProxy(target)
	var n atomic.Int64
	var mu sync.Mutex
	tried := map[string]bool{}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		key := r.Method + " " + r.URL.String()
		mu.Lock()
		first := !tried[key]
		tried[key] = true
		mu.Unlock()
		if first {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		rp.ServeHTTP(w, r)
	})}
	go hs.Serve(l)
	defer hs.Close()
	t.Setenv("AWS_ENDPOINT_URL", "http://"+l.Addr().String())
	old := requestBackoff
	requestBackoff = 10 * time.Millisecond
	defer func() { requestBackoff = old }()
	dir := t.TempDir()
	seedTree(t, dir)
	w := openWorkspace(t, dir)
	defer w.close()
	u := URL{Bucket: "replicas", Prefix: "flaky"}
	r := replicator(t, w, u, Options{Logger: quiet})
	if _, err := w.eng.BeginStep(context.Background(), "s", nil); err != nil {
		t.Fatal(err)
	}
	if err := r.Once(context.Background()); err != nil {
		t.Fatalf("one attempt through an endpoint failing every other request: %v", err)
	}
	at := w.eng.Step().Seq
	t.Setenv("AWS_ENDPOINT_URL", srv.Endpoint)
	sameTree(t, "restore after a flaky endpoint", treeOf(t, restoreAt(t, u, at)), stateAt(t, w.eng, at))
	t.Logf("%d requests, %d of them refused", n.Load(), len(tried))
}
