package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/zerofs/zerofs/internal/testsupport"
)

// TestMCPBranch drives zerofs_branch and zerofs_merge with the official
// TypeScript SDK's client (each structured result checked against its
// output schema) on a mounted workspace, as an agent working in parallel
// would: a dry run of create checks the directories and says the base,
// making nothing; create makes two branches (one given relative to the
// workspace root: ../NAME is beside it) at the workspace as it is now;
// list names them; a branch's work stays in it; delete of a branch that
// changed something is refused (a dry run says so first) and keeps it;
// zerofs_merge with the branch's dir brings its work in, after which
// delete drops it, and the other, which changed nothing, too. Bad
// arguments are tool errors naming what to change.
func TestMCPBranch(t *testing.T) {
	built.NeedFUSE(t)
	dir := t.TempDir()
	ws := filepath.Join(dir, "ws")
	os.Mkdir(ws, 0o755)
	writeFile(t, filepath.Join(ws, "a.txt"), "1\n2\n3\n")
	mountT(t, ws)
	one, two := filepath.Join(dir, "try-1"), filepath.Join(dir, "try-2")
	t.Cleanup(func() {
		for _, d := range []string{one, two} {
			if _, err := os.Stat(d); err == nil {
				if r := bin(t, ws, "", "branch", "--delete", d, "--force"); r.code != 0 && testsupport.FUSEMounted(d) {
					t.Errorf("branch --delete %s --force: %s", d, r.stderr)
				}
			}
			if testsupport.FUSEMounted(d) {
				t.Errorf("%s is still mounted", d)
				testsupport.Detach(t, d)
			}
		}
	})
	head := readTrim(t, filepath.Join(ws, ".zero/head"))
	res := runTSCalls(t, ws, []mcpCall{
		{Name: "zerofs_branch", Args: map[string]any{"action": "create", "dirs": []string{one, "../try-2"}, "dry_run": true}},
	})
	if _, err := os.Stat(one); err == nil || testsupport.FUSEMounted(one) {
		t.Fatal("a dry run made a branch")
	}
	res = append(res, runTSCalls(t, ws, []mcpCall{
		{Name: "zerofs_branch", Args: map[string]any{"action": "create", "dirs": []string{one, "../try-2"}}},
		{Name: "zerofs_branch", Args: map[string]any{"action": "list"}},
	})...)
	if d := res[0].Structured; d["dry_run"] != true || len(d["branches"].([]any)) != 2 {
		t.Fatalf("dry run: %v", d)
	}
	if b := res[0].Structured["branches"].([]any)[1].(map[string]any); b["dir"] != two || b["mounted"] != false {
		t.Errorf("dry run's second branch: %v", b)
	}
	made := res[1].Structured["branches"].([]any)
	if len(made) != 2 || !strings.Contains(res[1].Text, "made ") {
		t.Fatalf("create: %v %q", res[1].Structured, res[1].Text)
	}
	for i, want := range []string{one, two} {
		b := made[i].(map[string]any)
		if b["dir"] != want || b["mounted"] != true || itoaInt(int(b["base"].(float64))) < head || b["unmerged"] != false {
			t.Errorf("made %v, want %s mounted at %s or later", b, want, head)
		}
		if !testsupport.FUSEMounted(want) || readTrim(t, filepath.Join(want, "a.txt")) != "1\n2\n3" {
			t.Errorf("%s is not a mounted branch of the workspace", want)
		}
	}
	if l := res[2].Structured["branches"].([]any); len(l) != 2 {
		t.Errorf("list: %v", l)
	}

	binOK(t, one, "step", "Edit a.txt")
	sh(t, one, `sed -i 's/^3$/three/' a.txt`)
	if readTrim(t, filepath.Join(ws, "a.txt")) != "1\n2\n3" {
		t.Fatal("a write in the branch reached the workspace")
	}
	res = runTSCalls(t, ws, []mcpCall{
		{Name: "zerofs_branch", Args: map[string]any{"action": "delete", "dir": one, "dry_run": true}},
		{Name: "zerofs_branch", Args: map[string]any{"action": "delete", "dir": one}, WantError: true},
		{Name: "zerofs_merge", Args: map[string]any{"dir": one}},
		{Name: "zerofs_branch", Args: map[string]any{"action": "delete", "dir": one}},
		{Name: "zerofs_branch", Args: map[string]any{"action": "delete", "dir": "../try-2"}},
		{Name: "zerofs_branch", Args: map[string]any{"action": "list"}},
		{Name: "zerofs_branch", Args: map[string]any{"action": "delete", "dir": one}, WantError: true},
		{Name: "zerofs_branch", Args: map[string]any{"action": "fork"}, WantError: true},
		{Name: "zerofs_branch", Args: map[string]any{"action": "create"}, WantError: true},
		{Name: "zerofs_branch", Args: map[string]any{"action": "create", "dirs": []string{"sub"}}, WantError: true},
		{Name: "zerofs_branch", Args: map[string]any{"action": "list", "force": true}, WantError: true},
	})
	if b := res[0].Structured["branches"].([]any)[0].(map[string]any); b["unmerged"] != true || !strings.Contains(res[0].Text, "would refuse") {
		t.Errorf("delete dry run of a changed branch: %v %q", b, res[0].Text)
	}
	if !res[1].IsError || !strings.Contains(res[1].Text, "nothing deleted") || !strings.Contains(res[1].Text, "zerofs_merge") || !strings.Contains(res[1].Text, "force: true") {
		t.Errorf("delete of a changed branch: %q", res[1].Text)
	}
	if res[2].Structured["sequence"] == nil || res[2].Structured["side"] != "branch" || readTrim(t, filepath.Join(ws, "a.txt")) != "1\n2\nthree" {
		t.Errorf("merge of the branch: %v", res[2].Structured)
	}
	if d := res[3].Structured["branches"].([]any)[0].(map[string]any); d["dir"] != one || d["mounted"] != false || res[3].IsError {
		t.Errorf("delete after the merge: %v %q", d, res[3].Text)
	}
	if res[4].IsError || testsupport.FUSEMounted(one) || testsupport.FUSEMounted(two) {
		t.Errorf("delete of the unchanged branch: %q", res[4].Text)
	}
	if l := res[5].Structured["branches"].([]any); len(l) != 0 {
		t.Errorf("list after the deletes: %v", l)
	}
	for i, want := range map[int]string{6: "not a branch of this workspace", 7: "want create, list or delete", 8: "dirs names no directory", 9: "inside the workspace", 10: "list takes no other argument"} {
		if !res[i].IsError || !strings.Contains(res[i].Text, want) {
			t.Errorf("call %d: %q, want an error saying %q", i, res[i].Text, want)
		}
	}
}
