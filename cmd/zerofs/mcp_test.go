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

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// mcpSession starts the built `zerofs mcp` in dir and connects the SDK's
// client to it over stdio.
func mcpSession(t *testing.T, dir string) *mcp.ClientSession {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	cmd := exec.Command(binary, "mcp")
	cmd.Dir = dir
	cmd.Stderr = os.Stderr
	client := mcp.NewClient(&mcp.Implementation{Name: "zerofs-test", Version: "v0"}, nil)
	cs, err := client.Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatalf("initialize: %v", err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// callTool calls a tool and returns its text and whether it is a tool error.
func callTool(t *testing.T, cs *mcp.ClientSession, name string, args any) (string, bool) {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s: protocol error %v (a failure must be a tool error)", name, err)
	}
	var text strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			text.WriteString(tc.Text)
		}
	}
	return text.String(), res.IsError
}

// TestMCPServer drives the real `zerofs mcp` binary with the SDK's client
// over stdio, as an agent would: initialize, list the tools, read the log,
// undo the last step and see the workspace change, and get a bad argument
// back as a tool error from a server that goes on serving.
func TestMCPServer(t *testing.T) {
	ws := filepath.Join(t.TempDir(), "ws")
	if err := os.Mkdir(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(ws, "main.go"), "package main\n")
	mountT(t, ws)
	cs := mcpSession(t, ws)

	tools, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tool := range tools.Tools {
		names = append(names, tool.Name)
		if tool.Description == "" || tool.InputSchema == nil {
			t.Errorf("tool %s has no description or input schema", tool.Name)
		}
	}
	for _, want := range []string{"zerofs_log", "zerofs_diff", "zerofs_show", "zerofs_step", "zerofs_rewind", "zerofs_undo", "zerofs_revert"} {
		if !slices.Contains(names, want) {
			t.Errorf("tools %v lack %s", names, want)
		}
	}

	if out, isErr := callTool(t, cs, "zerofs_step", map[string]any{"label": "Edit main.go"}); isErr {
		t.Fatalf("zerofs_step: %s", out)
	}
	writeFile(t, filepath.Join(ws, "main.go"), "package main\n\nfunc main() {}\n")

	out, isErr := callTool(t, cs, "zerofs_log", map[string]any{"n": 1})
	if isErr {
		t.Fatalf("zerofs_log: %s", out)
	}
	var steps []struct {
		Sequence Seq    `json:"sequence"`
		Label    string `json:"label"`
		Changes  []struct {
			Path string `json:"path"`
		} `json:"changes"`
	}
	if err := json.Unmarshal([]byte(out), &steps); err != nil {
		t.Fatalf("zerofs_log is not the log's JSON: %v\n%s", err, out)
	}
	if len(steps) != 1 || steps[0].Label != "Edit main.go" || len(steps[0].Changes) != 1 || steps[0].Changes[0].Path != "main.go" {
		t.Fatalf("zerofs_log: got %+v, want the one step that changed main.go", steps)
	}

	if out, isErr := callTool(t, cs, "zerofs_diff", map[string]any{"from": steps[0].Sequence}); isErr || !strings.Contains(out, "+func main() {}") {
		t.Errorf("zerofs_diff: error %v, got %q", isErr, out)
	}
	if out, isErr := callTool(t, cs, "zerofs_show", map[string]any{"seq": steps[0].Sequence, "path": "main.go"}); isErr || out != "package main\n" {
		t.Errorf("zerofs_show: error %v, got %q", isErr, out)
	}

	out, isErr = callTool(t, cs, "zerofs_undo", map[string]any{})
	if isErr || !strings.Contains(out, "Edit main.go") {
		t.Fatalf("zerofs_undo: error %v, got %q, want it to name the step", isErr, out)
	}
	if got := readTrim(t, filepath.Join(ws, "main.go")); got != "package main" {
		t.Fatalf("after zerofs_undo main.go is %q, want its content before the step", got)
	}

	// Redo it, preview a rewind (nothing changes), then revert the step
	// alone.
	if out, isErr := callTool(t, cs, "zerofs_redo", map[string]any{}); isErr {
		t.Fatalf("zerofs_redo: %s", out)
	}
	edited := "package main\n\nfunc main() {}"
	if got := readTrim(t, filepath.Join(ws, "main.go")); got != edited {
		t.Fatalf("after zerofs_redo main.go is %q", got)
	}
	out, isErr = callTool(t, cs, "zerofs_rewind", map[string]any{"seq": steps[0].Sequence, "dry_run": true})
	if isErr || !strings.Contains(out, "main.go") {
		t.Errorf("zerofs_rewind dry_run: error %v, got %q, want main.go named", isErr, out)
	}
	if got := readTrim(t, filepath.Join(ws, "main.go")); got != edited {
		t.Fatalf("a dry run changed main.go to %q", got)
	}
	out, isErr = callTool(t, cs, "zerofs_revert", map[string]any{"seq": steps[0].Sequence})
	if isErr {
		t.Fatalf("zerofs_revert: %s", out)
	}
	if got := readTrim(t, filepath.Join(ws, "main.go")); got != "package main" {
		t.Fatalf("after zerofs_revert main.go is %q, want its content before the step", got)
	}

	// Bad arguments: tool errors with the command's reason, and the
	// server still answers afterwards.
	for _, tc := range []struct {
		tool string
		args map[string]any
		want string
	}{
		{"zerofs_rewind", map[string]any{"seq": -1}, "-1"},
		{"zerofs_rewind", map[string]any{"seq": 999999}, "999999"},
		{"zerofs_show", map[string]any{"seq": 0, "path": "no/such/file"}, "no/such/file"},
	} {
		out, isErr := callTool(t, cs, tc.tool, tc.args)
		if !isErr || !strings.Contains(out, tc.want) {
			t.Errorf("%s %v: error %v, got %q, want a tool error saying %q", tc.tool, tc.args, isErr, out, tc.want)
		}
	}
	// An argument of the wrong type breaks the tool's schema: an error
	// (of the protocol or of the tool), and the server lives on.
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "zerofs_show", Arguments: map[string]any{"seq": "x"}})
	if err == nil && !res.IsError {
		t.Errorf("zerofs_show with seq \"x\" succeeded")
	}
	if out, isErr := callTool(t, cs, "zerofs_log", map[string]any{}); isErr {
		t.Fatalf("the server stopped answering after bad arguments: %s", out)
	}
}
