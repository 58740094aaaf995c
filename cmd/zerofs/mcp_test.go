package main

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// mcpSession starts the built `zerofs mcp` in dir and connects the SDK's
// client to it over stdio.
func mcpSession(t *testing.T, dir string) *mcp.ClientSession {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	cmd := exec.Command(binary, "mcp")
	cmd.Dir = dir
	client := mcp.NewClient(&mcp.Implementation{Name: "zerofs-test", Version: "v0"}, nil)
	cs, err := client.Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatalf("initialize: %v", err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// mcpClient is a session with the tools' output schemas, so that every
// structured result is checked against its tool's schema.
type mcpClient struct {
	t       *testing.T
	cs      *mcp.ClientSession
	schemas map[string]*jsonschema.Resolved
	tools   map[string]*mcp.Tool
}

func newMCPClient(t *testing.T, dir string) *mcpClient {
	c := &mcpClient{t: t, cs: mcpSession(t, dir), schemas: map[string]*jsonschema.Resolved{}, tools: map[string]*mcp.Tool{}}
	list, err := c.cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tool := range list.Tools {
		c.tools[tool.Name] = tool
		b, _ := json.Marshal(tool.OutputSchema)
		var s jsonschema.Schema
		if err := json.Unmarshal(b, &s); err != nil {
			t.Fatalf("%s: output schema %s: %v", tool.Name, b, err)
		}
		r, err := s.Resolve(nil)
		if err != nil {
			t.Fatalf("%s: output schema does not resolve: %v", tool.Name, err)
		}
		c.schemas[tool.Name] = r
	}
	return c
}

// call calls a tool and returns its text, its structured result (checked
// against the output schema on success) and whether it is a tool error.
func (c *mcpClient) call(name string, args any) (string, map[string]any, bool) {
	c.t.Helper()
	res, err := c.cs.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		c.t.Fatalf("%s: protocol error %v (a failure must be a tool error)", name, err)
	}
	var text strings.Builder
	for _, ct := range res.Content {
		if tc, ok := ct.(*mcp.TextContent); ok {
			text.WriteString(tc.Text)
		}
	}
	if res.IsError {
		return text.String(), nil, true
	}
	if res.StructuredContent == nil {
		c.t.Fatalf("%s: no structured content: %s", name, text.String())
	}
	b, _ := json.Marshal(res.StructuredContent)
	var v map[string]any
	json.Unmarshal(b, &v)
	if err := c.schemas[name].Validate(v); err != nil {
		c.t.Fatalf("%s: structured result %s does not match its output schema: %v", name, b, err)
	}
	return text.String(), v, false
}

func (c *mcpClient) ok(name string, args any) (string, map[string]any) {
	c.t.Helper()
	text, v, isErr := c.call(name, args)
	if isErr {
		c.t.Fatalf("%s %v: %s", name, args, text)
	}
	return text, v
}

func (c *mcpClient) fail(name string, args any, want ...string) string {
	c.t.Helper()
	text, _, isErr := c.call(name, args)
	if !isErr {
		c.t.Fatalf("%s %v succeeded (%s), want a tool error", name, args, text)
	}
	for _, w := range want {
		if !strings.Contains(text, w) {
			c.t.Errorf("%s %v: error %q lacks %q", name, args, text, w)
		}
	}
	return text
}

var mcpToolNames = []string{"zerofs_status", "zerofs_log", "zerofs_diff", "zerofs_show", "zerofs_step", "zerofs_rewind", "zerofs_undo", "zerofs_redo", "zerofs_revert", "zerofs_merge", "zerofs_branch", "zerofs_bisect"}

// TestMCPServer drives the real `zerofs mcp` binary with the Go SDK's
// client over stdio, as an agent would, with a regression check for each
// defect issue 17 found with real clients.
func TestMCPServer(t *testing.T) {
	ws := filepath.Join(t.TempDir(), "ws")
	if err := os.Mkdir(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(ws, "main.go"), "package main\n")
	mountT(t, ws)
	c := newMCPClient(t, ws)

	if ins := c.cs.InitializeResult().Instructions; !strings.Contains(ins, "zerofs_status") || !strings.Contains(ins, "dry_run") {
		t.Errorf("server instructions: %q", ins)
	}
	for _, name := range mcpToolNames {
		tool := c.tools[name]
		if tool == nil {
			t.Fatalf("no tool %s", name)
		}
		in, _ := json.Marshal(tool.InputSchema)
		out, _ := json.Marshal(tool.OutputSchema)
		// ["null","integer"] broke the Inspector CLI: plain types only.
		if strings.Contains(string(in), "null") || strings.Contains(string(out), "null") {
			t.Errorf("%s: a schema names null:\n%s\n%s", name, in, out)
		}
		if tool.Description == "" || tool.Annotations == nil || tool.OutputSchema == nil {
			t.Errorf("%s: description, annotations or output schema missing", name)
		}
		ro := slices.Contains([]string{"zerofs_status", "zerofs_log", "zerofs_diff", "zerofs_show"}, name)
		if tool.Annotations.ReadOnlyHint != ro {
			t.Errorf("%s: readOnlyHint %v, want %v", name, tool.Annotations.ReadOnlyHint, ro)
		}
		if !ro && name != "zerofs_step" && name != "zerofs_bisect" && (tool.Annotations.DestructiveHint == nil || !*tool.Annotations.DestructiveHint) {
			t.Errorf("%s: not marked destructive", name)
		}
	}
	// The defect: zerofs_rewind's description sent the agent to
	// zerofs_undo, which then undid the step before and deleted more work.
	// Now undo takes the rewind back, and the description says so (checked
	// below by doing it).
	if d := c.tools["zerofs_rewind"].Description; !strings.Contains(d, "zerofs_undo right after it takes it back") {
		t.Errorf("zerofs_rewind's description: %q", d)
	}

	_, st := c.ok("zerofs_status", map[string]any{})
	if st["recording"] != true || st["mounted"] != true {
		t.Fatalf("zerofs_status on a mount: %v", st)
	}

	// Arguments are never flags: a label "--help" is a step labelled so.
	_, step := c.ok("zerofs_step", map[string]any{"label": "--help"})
	if step["label"] != "--help" {
		t.Fatalf("zerofs_step --help: %v", step)
	}
	writeFile(t, filepath.Join(ws, "-rf.txt"), "dash\n")
	c.ok("zerofs_step", map[string]any{"label": "Edit main.go"})
	writeFile(t, filepath.Join(ws, "main.go"), "package main\n\nfunc main() {}\n")
	c.ok("zerofs_step", map[string]any{"label": "Read main.go"}) // changes nothing

	_, lg := c.ok("zerofs_log", map[string]any{})
	entries := lg["entries"].([]any)
	labels := []string{}
	for _, e := range entries {
		labels = append(labels, e.(map[string]any)["label"].(string))
	}
	if strings.Join(labels, ",") != "Edit main.go,--help" {
		t.Fatalf("zerofs_log labels %v, want the two steps that changed something", labels)
	}
	first := entries[0].(map[string]any)
	if _, ok := first["payload"]; ok {
		t.Errorf("zerofs_log returns payloads unasked: %v", first)
	}
	if ch := first["changes"].([]any)[0].(map[string]any); ch["path"] != "main.go" || ch["blob"] != nil {
		t.Errorf("zerofs_log change %v, want main.go without a blob id", ch)
	}
	editSeq := first["sequence"].(float64)
	_, all := c.ok("zerofs_log", map[string]any{"all": true, "details": true, "n": 1})
	if e := all["entries"].([]any); len(e) != 1 || e[0].(map[string]any)["label"] != "Read main.go" || all["more"] != true {
		t.Errorf("zerofs_log all n=1: %v", all)
	}
	c.fail("zerofs_log", map[string]any{"n": -1}, "n: -1 is less than 1")
	c.fail("zerofs_log", map[string]any{"n": 1e30}, "n: 1e+30 is more than")

	// -rf.txt is a path, not a flag, in show, diff and rewind.
	if out, _ := c.ok("zerofs_show", map[string]any{"seq": editSeq, "path": "-rf.txt"}); out != "dash\n" {
		t.Errorf("zerofs_show -rf.txt: %q", out)
	}
	if out, _ := c.ok("zerofs_diff", map[string]any{"from": editSeq - 1, "paths": []string{"main.go"}}); !strings.Contains(out, "+func main() {}") {
		t.Errorf("zerofs_diff: %q", out)
	}
	c.fail("zerofs_show", map[string]any{"seq": 0, "path": "../etc/passwd"}, "not a workspace path")
	c.fail("zerofs_rewind", map[string]any{"seq": 999999}, "999999", "seq")
	c.fail("zerofs_rewind", map[string]any{"seq": 1e20}, "seq: 100000000000000000000 is larger than any sequence can be")
	c.fail("zerofs_rewind", map[string]any{"seq": -1}, "seq: -1 is negative")
	c.fail("zerofs_rewind", map[string]any{"seq": 1.5}, "seq: 1.5 is not a whole number")
	c.fail("zerofs_rewind", map[string]any{"seq": "7"}, `seq: want a whole number, got "7"`)

	// Undo names the step; redo brings it back.
	out, undo := c.ok("zerofs_undo", map[string]any{})
	if undo["step"].(map[string]any)["label"] != "Edit main.go" || !strings.Contains(out, "Edit main.go") {
		t.Fatalf("zerofs_undo: %s %v", out, undo)
	}
	if got := readTrim(t, filepath.Join(ws, "main.go")); got != "package main" {
		t.Fatalf("after zerofs_undo main.go is %q", got)
	}
	c.ok("zerofs_redo", map[string]any{})
	edited := "package main\n\nfunc main() {}"
	if got := readTrim(t, filepath.Join(ws, "main.go")); got != edited {
		t.Fatalf("after zerofs_redo main.go is %q", got)
	}

	// A dry run changes nothing; a rewind returns `before`, and a rewind
	// to it takes the rewind back.
	_, dry := c.ok("zerofs_rewind", map[string]any{"seq": editSeq - 1, "dry_run": true})
	if dry["dry_run"] != true || len(dry["preview"].([]any)) == 0 || readTrim(t, filepath.Join(ws, "main.go")) != edited {
		t.Fatalf("zerofs_rewind dry_run: %v", dry)
	}
	_, rw := c.ok("zerofs_rewind", map[string]any{"seq": editSeq - 1, "paths": []string{"-rf.txt", "main.go"}})
	if got := readTrim(t, filepath.Join(ws, "main.go")); got != "package main" {
		t.Fatalf("after zerofs_rewind main.go is %q", got)
	}
	c.ok("zerofs_rewind", map[string]any{"seq": rw["before"]})
	if got := readTrim(t, filepath.Join(ws, "main.go")); got != edited {
		t.Fatalf("rewinding to `before` left main.go %q", got)
	}
	// As its description says, zerofs_undo right after a rewind takes the
	// rewind back (and not the step before it).
	c.ok("zerofs_rewind", map[string]any{"seq": editSeq - 1})
	if got := readTrim(t, filepath.Join(ws, "main.go")); got != "package main" {
		t.Fatalf("after zerofs_rewind main.go is %q", got)
	}
	c.ok("zerofs_undo", map[string]any{})
	if got := readTrim(t, filepath.Join(ws, "main.go")); got != edited {
		t.Fatalf("zerofs_undo after a rewind left main.go %q, want the rewind taken back", got)
	}
	// A rewind that changes nothing says so and records nothing.
	_, st1 := c.ok("zerofs_status", map[string]any{})
	unText, un := c.ok("zerofs_rewind", map[string]any{"seq": st1["head"]})
	if _, st2 := c.ok("zerofs_status", map[string]any{}); un["unchanged"] != true || un["sequence"] != nil || st2["head"] != st1["head"] ||
		!strings.Contains(unText, "nothing to change") {
		t.Fatalf("zerofs_rewind to head: %s %v; head %v, was %v", unText, un, st2["head"], st1["head"])
	}

	// A change made outside any step, which a rewind overwrites: the
	// warning is in the result.
	writeFile(t, filepath.Join(ws, "main.go"), "package main // by hand\n")
	out, w := c.ok("zerofs_rewind", map[string]any{"seq": editSeq - 1})
	if ws, _ := w["warnings"].([]any); len(ws) == 0 || !strings.Contains(ws[0].(string), "main.go") || !strings.Contains(out, "warning") {
		t.Errorf("zerofs_rewind over a change by hand: no warning in %s / %v", out, w)
	}

	// A revert refused for its conflicts names the MCP argument.
	c.ok("zerofs_step", map[string]any{"label": "A"})
	writeFile(t, filepath.Join(ws, "f.txt"), "a\n")
	_, lg = c.ok("zerofs_log", map[string]any{"n": 1})
	a := lg["entries"].([]any)[0].(map[string]any)["sequence"]
	c.ok("zerofs_step", map[string]any{"label": "B"})
	writeFile(t, filepath.Join(ws, "f.txt"), "b\n")
	msg := c.fail("zerofs_revert", map[string]any{"seq": a}, "f.txt", "force: true")
	if strings.Contains(msg, "--force") {
		t.Errorf("zerofs_revert names a CLI flag: %q", msg)
	}
	c.ok("zerofs_revert", map[string]any{"seq": a, "force": true})
	if _, err := os.Lstat(filepath.Join(ws, "f.txt")); !os.IsNotExist(err) {
		t.Errorf("after a forced revert of A, f.txt exists (%v)", err)
	}
	// Wrong types are errors, and the server lives on.
	res, err := c.cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "zerofs_show", Arguments: map[string]any{"seq": "x"}})
	if err == nil && !res.IsError {
		t.Errorf("zerofs_show with seq \"x\" succeeded")
	}
	c.ok("zerofs_status", map[string]any{})
}

// TestMCPLogDefault: zerofs_log returns the last 20 entries unless asked,
// and says there are more.
func TestMCPLogDefault(t *testing.T) {
	s := newStore(t, map[string]string{"a": "0"})
	for i := range 25 {
		s.step("step " + itoaInt(i))
		s.write("a", itoaInt(i+1))
	}
	s.close()
	c := newMCPClient(t, s.ws)
	_, lg := c.ok("zerofs_log", map[string]any{})
	if n := len(lg["entries"].([]any)); n != 20 || lg["more"] != true {
		t.Errorf("zerofs_log: %d entries, more %v; want 20 and more", n, lg["more"])
	}
	_, lg = c.ok("zerofs_log", map[string]any{"n": 100})
	if n := len(lg["entries"].([]any)); n != 25 || lg["more"] != false {
		t.Errorf("zerofs_log n 100: %d entries, more %v; want 25", n, lg["more"])
	}
	_, st := c.ok("zerofs_status", map[string]any{})
	if st["recording"] != false || len(st["warnings"].([]any)) == 0 {
		t.Errorf("zerofs_status unmounted: %v", st)
	}
}

func itoaInt(i int) string { return strings.TrimSpace(string(must(json.Marshal(i)))) }

// TestMCPOutsideWorkspace: a server started outside any workspace answers
// initialize and lists its tools, and each tool says why it cannot work.
func TestMCPOutsideWorkspace(t *testing.T) {
	c := newMCPClient(t, t.TempDir())
	if len(c.tools) != len(mcpToolNames) {
		t.Fatalf("tools %v", c.tools)
	}
	for name, args := range map[string]any{
		"zerofs_status": map[string]any{}, "zerofs_log": map[string]any{}, "zerofs_step": map[string]any{"label": "x"},
		"zerofs_undo": map[string]any{}, "zerofs_diff": map[string]any{"from": 0}, "zerofs_show": map[string]any{"seq": 0, "path": "a"},
		"zerofs_rewind": map[string]any{"seq": 0}, "zerofs_redo": map[string]any{}, "zerofs_revert": map[string]any{"seq": 1},
		"zerofs_merge": map[string]any{"dir": "/tmp/x"}, "zerofs_branch": map[string]any{"action": "list"},
	} {
		c.fail(name, args, "outside a zerofs workspace")
	}
}

// TestMCPStepRefusedUnmounted: zerofs_step on an unmounted workspace is
// refused, as zerofs step is, with the same reason, and records nothing.
func TestMCPStepRefusedUnmounted(t *testing.T) {
	s := newStore(t, map[string]string{"a": "0"})
	s.step("first")
	s.write("a", "1")
	s.close()
	c := newMCPClient(t, s.ws)
	_, before := c.ok("zerofs_status", map[string]any{})
	msg := c.fail("zerofs_step", map[string]any{"label": "Edit a"}, "is not mounted, so nothing would be recorded in the step (zerofs mount ")
	r := wantFail(t, s.ws, 1, "is not mounted, so nothing would be recorded in the step (zerofs mount ", "step", "Edit a")
	if cli := strings.TrimPrefix(strings.TrimSpace(r.stderr), "zerofs: "); !strings.Contains(msg, cli) {
		t.Errorf("zerofs_step says %q, zerofs step %q: want one reason", msg, cli)
	}
	if _, after := c.ok("zerofs_status", map[string]any{}); after["head"] != before["head"] {
		t.Errorf("head %v after the refused zerofs_step, was %v", after["head"], before["head"])
	}
}
