package timeline_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/zerofs/zerofs/history"
	"github.com/zerofs/zerofs/record"
	"github.com/zerofs/zerofs/rewind"
	"github.com/zerofs/zerofs/timeline"
)

const (
	token = "0123456789abcdef0123456789abcdef"
	host  = "127.0.0.1:4711"
)

// workspace is an unmounted workspace whose history the engine wrote.
type workspace struct {
	t    *testing.T
	root string
	eng  *rewind.Engine
}

func newWorkspace(t *testing.T) *workspace {
	t.Helper()
	return newWorkspaceIn(t, t.TempDir())
}

// newWorkspaceIn makes the workspace in root.
func newWorkspaceIn(t *testing.T, root string) *workspace {
	t.Helper()
	dir, err := os.Open(root)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dir.Close() })
	eng, err := rewind.Open(context.Background(), dir, rewind.Options{StoreDir: filepath.Join(root, ".zero"),
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	w := &workspace{t: t, root: root, eng: eng}
	t.Cleanup(w.close)
	return w
}

func (w *workspace) close() {
	if w.eng != nil {
		if err := w.eng.Close(); err != nil {
			w.t.Error(err)
		}
		w.eng = nil
	}
}

func (w *workspace) step(label string) record.Seq {
	w.t.Helper()
	ev, err := w.eng.BeginStep(context.Background(), label, nil)
	if err != nil {
		w.t.Fatal(err)
	}
	return ev.Seq
}

// change captures paths as process comm would, then runs fn on the files.
func (w *workspace) change(comm string, fn func(), paths ...string) {
	w.t.Helper()
	var cs []rewind.Change
	for _, p := range paths {
		cs = append(cs, rewind.Change{Path: p})
	}
	release, _, err := w.eng.Begin(context.Background(), rewind.Caller{PID: 4242, Comm: comm}, cs...)
	if err != nil {
		w.t.Fatal(err)
	}
	fn()
	release()
}

func (w *workspace) write(comm, p, content string) {
	w.t.Helper()
	w.change(comm, func() {
		if err := os.WriteFile(filepath.Join(w.root, p), []byte(content), 0o644); err != nil {
			w.t.Fatal(err)
		}
	}, p)
}

func (w *workspace) read(p string) string {
	b, err := os.ReadFile(filepath.Join(w.root, p))
	if err != nil {
		return "<" + err.Error() + ">"
	}
	return string(b)
}

// server closes the engine (the server opens the store per request) and
// serves the timeline over the workspace.
func (w *workspace) server() *timeline.Server {
	w.t.Helper()
	w.close()
	open := func(ctx context.Context) (history.Source, error) {
		ws, err := history.Find(w.root)
		if err != nil {
			return nil, err
		}
		return history.Open(ctx, ws, history.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	}
	s, err := timeline.New(open, timeline.Options{Token: token, Hosts: []string{host, "localhost:4711"}, Root: w.root})
	if err != nil {
		w.t.Fatal(err)
	}
	return s
}

// do sends a request with the token header unless tok is "".
func do(t *testing.T, h http.Handler, method, target, tok string, body string, hdr ...string) *httptest.ResponseRecorder {
	t.Helper()
	var r *http.Request
	if body != "" {
		r = httptest.NewRequest(method, "http://"+host+target, strings.NewReader(body))
		r.Header.Set("Content-Type", "application/json")
	} else {
		r = httptest.NewRequest(method, "http://"+host+target, nil)
	}
	if tok != "" {
		r.Header.Set("X-Zerofs-Token", tok)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		if hdr[i] == "Host" {
			r.Host = hdr[i+1]
		} else {
			r.Header.Set(hdr[i], hdr[i+1])
		}
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, r)
	return rec
}

func decode[T any](t *testing.T, rec *httptest.ResponseRecorder) T {
	t.Helper()
	var v T
	if err := json.Unmarshal(rec.Body.Bytes(), &v); err != nil {
		t.Fatalf("decode %q: %v", rec.Body.String(), err)
	}
	return v
}

// TestRefused: without the token, with a Host that is not the listening
// address (DNS rebinding) or with another Origin, every API request is
// 403; the page itself (the same for everyone) needs only the right Host.
func TestRefused(t *testing.T) {
	w := newWorkspace(t)
	w.step("one")
	w.write("sh", "a", "a\n")
	s := w.server()
	for _, tc := range []struct {
		name, method, target, tok string
		hdr                       []string
	}{
		{"no token api", "GET", "/api/log", "", nil},
		{"no token diff", "GET", "/api/diff?a=1", "", nil},
		{"no token unknown path", "GET", "/nothing", "", nil},
		{"no token post page", "POST", "/", "", nil},
		{"wrong token", "GET", "/api/head", strings.Repeat("f", 32), nil},
		{"bad host", "GET", "/api/head", token, []string{"Host", "evil.example:4711"}},
		{"bad host page", "GET", "/", "", []string{"Host", "evil.example:4711"}},
		{"bad host static", "GET", "/static/app.js", "", []string{"Host", "evil.example:4711"}},
		{"bad host port", "GET", "/api/head", token, []string{"Host", "127.0.0.1:80"}},
		{"bad origin", "GET", "/api/head", token, []string{"Origin", "http://evil.example"}},
		{"origin other port", "GET", "/api/head", token, []string{"Origin", "http://127.0.0.1:9999"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := do(t, s, tc.method, tc.target, tc.tok, "", tc.hdr...)
			if rec.Code != http.StatusForbidden {
				t.Errorf("got %d, want 403: %s", rec.Code, rec.Body)
			}
		})
	}
	rec := do(t, s, "POST", "/api/rewind", "", `{"target":0}`)
	if rec.Code != http.StatusForbidden || w.read("a") != "a\n" {
		t.Errorf("rewind without token: got %d, a=%q; want 403 and a unchanged", rec.Code, w.read("a"))
	}

	// The page and its files, without the token.
	rec = do(t, s, "GET", "/", "", "")
	if rec.Code != 200 || !strings.Contains(rec.Body.String(), "zerofs") {
		t.Errorf("GET /: got %d %q", rec.Code, rec.Body.String()[:min(80, rec.Body.Len())])
	}
	want := map[string]string{
		"Content-Security-Policy":      "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'",
		"Cross-Origin-Resource-Policy": "same-origin",
		"Cross-Origin-Opener-Policy":   "same-origin",
		"X-Frame-Options":              "DENY",
		"Referrer-Policy":              "no-referrer",
	}
	for k, v := range want {
		if got := rec.Header().Get(k); got != v {
			t.Errorf("GET /: %s %q, want %q", k, got, v)
		}
	}
	for _, hdr := range [][]string{{"Origin", "http://" + host}, {"Host", "localhost:4711", "Origin", "http://localhost:4711"}} {
		if rec := do(t, s, "GET", "/api/head", token, "", hdr...); rec.Code != 200 {
			t.Errorf("%v: got %d, want 200: %s", hdr, rec.Code, rec.Body)
		}
	}
	for _, p := range []string{"/static/app.js", "/static/style.css"} {
		if rec := do(t, s, "GET", p, "", ""); rec.Code != 200 || rec.Body.Len() < 100 {
			t.Errorf("GET %s: got %d, %d bytes", p, rec.Code, rec.Body.Len())
		}
	}
}

// TestTokenHeaderOnly: issue 33. The token used to be kept in a cookie,
// which a browser sends to every port of 127.0.0.1 (any other local
// server got it) and which a page on another port could shadow with its
// own. Now only the X-Zerofs-Token header counts: the token in a cookie
// or in the query authenticates nothing, a bogus cookie locks nobody
// out, and no answer sets a cookie.
func TestTokenHeaderOnly(t *testing.T) {
	w := newWorkspace(t)
	w.step("one")
	w.write("sh", "a", "a\n")
	s := w.server()
	cookies := []string{
		"zerofs-token-4711=" + token,
		"zerofs-token=" + token,
		"zerofs-token-4711=" + token + "; zerofs-token=" + token + "; token=" + token,
	}
	for _, c := range cookies {
		for _, target := range []string{"/api/head", "/api/log", "/api/diff?a=1"} {
			if rec := do(t, s, "GET", target, "", "", "Cookie", c); rec.Code != http.StatusForbidden {
				t.Errorf("GET %s with Cookie %q only: got %d, want 403: %s", target, c, rec.Code, rec.Body)
			}
		}
		if rec := do(t, s, "POST", "/api/rewind", "", `{"target":0}`, "Cookie", c); rec.Code != http.StatusForbidden || w.read("a") != "a\n" {
			t.Errorf("rewind with Cookie %q only: got %d, a=%q; want 403 and a unchanged", c, rec.Code, w.read("a"))
		}
	}
	for _, target := range []string{"/api/head?token=" + token, "/api/log?token=" + token} {
		if rec := do(t, s, "GET", target, "", ""); rec.Code != http.StatusForbidden {
			t.Errorf("GET %s (the token in the query): got %d, want 403", target, rec.Code)
		}
	}
	// A cookie a page on another port set, bogus or not, does not stand
	// in the header's way.
	if rec := do(t, s, "GET", "/api/head", token, "", "Cookie", "zerofs-token-4711=bogus; zerofs-token=bogus"); rec.Code != 200 {
		t.Errorf("the header with a bogus cookie: got %d, want 200: %s", rec.Code, rec.Body)
	}
	// No answer sets a cookie.
	for _, tc := range []struct{ method, target, tok, body string }{
		{"GET", "/", "", ""}, {"GET", "/?token=" + token, "", ""}, {"GET", "/static/app.js", "", ""},
		{"GET", "/api/head", token, ""}, {"GET", "/api/log", token, ""}, {"GET", "/api/head", "", ""},
		{"POST", "/api/rewind", token, `{"target":0,"dryRun":true}`},
	} {
		rec := do(t, s, tc.method, tc.target, tc.tok, tc.body)
		if c := rec.Header().Values("Set-Cookie"); len(c) > 0 {
			t.Errorf("%s %s: sets cookies %q, want none", tc.method, tc.target, c)
		}
	}
	// The printed URL carries the token in its fragment, which no browser
	// sends.
	if u := timeline.URL(host, token); u != "http://"+host+"/#token="+token {
		t.Errorf("URL = %q", u)
	}
}

func TestLogAndDiff(t *testing.T) {
	w := newWorkspace(t)
	w.step("write a")
	w.write("sh", "a", "one\ntwo\nthree\n")
	w.write("sh", "c", "to be renamed\n")
	edit := w.step("edit a")
	w.write("sed", "a", "one\nTWO\nthree\nfour\n")
	w.write("python3", "bin", "\x00\x01\x02binary")
	w.step("rename c")
	w.change("mv", func() {
		if err := os.Rename(filepath.Join(w.root, "c"), filepath.Join(w.root, "d")); err != nil {
			t.Fatal(err)
		}
	}, "c", "d")
	w.step("chmod a")
	w.change("chmod", func() { os.Chmod(filepath.Join(w.root, "a"), 0o755) }, "a")
	s := w.server()

	rec := do(t, s, "GET", "/api/log", token, "")
	if rec.Code != 200 {
		t.Fatalf("log: %d %s", rec.Code, rec.Body)
	}
	page := decode[timeline.Page](t, rec)
	var labels []string
	for _, e := range page.Entries {
		labels = append(labels, e.Label)
	}
	if got, want := strings.Join(labels, ","), "chmod a,rename c,edit a,write a"; got != want {
		t.Fatalf("labels %s, want %s (newest first)", got, want)
	}
	if page.More {
		t.Errorf("more = true at the start of history")
	}
	byLabel := map[string]timeline.Item{}
	for _, e := range page.Entries {
		byLabel[e.Label] = e
	}
	ed := byLabel["edit a"]
	if ed.Sequence != edit || ed.Before < edit-1 || ed.Before >= ed.End {
		t.Errorf("edit a: sequence %d before %d end %d, want %d and before in [%d, end)", ed.Sequence, ed.Before, ed.End, edit, edit-1)
	}
	if got := fmt.Sprint(ed.Procs); got != "[{4242 sed} {4242 python3}]" {
		t.Errorf("edit a procs %s", got)
	}
	if l := ed.Lines["a"]; l != (timeline.Lines{Added: 2, Removed: 1}) {
		t.Errorf("edit a: lines of a %+v, want +2 -1", l)
	}
	if l := ed.Lines["bin"]; !l.Binary {
		t.Errorf("edit a: bin %+v, want binary", l)
	}
	changes := map[string]string{}
	for _, c := range byLabel["rename c"].Changes {
		changes[c.Path] = c.Change + " from " + c.From
	}
	if changes["d"] != "renamed from c" {
		t.Errorf("rename c changes %v, want d renamed from c", changes)
	}
	if l, ok := byLabel["rename c"].Lines["d"]; !ok || l != (timeline.Lines{}) {
		t.Errorf("rename c: lines of d %+v (%v), want +0 -0", l, ok)
	}
	ch := byLabel["chmod a"].Changes
	if len(ch) != 1 || ch[0].Change != history.ChangeMode || ch[0].OldMode&0o777 != 0o644 || ch[0].Mode&0o777 != 0o755 {
		t.Errorf("chmod a changes %+v, want a mode 644 -> 755", ch)
	}

	q := fmt.Sprintf("/api/diff?a=%d&b=%d&path=a&path=bin", ed.Before, ed.End)
	rec = do(t, s, "GET", q, token, "")
	if rec.Code != 200 {
		t.Fatalf("diff: %d %s", rec.Code, rec.Body)
	}
	fds := decode[[]timeline.FileDiff](t, rec)
	if len(fds) != 2 || fds[0].Path != "a" || fds[1].Path != "bin" {
		t.Fatalf("diff %+v, want a and bin", fds)
	}
	if !strings.Contains(fds[0].Text, "-two\n+TWO\n") || fds[0].Binary {
		t.Errorf("diff of a:\n%s", fds[0].Text)
	}
	if !fds[1].Binary {
		t.Errorf("bin not marked binary: %+v", fds[1])
	}
	for _, bad := range []string{"/api/diff?a=x", "/api/diff?a=1&path=../etc", "/api/diff?a=999999", "/api/log?limit=0", "/api/log?before=-1"} {
		if rec := do(t, s, "GET", bad, token, ""); rec.Code != http.StatusBadRequest || decode[map[string]string](t, rec)["error"] == "" {
			t.Errorf("GET %s: got %d %s, want 400 with an error", bad, rec.Code, rec.Body)
		}
	}
}

// TestActions: each action's dry run previews and changes nothing; applied,
// it changes the workspace and its entry heads the log; undone from that
// entry, the workspace is back.
func TestActions(t *testing.T) {
	w := newWorkspace(t)
	w.step("one")
	w.write("sh", "a", "a1\n")
	w.write("sh", "b", "b1\n")
	two := w.step("two")
	w.write("sh", "a", "a2\n")
	w.write("sh", "n", "new\n")
	three := w.step("three")
	w.write("sh", "b", "b3\n")
	s := w.server()
	state := func() string { return w.read("a") + w.read("b") + w.read("n") }
	start := state()

	type answer = timeline.RewindAnswer
	for _, tc := range []struct {
		name    string
		req     string
		preview string // action path, sorted
		after   string
	}{
		{"revert", fmt.Sprintf(`{"revert":%d}`, two), "delete n,restore a", "a1\nb3\n<open " + filepath.Join(w.root, "n") + ": no such file or directory>"},
		{"rewind", fmt.Sprintf(`{"target":%d}`, three-1), "restore b", "a2\nb1\nnew\n"},
		{"restore", fmt.Sprintf(`{"target":%d,"paths":["a"]}`, two-1), "restore a", "a1\nb3\nnew\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dry := strings.TrimSuffix(tc.req, "}") + `,"dryRun":true}`
			rec := do(t, s, "POST", "/api/rewind", token, dry)
			if rec.Code != 200 {
				t.Fatalf("dry run: %d %s", rec.Code, rec.Body)
			}
			ans := decode[answer](t, rec)
			var got []string
			for _, c := range ans.Report.Preview {
				got = append(got, c.Action+" "+c.Path)
			}
			slices.Sort(got)
			if strings.Join(got, ",") != tc.preview || !ans.Report.DryRun {
				t.Errorf("preview %v (dry %v), want %s", got, ans.Report.DryRun, tc.preview)
			}
			if state() != start {
				t.Fatalf("the dry run changed the workspace: %q", state())
			}
			stamp := decode[timeline.Head](t, do(t, s, "GET", "/api/head", token, "")).Stamp
			rec = do(t, s, "POST", "/api/rewind", token, tc.req)
			if rec.Code != 200 {
				t.Fatalf("apply: %d %s", rec.Code, rec.Body)
			}
			if now := decode[timeline.Head](t, do(t, s, "GET", "/api/head", token, "")).Stamp; now == stamp || now == "" {
				t.Errorf("head stamp %q before the rewind, %q after: want a change", stamp, now)
			}
			ans = decode[answer](t, rec)
			if state() != tc.after {
				t.Errorf("after: %q, want %q", state(), tc.after)
			}
			page := decode[timeline.Page](t, do(t, s, "GET", "/api/log?limit=1", token, ""))
			top := page.Entries[0]
			if top.Type != history.BlockRewind || top.Sequence != ans.Report.Sequence || !page.More {
				t.Fatalf("top entry %+v, want the rewind %d", top.Entry, ans.Report.Sequence)
			}
			// The page's undo: rewind to just before the rewind.
			if top.Before != ans.Report.CheckpointSequence-1 {
				t.Errorf("rewind entry before %d, want checkpoint-1 = %d", top.Before, ans.Report.CheckpointSequence-1)
			}
			rec = do(t, s, "POST", "/api/rewind", token, fmt.Sprintf(`{"target":%d}`, top.Before))
			if rec.Code != 200 || state() != start {
				t.Errorf("undo: %d %s; state %q, want %q", rec.Code, rec.Body, state(), start)
			}
		})
	}

	for _, tc := range []struct {
		method, body, ctype string
		code                int
	}{
		{"POST", `{"target":1,"revert":2}`, "application/json", http.StatusBadRequest},
		{"POST", `{"target":99999}`, "application/json", http.StatusBadRequest},
		{"POST", `7`, "application/json", http.StatusBadRequest},
		{"POST", `{"target":1}`, "text/plain", http.StatusUnsupportedMediaType},
		{"GET", ``, "", http.StatusMethodNotAllowed},
	} {
		r := httptest.NewRequest(tc.method, "http://"+host+"/api/rewind", strings.NewReader(tc.body))
		r.Header.Set("X-Zerofs-Token", token)
		if tc.ctype != "" {
			r.Header.Set("Content-Type", tc.ctype)
		}
		rec := httptest.NewRecorder()
		s.ServeHTTP(rec, r)
		if rec.Code != tc.code {
			t.Errorf("%s %q (%s): got %d %s, want %d", tc.method, tc.body, tc.ctype, rec.Code, rec.Body, tc.code)
		}
	}
	if state() != start {
		t.Errorf("refused requests changed the workspace: %q", state())
	}

	// A rewind that changes nothing records nothing; a path that matches
	// nothing is refused, typed, and records nothing either.
	stamp := decode[timeline.Head](t, do(t, s, "GET", "/api/head", token, "")).Stamp
	headNow := func() string { return decode[timeline.Head](t, do(t, s, "GET", "/api/head", token, "")).Stamp }
	rec := do(t, s, "POST", "/api/rewind", token, `{"target":`+stamp+`}`)
	if ans := decode[answer](t, rec); rec.Code != 200 || !ans.Report.Unchanged || ans.Report.Sequence != 0 || headNow() != stamp {
		t.Errorf("rewind to head: %d %s; head %s, want 200, unchanged, head %s", rec.Code, rec.Body, headNow(), stamp)
	}
	rec = do(t, s, "POST", "/api/rewind", token, `{"target":0,"paths":["nonexistent"]}`)
	if ans := decode[answer](t, rec); rec.Code != http.StatusBadRequest || ans.Report.Error != "no-such-path" ||
		!strings.Contains(ans.Error, "nonexistent") || headNow() != stamp {
		t.Errorf("rewind of a path that matches nothing: %d %s; head %s, want 400, no-such-path, head %s", rec.Code, rec.Body, headNow(), stamp)
	}
}

// TestPaging10000: with 10,000 steps (one in ten writing a file), the
// first page holds the newest 50 with their line counts, and paging with
// before and limit (and all=1: the steps that changed nothing too) visits
// every step once, newest first.
func TestPaging10000(t *testing.T) {
	const n = 10000
	start := time.Now()
	// Ten thousand steps are ten thousand fsyncs: on tmpfs, where there is
	// one, so the test measures the timeline and not the disk.
	root := t.TempDir()
	if d, err := os.MkdirTemp("/dev/shm", "zerofs-timeline-"); err == nil {
		t.Cleanup(func() { os.RemoveAll(d) })
		root = d
	}
	w := newWorkspaceIn(t, root)
	seqs := make([]record.Seq, 0, n)
	for i := range n {
		seqs = append(seqs, w.step(fmt.Sprintf("step %d", i)))
		if i%10 == 9 { // one step in ten writes (the others read, say)
			w.write("agent", fmt.Sprintf("f%d", i%7), fmt.Sprintf("%d\n", i))
		}
	}
	t0 := time.Now()
	s := w.server()
	t.Logf("built in %v", t0.Sub(start))
	page := decode[timeline.Page](t, do(t, s, "GET", "/api/log", token, ""))
	t.Logf("first page in %v", time.Since(t0))
	if len(page.Entries) != timeline.DefaultLimit || !page.More {
		t.Fatalf("first page: %d entries, more %v; want %d and more", len(page.Entries), page.More, timeline.DefaultLimit)
	}
	if page.Entries[0].Label != fmt.Sprintf("step %d", n-1) || page.Entries[0].Sequence != seqs[n-1] {
		t.Errorf("first entry %q %d, want the newest step", page.Entries[0].Label, page.Entries[0].Sequence)
	}
	if l := page.Entries[0].Lines; l[fmt.Sprintf("f%d", (n-1)%7)] != (timeline.Lines{Added: 1, Removed: 1}) {
		t.Errorf("newest entry's lines %v, want +1 -1", l)
	}
	got := 0
	before := ""
	for pages := 0; ; pages++ {
		if pages > n/timeline.MaxLimit+1 {
			t.Fatalf("paging does not end")
		}
		page := decode[timeline.Page](t, do(t, s, "GET", fmt.Sprintf("/api/log?all=1&limit=%d%s", timeline.MaxLimit, before), token, ""))
		for _, e := range page.Entries {
			want := n - 1 - got
			if e.Sequence != seqs[want] || e.Label != fmt.Sprintf("step %d", want) {
				t.Fatalf("entry %d: %q %d, want step %d at %d", got, e.Label, e.Sequence, want, seqs[want])
			}
			got++
		}
		if !page.More {
			break
		}
		before = fmt.Sprintf("&before=%d", page.Entries[len(page.Entries)-1].Sequence)
	}
	if got != n {
		t.Errorf("paged over %d entries, want %d", got, n)
	}
	// A limit above the maximum is cut to it.
	page = decode[timeline.Page](t, do(t, s, "GET", "/api/log?limit=100000", token, ""))
	if len(page.Entries) != timeline.MaxLimit {
		t.Errorf("limit=100000: %d entries, want %d", len(page.Entries), timeline.MaxLimit)
	}
}

// TestLogThinned: the log shows a gc's thin with what it gave up, and
// marks the steps whose states went.
func TestLogThinned(t *testing.T) {
	w := newWorkspace(t)
	w.close()
	dir, err := os.Open(w.root)
	if err != nil {
		t.Fatal(err)
	}
	defer dir.Close()
	clock := time.Date(2026, 1, 5, 9, 0, 0, 0, time.UTC)
	w.eng, err = rewind.Open(context.Background(), dir, rewind.Options{StoreDir: filepath.Join(w.root, ".zero"),
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Now: func() time.Time { return clock }})
	if err != nil {
		t.Fatal(err)
	}
	for day := range 2 {
		for i := range 2 {
			clock = time.Date(2026, 1, 5+day, 9+i, 0, 0, 0, time.UTC)
			w.step(fmt.Sprintf("day %d step %d", day, i))
			w.write("sh", "a", fmt.Sprintf("%d %d\n", day, i))
		}
	}
	res, err := w.eng.GCWith(context.Background(), record.GCRequest{ThinBefore: w.eng.Head()})
	if err != nil || res.Thinned == nil || res.Thinned.Steps != 2 {
		t.Fatalf("thin: %+v, %v; want the states of 2 steps gone", res.Thinned, err)
	}
	s := w.server()
	page := decode[timeline.Page](t, do(t, s, "GET", "/api/log", token, ""))
	thinned := map[string]bool{}
	var gc *timeline.Item
	for i, e := range page.Entries {
		if e.Type == history.BlockPruned {
			gc = &page.Entries[i]
		}
		thinned[e.Label] = e.StatesThinned
	}
	if gc == nil || gc.Thinned == nil || !reflect.DeepEqual(*gc.Thinned, *res.Thinned) {
		t.Fatalf("the log's gc entry %+v, want the thin %+v", gc, res.Thinned)
	}
	want := map[string]bool{"day 0 step 0": true, "day 0 step 1": true, "day 1 step 0": true, "day 1 step 1": true, "": false}
	if !reflect.DeepEqual(thinned, want) {
		t.Errorf("steps marked thinned: %v, want %v", thinned, want)
	}
}

// TestLogTurns: a turn (a person's prompt) is an entry of its own whose
// before is the state just before the prompt, each step names its turn,
// and a step that changed nothing is listed only with all=1.
func TestLogTurns(t *testing.T) {
	w := newWorkspace(t)
	w.step("Edit a")
	w.write("agent", "a", "1\n")
	ev, err := w.eng.BeginTurn(context.Background(), []byte(`{"prompt":"make it 2","agent":"claude","agentSession":"s1"}`))
	if err != nil {
		t.Fatal(err)
	}
	turn := ev.Seq
	edit := w.step("Edit a again")
	w.write("agent", "a", "2\n")
	w.step("Read a") // changes nothing
	s := w.server()
	page := decode[timeline.Page](t, do(t, s, "GET", "/api/log", token, ""))
	var got []string
	for _, e := range page.Entries {
		got = append(got, fmt.Sprintf("%s %d %q turn %d before %d", e.Type, e.Sequence, e.Label+e.Prompt, e.Turn, e.Before))
	}
	want := []string{
		fmt.Sprintf("step %d %q turn %d before %d", edit, "Edit a again", turn, edit),
		fmt.Sprintf("turn %d %q turn 0 before %d", turn, "make it 2", turn-1),
		fmt.Sprintf("step 1 %q turn 0 before 1", "Edit a"),
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("page:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	all := decode[timeline.Page](t, do(t, s, "GET", "/api/log?all=1", token, ""))
	if len(all.Entries) != 4 || all.Entries[0].Label != "Read a" {
		t.Errorf("all=1: %d entries, first %q; want 4, Read a first", len(all.Entries), all.Entries[0].Label)
	}
	// "Rewind to before this prompt" is a rewind to the turn's before.
	rep := do(t, s, "POST", "/api/rewind", token, fmt.Sprintf(`{"target": %d}`, page.Entries[1].Before))
	if rep.Code != 200 || w.read("a") != "1\n" {
		t.Errorf("rewind to before the prompt: %d %s; a is %q", rep.Code, rep.Body, w.read("a"))
	}
}

// TestNonUTF8Names: issue 14, defect 4. The timeline restored and diffed
// a name that is not UTF-8 by its readable form, which names another file
// (bad\xff read as bad\uFFFD). The log gives the exact bytes (pathBytes);
// a restore sends them back (pathsBytes), a diff asks by the bytes
// (path=bad%FF), and each answer names the file by its bytes.
func TestNonUTF8Names(t *testing.T) {
	w := newWorkspace(t)
	names := []string{"bad\xff", "bad\xfe", "bad\ufffd"}
	w.step("one")
	for _, n := range names {
		w.write("sh", n, "1\n")
	}
	two := w.step("two")
	for _, n := range names {
		w.write("sh", n, "2\n")
	}
	w.step("three")
	s := w.server()
	raw := do(t, s, "GET", "/api/log?limit=10", token, "").Body.String()
	if !strings.Contains(raw, `"pathBytes":"YmFk/w=="`) || !strings.Contains(raw, `"pathBytes":"YmFk/g=="`) {
		t.Errorf("log lacks the exact bytes: %s", raw)
	}
	rec := do(t, s, "GET", fmt.Sprintf("/api/diff?a=%d&path=bad%%FF", two-1), token, "")
	if rec.Code != 200 {
		t.Fatalf("diff: %d %s", rec.Code, rec.Body)
	}
	fds := decode[[]timeline.FileDiff](t, rec)
	if len(fds) != 1 || fds[0].PathBytes != "YmFk/w==" {
		t.Errorf("diff of bad\\xff = %+v, want one diff named by its bytes", fds)
	}
	rec = do(t, s, "POST", "/api/rewind", token, fmt.Sprintf(`{"target":%d,"paths":["bad\ufffd"],"pathsBytes":["YmFk/w=="]}`, two-1))
	if rec.Code != 200 {
		t.Fatalf("rewind: %d %s", rec.Code, rec.Body)
	}
	if !strings.Contains(rec.Body.String(), `"pathsBytes":["YmFk/w=="]`) {
		t.Errorf("rewind answer lacks the path's bytes: %s", rec.Body)
	}
	for i, n := range names {
		if got, want := w.read(n), map[bool]string{true: "1\n", false: "2\n"}[i == 0]; got != want {
			t.Errorf("after restoring bad\\xff: %q = %q, want %q", n, got, want)
		}
	}
	// Not UTF-8 in the JSON itself: refused, not read as another name.
	rec = do(t, s, "POST", "/api/rewind", token, fmt.Sprintf("{\"target\":%d,\"paths\":[\"bad\xfe\"]}", two-1))
	if rec.Code != http.StatusBadRequest || w.read("bad\xfe") != "2\n" || w.read("bad\ufffd") != "2\n" {
		t.Errorf("a request with raw bytes: %d %s", rec.Code, rec.Body)
	}
}

// TestPersonChange: a person's change (a process outside the agent's tree
// while an agent session is known) is an entry of its own in the log, and
// a rewind's preview names it as overwritten, an undo's as left alone.
func TestPersonChange(t *testing.T) {
	w := newWorkspace(t)
	agent := rewind.Proc{PID: 100, Start: 10, Comm: "claude"}
	lin := func(ps ...rewind.Proc) rewind.Caller {
		return rewind.Caller{PID: ps[0].PID, Comm: ps[0].Comm, Lineage: func() []rewind.Proc { return ps }}
	}
	hook := lin(rewind.Proc{PID: 101, Start: 11, Comm: "zerofs"}, agent)
	tool, editor := lin(rewind.Proc{PID: 102, Start: 12, Comm: "bash"}, agent), lin(rewind.Proc{PID: 300, Start: 30, Comm: "vim"})
	write := func(who rewind.Caller, p, content string) {
		release, _, err := w.eng.Begin(context.Background(), who, rewind.Change{Path: p})
		if err != nil {
			t.Fatal(err)
		}
		defer release()
		if err := os.WriteFile(filepath.Join(w.root, p), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(tool, "notes", "n0\n")
	ev, err := w.eng.BeginStepAs(context.Background(), hook, "Edit", []byte(`{"agentSession":"s1"}`))
	if err != nil {
		t.Fatal(err)
	}
	write(tool, "app", "agent\n")
	write(editor, "notes", "person\n")
	s := w.server()
	page := decode[timeline.Page](t, do(t, s, "GET", "/api/log", token, ""))
	var person bool
	for _, e := range page.Entries {
		var paths []string
		for _, c := range e.Changes {
			paths = append(paths, c.Path)
		}
		switch {
		case e.Person:
			person = true
			if strings.Join(paths, ",") != "notes" {
				t.Errorf("the person's entry changed %v, want notes", paths)
			}
		case e.Sequence == ev.Seq && strings.Join(paths, ",") != "app":
			t.Errorf("the agent's step changed %v, want app", paths)
		}
	}
	if !person {
		t.Errorf("no entry for the person's change: %+v", page.Entries)
	}
	for _, tc := range []struct{ req, want string }{
		{fmt.Sprintf(`{"target":%d,"dryRun":true}`, ev.Seq), "overwrite"},
		{`{"undo":true,"dryRun":true}`, "kept"},
	} {
		ans := decode[timeline.RewindAnswer](t, do(t, s, "POST", "/api/rewind", token, tc.req))
		if f := ans.Report.Foreign; len(f) != 1 || f[0].Path != "notes" || f[0].Why != rewind.WhyPerson || f[0].Kept != (tc.want == "kept") {
			t.Errorf("%s: foreign %+v, want notes %s", tc.req, f, tc.want)
		}
	}
}
