package main

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/zerofs/zerofs/history"
	"github.com/zerofs/zerofs/internal/testsupport"
)

// mcpCall is one tool call of a scripted MCP session, and mcpResult what
// came back: the text, the structured result (checked against the tool's
// output schema by the client that made the call), whether it is a tool
// error.
type (
	mcpCall struct {
		Name      string         `json:"name"`
		Args      map[string]any `json:"args"`
		WantError bool           `json:"wantError,omitempty"`
	}
	mcpResult struct {
		Text       string         `json:"text"`
		Structured map[string]any `json:"structured"`
		IsError    bool           `json:"isError"`
	}
)

func b64(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }

// The names nobody makes: two that are not UTF-8 and one that is U+FFFD
// itself, which encoding/json would have made one name; and a symlink
// whose target is not UTF-8.
const (
	nameFF   = "nb/bad\xff"
	nameFE   = "nb/bad\xfe"
	nameFFFD = "nb/bad\ufffd"
)

// TestMCPNonUTF8Names: issue 14, defect 4, in the MCP server. Names that
// are not UTF-8 came back as U+FFFD in the structured results, so
// "bad\xff" and "bad\xfe" (and "bad\uFFFD") were one name, and no tool
// could be asked about one of them. Each result carries such a name's
// exact bytes beside its readable form (path_bytes, paths_bytes, ...), as
// `log --json` does, the tools take the bytes back (path_bytes,
// paths_bytes), and the text quotes the name. On a real mount, with the
// names made by a second user (nobody), driven by the Go SDK's client and,
// when it is installed, by the official TypeScript SDK's.
func TestMCPNonUTF8Names(t *testing.T) {
	built.NeedFUSE(t)
	testsupport.RequireSetpriv(t)
	dir, err := os.MkdirTemp("", "zerofs-mcpnames-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	ws := filepath.Join(dir, "ws")
	for _, d := range []string{dir, ws, filepath.Join(ws, "nb")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		os.Chmod(d, 0o755)
	}
	if err := os.Chown(filepath.Join(ws, "nb"), 65534, 65534); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(ws, "keep.txt"), "keep\n")
	mountT(t, ws, "--allow-other")

	nobody := func(script string) {
		t.Helper()
		cmd := exec.Command("setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "/bin/sh", "-ec", script)
		cmd.Dir = ws
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("as nobody: %s: %v\n%s", script, err, out)
		}
	}
	binOK(t, ws, "step", "Add odd names")
	nobody(`printf 'ff\n' > "$(printf 'nb/bad\377')"; printf 'fe\n' > "$(printf 'nb/bad\376')"; printf 'fffd\n' > "$(printf 'nb/bad\357\277\275')"; ln -s "$(printf 'bad\377')" nb/link`)
	for _, n := range []string{nameFF, nameFE, nameFFFD} {
		var st syscall.Stat_t
		if err := syscall.Lstat(filepath.Join(ws, n), &st); err != nil || st.Uid != 65534 {
			t.Fatalf("%q: owner %d, %v; want nobody", n, st.Uid, err)
		}
	}
	binOK(t, ws, "step", "Edit bad\\xff")
	nobody(`printf 'ff2\n' > "$(printf 'nb/bad\377')"`)

	var entries []history.Entry
	if err := json.Unmarshal([]byte(binOK(t, ws, "log", "--json")), &entries); err != nil {
		t.Fatal(err)
	}
	var edit float64
	for _, e := range entries {
		if e.Label == "Edit bad\\xff" {
			edit = float64(e.Sequence)
		}
	}
	if edit == 0 {
		t.Fatalf("no step Edit in %+v", entries)
	}

	calls := []mcpCall{
		{Name: "zerofs_log", Args: map[string]any{}},
		{Name: "zerofs_log", Args: map[string]any{"paths_bytes": []string{b64(nameFE)}}},
		{Name: "zerofs_show", Args: map[string]any{"seq": edit, "path_bytes": b64(nameFF)}},
		{Name: "zerofs_show", Args: map[string]any{"seq": edit, "path": nameFFFD}},
		{Name: "zerofs_show", Args: map[string]any{"seq": edit, "path": "nb"}},
		{Name: "zerofs_show", Args: map[string]any{"seq": edit, "path": "nb/link"}},
		{Name: "zerofs_diff", Args: map[string]any{"from": edit, "paths": []string{nameFFFD}, "paths_bytes": []string{b64(nameFF)}}},
		{Name: "zerofs_rewind", Args: map[string]any{"seq": edit, "paths_bytes": []string{b64(nameFF)}, "dry_run": true}},
		{Name: "zerofs_rewind", Args: map[string]any{"seq": edit, "paths": []string{nameFFFD}, "paths_bytes": []string{b64(nameFF)}}},
		{Name: "zerofs_show", Args: map[string]any{"seq": edit, "path_bytes": "not base64!"}, WantError: true},
		{Name: "zerofs_rewind", Args: map[string]any{"seq": edit, "paths": []string{"a", "b"}, "paths_bytes": []string{b64(nameFF)}}, WantError: true},
	}
	check := func(t *testing.T, res []mcpResult) {
		t.Helper()
		if len(res) != len(calls) {
			t.Fatalf("%d results for %d calls", len(res), len(calls))
		}
		for i, r := range res {
			if r.IsError != calls[i].WantError {
				t.Fatalf("%s %v: error %v: %s", calls[i].Name, calls[i].Args, r.IsError, r.Text)
			}
			if !r.IsError {
				plainText(t, calls[i].Name+" text", r.Text)
			}
		}
		// zerofs_log: three files, three entries, each with its own bytes.
		var add map[string]any
		for _, e := range res[0].Structured["entries"].([]any) {
			if e := e.(map[string]any); e["label"] == "Add odd names" {
				add = e
			}
		}
		got := map[string]bool{}
		for _, c := range add["changes"].([]any) {
			c := c.(map[string]any)
			p, _ := c["path"].(string)
			if pb, ok := c["path_bytes"].(string); ok {
				if p != "nb/bad\ufffd" {
					t.Errorf("zerofs_log: path %q beside path_bytes %s, want the readable form", p, pb)
				}
				raw, err := base64.StdEncoding.DecodeString(pb)
				if err != nil {
					t.Errorf("zerofs_log: path_bytes %q: %v", pb, err)
				}
				p = string(raw)
			}
			got[p] = true
		}
		for _, n := range []string{nameFF, nameFE, nameFFFD, "nb/link"} {
			if !got[n] {
				t.Errorf("zerofs_log: step Add lacks %q: %v", n, add)
			}
		}
		for _, want := range []string{`"nb/bad\377"`, `"nb/bad\376"`} {
			if !strings.Contains(res[0].Text, want) {
				t.Errorf("zerofs_log text lacks %s:\n%s", want, res[0].Text)
			}
		}
		// zerofs_log paths_bytes: only the step that changed bad\xfe,
		// not the one that changed bad\xff.
		var labels []string
		for _, e := range res[1].Structured["entries"].([]any) {
			labels = append(labels, e.(map[string]any)["label"].(string))
		}
		if !slices.Equal(labels, []string{"Add odd names"}) {
			t.Errorf("zerofs_log paths_bytes bad\\xfe: steps %q, want only Add odd names", labels)
		}
		// zerofs_show by bytes, and the file really named U+FFFD.
		if s := res[2].Structured; s["content"] != "ff\n" || s["path_bytes"] != b64(nameFF) || s["path"] != "nb/bad\ufffd" {
			t.Errorf("zerofs_show path_bytes bad\\xff: %v", s)
		}
		if s := res[3].Structured; s["content"] != "fffd\n" || s["path_bytes"] != nil {
			t.Errorf("zerofs_show nb/bad\\uFFFD: %v", s)
		}
		// A directory's names, each with its own bytes.
		ents, _ := res[4].Structured["entries"].([]any)
		eb, _ := res[4].Structured["entries_bytes"].([]any)
		if len(ents) != 4 || len(eb) != 4 {
			t.Fatalf("zerofs_show nb: entries %v, entries_bytes %v", ents, eb)
		}
		names := map[string]bool{}
		for i := range ents {
			n := ents[i].(string)
			if b := eb[i].(string); b != "" {
				raw, _ := base64.StdEncoding.DecodeString(b)
				n = string(raw)
			}
			names[n] = true
		}
		for _, n := range []string{"bad\xff", "bad\xfe", "bad\ufffd", "link"} {
			if !names[n] {
				t.Errorf("zerofs_show nb: no %q in %v / %v", n, ents, eb)
			}
		}
		if !strings.Contains(res[4].Text, `"bad\377"`) || !strings.Contains(res[4].Text, `"bad\376"`) {
			t.Errorf("zerofs_show nb text: %q", res[4].Text)
		}
		if s := res[5].Structured; s["target_bytes"] != b64("bad\xff") || !strings.Contains(res[5].Text, `"bad\377"`) {
			t.Errorf("zerofs_show nb/link: %v %q", s, res[5].Text)
		}
		// zerofs_diff of bad\xff alone.
		if d := res[6].Structured["diff"].(string); !strings.Contains(d, "-ff\n+ff2\n") || strings.Contains(d, "fe") || !strings.Contains(d, `"a/nb/bad\377"`) {
			t.Errorf("zerofs_diff paths_bytes bad\\xff:\n%s", d)
		}
		// The dry run and the rewind act on bad\xff alone.
		for _, i := range []int{7, 8} {
			s := res[i].Structured
			if pb, _ := s["paths_bytes"].([]any); len(pb) != 1 || pb[0] != b64(nameFF) {
				t.Errorf("%s: paths_bytes %v, want [%s]", calls[i].Name, s["paths_bytes"], b64(nameFF))
			}
			if !strings.Contains(res[i].Text, `"nb/bad\377"`) && i == 7 {
				t.Errorf("zerofs_rewind dry_run text: %q", res[i].Text)
			}
		}
		pv, _ := res[7].Structured["preview"].([]any)
		if len(pv) != 1 || pv[0].(map[string]any)["path_bytes"] != b64(nameFF) {
			t.Errorf("zerofs_rewind dry_run preview: %v", pv)
		}
		for n, want := range map[string]string{nameFF: "ff\n", nameFE: "fe\n", nameFFFD: "fffd\n"} {
			if got := readFile(t, filepath.Join(ws, n)); got != want {
				t.Errorf("after the rewind of bad\\xff: %q holds %q, want %q", n, got, want)
			}
		}
		if !strings.Contains(res[9].Text, "path_bytes") || !strings.Contains(res[10].Text, "paths_bytes") {
			t.Errorf("errors: %q, %q", res[9].Text, res[10].Text)
		}
	}

	t.Run("GoSDK", func(t *testing.T) {
		c := newMCPClient(t, ws)
		var res []mcpResult
		for _, call := range calls {
			text, v, isErr := c.call(call.Name, call.Args)
			res = append(res, mcpResult{Text: text, Structured: v, IsError: isErr})
		}
		check(t, res)
	})
	// The same calls again from the state they began in.
	binOK(t, ws, "undo")
	if got := readFile(t, filepath.Join(ws, nameFF)); got != "ff2\n" {
		t.Fatalf("after undo: %q", got)
	}
	t.Run("TypeScriptSDK", func(t *testing.T) {
		check(t, runTSCalls(t, ws, calls))
	})
}

func readFile(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		return "<" + err.Error() + ">"
	}
	return string(b)
}

// runTSCalls makes calls with the official TypeScript SDK's client
// (testdata/mcp-ts/calls.mjs), which checks each structured result against
// the tool's output schema, against `zerofs mcp` started in dir. Without
// node and the SDK (ZEROFS_MCP_TS_SDK) it skips, or fails under
// ZEROFS_REQUIRE_MCP_TS=1.
func runTSCalls(t *testing.T, dir string, calls []mcpCall) []mcpResult {
	t.Helper()
	node, script := tsClient(t, "calls.mjs")
	in, _ := json.Marshal(calls)
	cmd := exec.Command(node, script, binary, dir)
	cmd.Stdin = bytes.NewReader(in)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("the TypeScript client failed: %v\n%s\n%s", err, stdout.String(), stderr.String())
	}
	var res []mcpResult
	for line := range strings.Lines(stdout.String()) {
		var r mcpResult
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("the TypeScript client wrote %q: %v", line, err)
		}
		res = append(res, r)
	}
	return res
}
