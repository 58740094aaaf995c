package replicate

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/zerofs/zerofs/internal/testsupport"
)

// slowLink stands between the replicator and the S3 server and delays
// every request by delay (a link with a long round trip), noting the
// order of the PUTs.
type slowLink struct {
	delay time.Duration
	rp    *httputil.ReverseProxy
	mu    sync.Mutex // guards puts
	puts  []string
}

func (s *slowLink) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	time.Sleep(s.delay) // the link's delay, as a slow network has it
	if r.Method == http.MethodPut && r.URL.Query().Get("uploadId") == "" {
		s.mu.Lock()
		s.puts = append(s.puts, r.URL.Path)
		s.mu.Unlock()
	}
	s.rp.ServeHTTP(w, r)
}

func (s *slowLink) order() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.puts...)
}

// startSlowLink puts a slowLink of delay in front of the test's S3 server.
func startSlowLink(t *testing.T, srvEndpoint string, delay time.Duration) *slowLink {
	target, _ := url.Parse(srvEndpoint)
	link := &slowLink{delay: delay, rp: httputil.NewSingleHostReverseProxy(target)}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := &http.Server{Handler: link}
	go hs.Serve(l)
	t.Cleanup(func() { hs.Close() })
	t.Setenv("AWS_ENDPOINT_URL", "http://"+l.Addr().String())
	return link
}

// TestLogNotBehindBase: while a base of many new files goes up over a
// slow link (every request delayed), a step made meanwhile reaches the
// replica's log before the base is done: log segments do not wait behind
// a base's blobs (issue 27, section 6: lag went over the 2 s goal
// whenever a base uploaded). The lag it measures, with the delay
// ZEROFS_LAG_DELAY (default 100ms), is logged.
func TestLogNotBehindBase(t *testing.T) {
	srv := startS3(t)
	delay := 100 * time.Millisecond
	if d, err := time.ParseDuration(os.Getenv("ZEROFS_LAG_DELAY")); err == nil {
		delay = d
	}
	link := startSlowLink(t, srv.Endpoint, delay)
	dir := t.TempDir()
	const files = 60
	for i := range files {
		p := filepath.Join(dir, "src", fmt.Sprintf("f%02d.go", i))
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte(fmt.Sprintf("package src // %d\n", i)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	w := openWorkspace(t, dir)
	defer w.close()
	u := URL{Bucket: "replicas", Prefix: "lag"}
	r := replicator(t, w, u, Options{Every: 200 * time.Millisecond, BaseEvery: time.Millisecond, Logger: quiet})
	first, err := w.eng.BeginStep(context.Background(), "first", nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); r.Run(ctx) }()
	defer func() { cancel(); <-done }()
	// Once the base's blobs are going up, a step.
	blobs := func() int {
		n := 0
		for _, p := range link.order() {
			if strings.Contains(p, "/blobs/") {
				n++
			}
		}
		return n
	}
	if testsupport.Poll(60*time.Second, func() bool { return blobs() >= 3 }) != nil {
		t.Fatalf("no blob of the base went up in 60 s: %v", link.order())
	}
	if err := os.WriteFile(filepath.Join(dir, "new.txt"), []byte("new\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	ev, err := w.eng.BeginStep(context.Background(), "second", nil)
	if err != nil {
		t.Fatal(err)
	}
	made := time.Now()
	var lag, restorable time.Duration
	for {
		st := r.State()
		if lag == 0 && st.Logged >= ev.Seq {
			lag = time.Since(made)
		}
		if st.Based && st.Base >= first.Seq {
			restorable = time.Since(made)
		}
		if lag > 0 && restorable > 0 {
			break
		}
		if time.Since(made) > 120*time.Second {
			t.Fatalf("after 120 s: %+v", st)
		}
		time.Sleep(5 * time.Millisecond) // not Poll: it measures the lag to 5 ms, Poll backs off to 50
	}
	order := link.order()
	seg, base := -1, -1
	for i, p := range order {
		if base < 0 && strings.Contains(p, "/bases/") {
			base = i
		}
		if seg < 0 && strings.Contains(p, "/log/") && i > 0 && lastOf(p) >= uint64(ev.Seq) {
			seg = i
		}
	}
	t.Logf("delay %v per request, %d files in the base: step %d logged %v after it was made, the base at %d done %v after it (PUT %d of %d, the segment PUT %d)",
		delay, files, ev.Seq, lag.Round(time.Millisecond), first.Seq, restorable.Round(time.Millisecond), base, len(order), seg)
	if seg < 0 || base >= 0 && seg > base {
		t.Errorf("the segment with step %d went up after the base (PUT %d, the base's %d): the log waited behind the base's blobs", ev.Seq, seg, base)
	}
}

// lastOf is the last sequence of a segment's object path (0 if none).
func lastOf(path string) uint64 {
	i := strings.Index(path, "/log/")
	s, ok := parseSegment(path[i+1:])
	if !ok {
		return 0
	}
	return uint64(s.Last)
}
