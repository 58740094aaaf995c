package hooks

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// TestOpenCodePluginSendsResults runs the installed OpenCode plugin in node
// with what OpenCode 1.18.33 passes tool.execute.after (a bash call's
// output: {title, output, metadata: {output, exit}}): what it sends is the
// payload captured from the same plugin inside OpenCode
// (testdata/payloads/opencode-tool.execute.after-*.json) but for the time
// it took, and it never sends the output past the error's first line.
func TestOpenCodePluginSendsResults(t *testing.T) {
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("node is not installed")
	}
	dir := t.TempDir()
	ws := filepath.Join(dir, "app")
	out := filepath.Join(dir, "sent")
	if err := os.Mkdir(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	fake, _ := filepath.Abs(filepath.Join("testdata", "capture", "keep-stdin.sh"))
	a, _ := Lookup("opencode")
	if err := os.WriteFile(filepath.Join(dir, "zerofs.mjs"), []byte(opencodePlugin(a, InstallOptions{Zerofs: fake})), 0o644); err != nil {
		t.Fatal(err)
	}
	driver := filepath.Join(dir, "driver.mjs")
	os.WriteFile(driver, []byte(`
import { ZerofsPlugin } from "./zerofs.mjs"
const ws = process.argv[2]
const hooks = await ZerofsPlugin({ directory: ws, worktree: ws })
const sessionID = "ses_dbb20f98cffeF4d5Oy9HGGSuiy"
const call = async (callID, command, exit, output) => {
  await hooks["tool.execute.before"]({ tool: "bash", sessionID, callID }, { args: { command } })
  await hooks["tool.execute.after"]({ tool: "bash", sessionID, callID, args: { command } },
    { title: command, output, metadata: { output, exit, truncated: false, description: "" } })
}
await call("call_08cec7c2024e", "ls src", 0, "a.py\n")
await call("call_547fe8fbe303", "ls missing.txt", 2, "ls: cannot access 'missing.txt': No such file or directory\nSECRET second line\n")
`), 0o644)
	cmd := exec.Command(node, driver, ws)
	cmd.Env = append(os.Environ(), "ZEROFS_CAPTURE="+out)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("node: %v\n%s", err, b)
	}
	sent, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(sent), "SECRET") {
		t.Errorf("the plugin sent the output past its first line:\n%s", sent)
	}
	lines := strings.Split(strings.TrimSpace(string(sent)), "\n")
	if len(lines) != 4 {
		t.Fatalf("the plugin sent %d payloads, want 4:\n%s", len(lines), sent)
	}
	for i, f := range []string{"opencode-tool.execute.after-bash.json", "opencode-tool.execute.after-bash-fails.json"} {
		want, err := os.ReadFile(filepath.Join("testdata", "payloads", f))
		if err != nil {
			t.Fatal(err)
		}
		got := strings.ReplaceAll(lines[2*i+1], ws, "/work/app")
		var g, w map[string]any
		if json.Unmarshal([]byte(got), &g) != nil || json.Unmarshal(want, &w) != nil {
			t.Fatalf("%s: not JSON: %s", f, got)
		}
		if d, ok := g["duration_ms"].(float64); !ok || d < 0 {
			t.Errorf("%s: duration_ms %v", f, g["duration_ms"])
		}
		delete(g, "duration_ms")
		delete(w, "duration_ms")
		if !reflect.DeepEqual(g, w) {
			t.Errorf("%s: the plugin sent\n%s\nwant\n%s", f, got, want)
		}
	}
}
