package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/zerofs/zerofs/history"
	"github.com/zerofs/zerofs/record"
	"github.com/zerofs/zerofs/timeline"
)

// TestTurnsNamedEverywhere: issue 30 (Turns, and the wording of results),
// issue 32 (Listing), on a real mount. A turn undone and redone is named
// by its prompt in the CLI's answer, `zerofs log`, the timeline's log and
// zerofs_log, never as `step 24 ""`; an implicit step is `(no step)`; `log
// -n 1` heads its step with the turn's prompt and `log -n 0` is refused;
// an undo and its redo count the same paths; a path rewind is a `path
// rewind` in the CLI and MCP alike; a rewind that took back an older turn
// is listed under no turn; MCP's turn forms name the turn; zerofs_log
// keeps a rewind's target 0.
func TestTurnsNamedEverywhere(t *testing.T) {
	ws := filepath.Join(t.TempDir(), "ws")
	if err := os.Mkdir(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(ws, "app.py"), "print('hi')\n")
	mountT(t, ws)
	head := func() record.Seq {
		t.Helper()
		var n record.Seq
		if _, err := fmt.Sscan(readTrim(t, filepath.Join(ws, ".zero", "head")), &n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	const prompt1 = "Rename hello to greet everywhere\nand fix the tests"
	const name1 = `"Rename hello to greet everywhere …"`
	beginTurnT(t, ws, `{"prompt":"Rename hello to greet everywhere\nand fix the tests","agent":"claude"}`)
	turn1 := head()
	binOK(t, ws, "step", "Edit app.py")
	writeFile(t, filepath.Join(ws, "app.py"), "print('hello')\n")
	afterEdit := head()
	binOK(t, ws, "step", "Bash: mkdir d")
	sh(t, ws, "mkdir d && echo a > d/a && echo b > d/b && echo c > d/c")

	// The undo of a step that added 4 paths deletes 4; its redo restores 4.
	if out := binOK(t, ws, "undo"); !regexp.MustCompile(`^undid step \d+ "Bash: mkdir d": restored 0, deleted 4\n$`).MatchString(out) {
		t.Errorf("undo of a step that added d and 3 files: %q, want it to count 4 deleted", out)
	}
	if out := binOK(t, ws, "redo"); !regexp.MustCompile(`^redid step \d+ "Bash: mkdir d": restored 4, deleted 0\n$`).MatchString(out) {
		t.Errorf("redo of it: %q, want restored 4", out)
	}

	beginTurnT(t, ws, `{"prompt":"second prompt","agent":"claude"}`)
	turn2 := head()
	binOK(t, ws, "step", "Edit b.txt")
	writeFile(t, filepath.Join(ws, "b.txt"), "b\n")

	// log -n 1: the newest step under its turn's prompt.
	one := binOK(t, ws, "log", "-n", "1")
	if lines := strings.Split(strings.TrimSpace(one), "\n"); len(lines) != 2 || !strings.Contains(lines[0], fmt.Sprintf("turn   %d", turn2)) ||
		!strings.Contains(lines[0], `"second prompt" (claude)`) || !strings.Contains(lines[1], "Edit b.txt") {
		t.Errorf("log -n 1:\n%s\nwant the turn's header with its prompt, then its step", one)
	}
	// With the step's turn older than the newest entries, the header is
	// still there, with its prompt.
	if two := binOK(t, ws, "log", "-n", "3"); strings.Contains(two, "prompt not shown") || !strings.Contains(two, name1) {
		t.Errorf("log -n 3 (reaching into the first turn):\n%s\nwant the first turn's header with its prompt", two)
	}
	// zerofs_log n: 1 likewise: the step and its turn, and more to come.
	c := newMCPClient(t, ws)
	_, lg1 := c.ok("zerofs_log", map[string]any{"n": 1})
	if ents, _ := lg1["entries"].([]any); len(ents) != 2 || lg1["more"] != true ||
		ents[0].(map[string]any)["label"] != "Edit b.txt" || ents[1].(map[string]any)["prompt"] != "second prompt" {
		t.Errorf("zerofs_log n 1: %v, want the step, its turn with its prompt, and more", lg1)
	}
	if r := bin(t, ws, "", "log", "-n", "0"); r.code != 2 || r.stdout != "" || !strings.Contains(r.stderr, "-n 0") {
		t.Errorf("log -n 0: exit %d, stdout %q, stderr %q; want it refused as bad usage", r.code, r.stdout, r.stderr)
	}

	// The second turn taken back and brought back, named by its prompt.
	if out := binOK(t, ws, "undo", "--turn", "--dry-run"); !strings.HasPrefix(out, fmt.Sprintf(`would take back turn %d "second prompt" (rewind to %d)`, turn2, turn2-1)) {
		t.Errorf("undo --turn --dry-run: %q", out)
	}
	if out := binOK(t, ws, "undo", "--turn"); !strings.HasPrefix(out, fmt.Sprintf(`took back turn %d "second prompt": rewound to %d, restored 0, deleted 1`, turn2, turn2-1)) {
		t.Errorf("undo --turn: %q", out)
	}
	if out := binOK(t, ws, "redo"); out != fmt.Sprintf("redid turn %d \"second prompt\": restored 1, deleted 0\n", turn2) {
		t.Errorf("redo of the turn: %q", out)
	}
	// The first turn taken back from within the second.
	if out := binOK(t, ws, "rewind", "--before-turn", itoa(turn1)); !strings.HasPrefix(out, fmt.Sprintf("took back turn %d %s: rewound to %d", turn1, name1, turn1-1)) {
		t.Errorf("rewind --before-turn %d: %q", turn1, out)
	}
	if got := readTrim(t, filepath.Join(ws, "app.py")); got != "print('hi')" {
		t.Errorf("after taking back the first turn app.py is %q", got)
	}
	// A change outside any step, undone: `(no step)`.
	writeFile(t, filepath.Join(ws, "loose.txt"), "x\n")
	if out := binOK(t, ws, "undo"); !regexp.MustCompile(`^undid step \d+ \(no step\): restored 0, deleted 1\n$`).MatchString(out) {
		t.Errorf("undo of a change outside any step: %q", out)
	}

	lg := binOK(t, ws, "log")
	for _, want := range []string{
		fmt.Sprintf(`turn %d "second prompt" taken back (rewind to %d)`, turn2, turn2-1),
		fmt.Sprintf(`redo of turn %d "second prompt"`, turn2),
		fmt.Sprintf(`turn %d %s taken back (rewind to %d)`, turn1, name1, turn1-1),
		`undo of step`, `(no step)`,
	} {
		if !strings.Contains(lg, want) {
			t.Errorf("log lacks %q:\n%s", want, lg)
		}
	}
	if strings.Contains(lg, `""`) {
		t.Errorf("log names something as \"\":\n%s", lg)
	}
	var entries []history.Entry
	if err := json.Unmarshal([]byte(binOK(t, ws, "log", "--json")), &entries); err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.Type != "rewind" || e.Rewind == nil {
			continue
		}
		// Listed under no turn: it took back the turn it was made in.
		if e.Rewind.Form == "turn" && e.Turn != 0 {
			t.Errorf("log --json: %q (rewind %d) is listed under turn %d, want none", e.Title, e.Sequence, e.Turn)
		}
		// A redo of the second turn is its work again.
		if e.Rewind.Form == "redo" && e.Rewind.Step != nil && e.Rewind.Step.Kind == "turn" && e.Turn != turn2 {
			t.Errorf("log --json: %q (rewind %d) is listed under turn %d, want %d", e.Title, e.Sequence, e.Turn, turn2)
		}
	}
	for _, l := range strings.Split(lg, "\n") {
		if strings.Contains(l, fmt.Sprintf("turn %d %s taken back", turn1, name1)) && strings.HasPrefix(l, " ") {
			t.Errorf("log lists the rewind that took back turn %d under a turn: %q\n%s", turn1, l, lg)
		}
	}

	// The timeline's log names them alike (the page shows each title).
	hws, err := history.Find(ws)
	if err != nil {
		t.Fatal(err)
	}
	src, err := history.Open(context.Background(), hws, history.Options{})
	if err != nil {
		t.Fatal(err)
	}
	page, err := timeline.Log(src, history.Now, 50)
	src.Close()
	if err != nil {
		t.Fatal(err)
	}
	var titles []string
	for _, it := range page.Entries {
		if it.Type == "rewind" {
			titles = append(titles, it.Title)
		}
	}
	if all := strings.Join(titles, "\n"); !strings.Contains(all, fmt.Sprintf(`redo of turn %d "second prompt"`, turn2)) || !strings.Contains(all, "(no step)") {
		t.Errorf("the timeline's rewind titles:\n%s", all)
	}

	// MCP: the same words, a turn form, a path rewind named as the CLI
	// names it, and a rewind's target 0 kept.
	text, out := c.ok("zerofs_redo", map[string]any{})
	step, _ := out["step"].(map[string]any)
	if !strings.Contains(text, "(no step)") || step["implicit"] != true || !strings.HasSuffix(fmt.Sprint(step["name"]), "(no step)") {
		t.Errorf("zerofs_redo of a change outside any step: %q, step %v", text, step)
	}
	text, out = c.ok("zerofs_rewind", map[string]any{"before_turn": turn1, "dry_run": true})
	step, _ = out["step"].(map[string]any)
	if !strings.HasPrefix(text, fmt.Sprintf("would take back turn %d %s", turn1, name1)) || step["kind"] != "turn" || step["prompt"] != prompt1 {
		t.Errorf("zerofs_rewind before_turn, dry: %q, step %v", text, step)
	}
	c.fail("zerofs_rewind", map[string]any{"before_turn": turn1 + 1}, "is not a turn")
	c.fail("zerofs_rewind", map[string]any{"before_turn": turn1, "seq": 1}, "before_turn", "alone")
	if text, _ := c.ok("zerofs_rewind", map[string]any{"seq": afterEdit, "paths": []string{"app.py"}}); !strings.HasPrefix(text, fmt.Sprintf("rewound app.py to %d: restored 1", afterEdit)) {
		t.Errorf("zerofs_rewind of app.py: %q", text)
	}
	text, _ = c.ok("zerofs_undo", map[string]any{})
	cliUndo := regexp.MustCompile(`^undid path rewind \d+: `)
	if !cliUndo.MatchString(text) {
		t.Errorf("zerofs_undo of a path rewind: %q, want it named `path rewind N`", text)
	}
	binOK(t, ws, "redo")
	if out := binOK(t, ws, "undo"); !cliUndo.MatchString(out) {
		t.Errorf("undo of a path rewind: %q, want it named as zerofs_undo named it", out)
	}
	if d := tool(c); !strings.Contains(d, "whole workspace goes back") || !strings.Contains(d, "dry_run: true first") || !strings.Contains(d, "turn: true") {
		t.Errorf("zerofs_undo's description does not say the whole workspace goes back, dry run first, and its turn form:\n%s", d)
	}
	text, out = c.ok("zerofs_undo", map[string]any{"turn": true, "dry_run": true})
	if step, _ := out["step"].(map[string]any); step["kind"] != "turn" || !strings.HasPrefix(text, "would take back turn ") {
		t.Errorf("zerofs_undo turn: true, dry: %q, step %v", text, out["step"])
	}
	c.ok("zerofs_rewind", map[string]any{"seq": 0})
	_, lgm := c.ok("zerofs_log", map[string]any{"n": 1})
	ents, _ := lgm["entries"].([]any)
	if len(ents) == 0 {
		t.Fatalf("zerofs_log n 1: %v", lgm)
	}
	e0, _ := ents[0].(map[string]any)
	if tg, ok := e0["target"]; !ok || tg != float64(0) || e0["restored"] == nil || e0["deleted"] == nil {
		t.Errorf("zerofs_log's rewind to 0: %v, want target 0, restored and deleted present", e0)
	}
}

// tool is zerofs_undo's description.
func tool(c *mcpClient) string {
	if t := c.tools["zerofs_undo"]; t != nil {
		return t.Description
	}
	return ""
}

// TestMCPStepUnmountedRefused: issue 30. zerofs_step on a workspace that
// is not mounted recorded a step (and only warned), where `zerofs step`
// refuses: nothing would record the step's changes. Both refuse, and
// nothing is written.
func TestMCPStepUnmountedRefused(t *testing.T) {
	s := newStore(t, map[string]string{"a.txt": "a\n"})
	s.close()
	before := mustRun(t, s.ws, "log", "--all", "--json")
	wantFail(t, s.ws, 1, "is not mounted, so nothing would be recorded in the step", "step", "Edit a.txt")
	c := newMCPClient(t, s.ws)
	c.fail("zerofs_step", map[string]any{"label": "Edit a.txt"}, "is not mounted, so nothing would be recorded in the step")
	c.cs.Close()
	if after := mustRun(t, s.ws, "log", "--all", "--json"); after != before {
		t.Errorf("a refused step changed the log:\n%s\nwas\n%s", after, before)
	}
}

// TestMCPZeroFieldsKept: issue 30. A field that means something when it is
// zero is never left out: an empty file's size in zerofs_show, a text
// file's +0 or -0 lines in a preview, a rewind's target 0 (and its
// restored and deleted counts) in zerofs_log; a field that does not apply
// (a directory's size, the lines of a binary file) is absent.
func TestMCPZeroFieldsKept(t *testing.T) {
	ws := mountedWS(t)
	binOK(t, ws, "step", "Write files")
	writeFile(t, filepath.Join(ws, "empty.txt"), "")
	writeFile(t, filepath.Join(ws, "three.txt"), "a\nb\nc\n")
	writeFile(t, filepath.Join(ws, "bin.dat"), "\x00\x01\x02")
	if err := os.Mkdir(filepath.Join(ws, "dir"), 0o755); err != nil {
		t.Fatal(err)
	}
	c := newMCPClient(t, ws)
	var head float64
	{
		_, st := c.ok("zerofs_status", map[string]any{})
		head = st["head"].(float64)
	}
	_, show := c.ok("zerofs_show", map[string]any{"seq": head, "path": "empty.txt"})
	if b, ok := show["bytes"]; !ok || b != float64(0) {
		t.Errorf("zerofs_show of an empty file: %v, want bytes 0", show)
	}
	if _, show = c.ok("zerofs_show", map[string]any{"seq": head, "path": "dir"}); show["bytes"] != nil {
		t.Errorf("zerofs_show of a directory: %v, want no bytes", show)
	}
	_, dry := c.ok("zerofs_rewind", map[string]any{"seq": 0, "dry_run": true})
	rows := map[string]map[string]any{}
	for _, p := range dry["preview"].([]any) {
		m := p.(map[string]any)
		rows[m["path"].(string)] = m
	}
	if r := rows["three.txt"]; r == nil || r["added"] != float64(0) || r["removed"] != float64(3) {
		t.Errorf("preview of deleting three.txt: %v, want added 0, removed 3", r)
	}
	if r := rows["empty.txt"]; r == nil || r["added"] != float64(0) || r["removed"] != float64(0) {
		t.Errorf("preview of deleting empty.txt: %v, want added 0, removed 0", r)
	}
	if r := rows["bin.dat"]; r == nil || r["added"] != nil || r["removed"] != nil {
		t.Errorf("preview of deleting bin.dat: %v, want no line counts", r)
	}
	c.ok("zerofs_rewind", map[string]any{"seq": 0})
	_, lg := c.ok("zerofs_log", map[string]any{"n": 1})
	e0 := lg["entries"].([]any)[0].(map[string]any)
	if e0["type"] != "rewind" || e0["target"] != float64(0) || e0["restored"] != float64(0) || e0["deleted"] != float64(4) {
		t.Errorf("zerofs_log's rewind to 0: %v, want target 0, restored 0, deleted 4", e0)
	}
}
