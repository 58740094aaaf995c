package main

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestMCPTypeScriptClient drives the real binary with a client written
// with the official TypeScript SDK (@modelcontextprotocol/sdk, the client
// issue 17 found the defects with): testdata/mcp-ts/client.mjs checks the
// instructions, schemas, annotations and every structured result against
// its output schema, and the errors. It needs node and the SDK installed
// from npm: ZEROFS_MCP_TS_SDK names a directory whose node_modules holds
// @modelcontextprotocol/sdk and ajv (npm install @modelcontextprotocol/sdk
// there). Without them it skips, saying so; ZEROFS_REQUIRE_MCP_TS=1 makes
// that a failure.
func TestMCPTypeScriptClient(t *testing.T) {
	s := newStore(t, map[string]string{"a.txt": "one\n"})
	s.step("Edit a.txt")
	s.write("a.txt", "two\n")
	s.close()

	node, script := tsClient(t, "client.mjs")
	cmd := exec.Command(node, script, binary, s.ws)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var last map[string]any
	calls := 0
	for line := range strings.Lines(stdout.String()) {
		var v map[string]any
		if json.Unmarshal([]byte(line), &v) != nil {
			continue
		}
		last = v
		if v["name"] != nil {
			calls++
			t.Logf("%s %v -> error %v: %.200s", v["name"], v["args"], v["isError"], v["text"])
		}
	}
	if err != nil || last == nil || last["done"] != true {
		t.Fatalf("the TypeScript client failed: %v\n%s\n%s", err, stdout.String(), stderr.String())
	}
	if calls != 15 {
		t.Errorf("the TypeScript client made %d checked calls, want 15", calls)
	}
}

// tsClient returns node and the path of testdata/mcp-ts/NAME copied into a
// temporary directory beside the SDK's node_modules (ZEROFS_MCP_TS_SDK).
// Without node or the SDK it skips, or fails under ZEROFS_REQUIRE_MCP_TS=1.
func tsClient(t *testing.T, name string) (node, script string) {
	t.Helper()
	sdk := os.Getenv("ZEROFS_MCP_TS_SDK")
	node, err := exec.LookPath("node")
	if sdk == "" || err != nil {
		if os.Getenv("ZEROFS_REQUIRE_MCP_TS") == "1" {
			t.Fatal("ZEROFS_MCP_TS_SDK is not set or node is missing")
		}
		t.Skip("set ZEROFS_MCP_TS_SDK to a directory with @modelcontextprotocol/sdk in node_modules (and install node) to run the TypeScript client")
	}
	dir := t.TempDir()
	b, err := os.ReadFile(filepath.Join("testdata", "mcp-ts", name))
	if err != nil {
		t.Fatal(err)
	}
	script = filepath.Join(dir, name)
	if err := os.WriteFile(script, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(sdk, "node_modules"), filepath.Join(dir, "node_modules")); err != nil {
		t.Fatal(err)
	}
	return node, script
}
