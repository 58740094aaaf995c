package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/zerofs/zerofs/blobstore"
	"github.com/zerofs/zerofs/history"
)

// The history every history test starts from:
//
//	initial files   a.txt, old.txt, gone.txt, script.sh, bin.dat, src/main.go
//	step "Edit"     a.txt modified, new.txt added
//	step "Bash"     old.txt renamed to renamed.txt, gone.txt deleted,
//	                script.sh made executable, bin.dat rewritten
//	step "Read"     nothing changed (a read-only tool call)
//
// and with tidy, a third step that changed something (its tool_call at 10):
//
//	step "Tidy"     src/main.go rewritten
var initialFiles = map[string]string{
	"a.txt":       "alpha\nbeta\ngamma\ndelta\nepsilon\nzeta\neta\ntheta\n",
	"old.txt":     "moved, not changed\n",
	"gone.txt":    "bye\n",
	"script.sh":   "echo hi\n",
	"bin.dat":     "\x00\x01\x02binary",
	"src/main.go": "package main\n",
}

// buildHistory makes that history unmounted, driving the engine the way
// the FUSE layer does. The store is closed when it returns, so the CLI can
// open it.
func buildHistory(t *testing.T) *store {
	t.Helper()
	return buildHistoryTidy(t, false)
}

func buildHistoryTidy(t *testing.T, tidy bool) *store {
	t.Helper()
	s := newStore(t, initialFiles)
	s.step("Edit")
	s.write("a.txt", "alpha\nBETA\ngamma\ndelta\nepsilon\nzeta\neta\ntheta\n")
	s.write("new.txt", "brand new\n")
	s.step("Bash")
	s.change(func(ws string) error {
		return os.Rename(filepath.Join(ws, "old.txt"), filepath.Join(ws, "renamed.txt"))
	}, "old.txt", "renamed.txt")
	s.change(func(ws string) error { return os.Remove(filepath.Join(ws, "gone.txt")) }, "gone.txt")
	s.change(func(ws string) error { return os.Chmod(filepath.Join(ws, "script.sh"), 0o755) }, "script.sh")
	s.write("bin.dat", "\x00\x01\x03binary!")
	s.step("Read")
	if tidy {
		s.step("Tidy")
		s.write("src/main.go", "package tidy\n")
	}
	s.close()
	return s
}

// buildMounted makes the same history through a mount (a zerofs daemon of
// its own; the test process only makes file calls into it) and returns the
// workspace, still mounted until the test ends.
func buildMounted(t *testing.T, tidy bool) string {
	t.Helper()
	built.NeedFUSE(t)
	ws := filepath.Join(t.TempDir(), "ws")
	for p, content := range initialFiles {
		writeFile(t, filepath.Join(ws, p), content)
	}
	// A second link outside the workspace makes gone.txt's removal a copy
	// of its content, as buildHistory's capture is, not a stash the namer
	// names whenever the load lets it: a stash_named event at a moment the
	// machine decides would move every later sequence in the goldens.
	// (Stashes have their own tests: rewind/TestStashedRemovals, TestStashCrash.)
	if err := os.Link(filepath.Join(ws, "gone.txt"), filepath.Join(filepath.Dir(ws), "gone.link")); err != nil {
		t.Fatal(err)
	}
	mountT(t, ws)
	p := func(name string) string { return filepath.Join(ws, name) }
	check := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	mustRun(t, ws, "step", "Edit")
	check(os.WriteFile(p("a.txt"), []byte("alpha\nBETA\ngamma\ndelta\nepsilon\nzeta\neta\ntheta\n"), 0o644))
	check(os.WriteFile(p("new.txt"), []byte("brand new\n"), 0o644))
	mustRun(t, ws, "step", "Bash")
	check(os.Rename(p("old.txt"), p("renamed.txt")))
	check(os.Remove(p("gone.txt")))
	check(os.Chmod(p("script.sh"), 0o755))
	check(os.WriteFile(p("bin.dat"), []byte("\x00\x01\x03binary!"), 0o644))
	mustRun(t, ws, "step", "Read")
	if tidy {
		mustRun(t, ws, "step", "Tidy")
		check(os.WriteFile(p("src/main.go"), []byte("package tidy\n"), 0o644))
	}
	return ws
}

// bothSources runs fn on the test history built unmounted and mounted: the
// same assertions and goldens hold for both Sources.
func bothSources(t *testing.T, fn func(t *testing.T, ws string)) {
	t.Run("unmounted", func(t *testing.T) { fn(t, buildHistory(t).ws) })
	t.Run("mounted", func(t *testing.T) { fn(t, buildMounted(t, false)) })
}

// bothSourcesTidy is bothSources on the history with the "Tidy" step.
func bothSourcesTidy(t *testing.T, fn func(t *testing.T, ws string)) {
	t.Run("unmounted", func(t *testing.T) { fn(t, buildHistoryTidy(t, true).ws) })
	t.Run("mounted", func(t *testing.T) { fn(t, buildMounted(t, true)) })
}

func TestLogGolden(t *testing.T) {
	bothSources(t, func(t *testing.T, ws string) {
		golden(t, "log.txt", mustRun(t, ws, "log"))
		stat := mustRun(t, ws, "log", "--stat")
		golden(t, "log-stat.txt", stat)
		// Each change names the process that made it.
		by := "  by test[4242]\n"
		if st, ok := history.ReadStatus(ws); ok && st.PID > 0 {
			comm, _ := os.ReadFile("/proc/self/comm")
			by = fmt.Sprintf("  by %s[%d]\n", strings.TrimSpace(string(comm)), os.Getpid())
		}
		if n := strings.Count(stat, by); n != 6 {
			t.Errorf("log --stat names %q %d times, want 6:\n%s", by, n, stat)
		}
	})
}

func TestLogJSON(t *testing.T) {
	bothSources(t, func(t *testing.T, ws string) {
		// Without --all the step that changed nothing is left out.
		var changed []history.Entry
		json.Unmarshal([]byte(mustRun(t, ws, "log", "--json")), &changed)
		if len(changed) != 2 || changed[0].Label != "Bash" || changed[1].Label != "Edit" {
			t.Errorf("log --json: got %d entries, want Bash and Edit only (Read changed nothing)", len(changed))
		}
		var entries []history.Entry
		out := mustRun(t, ws, "log", "--json", "--all")
		if err := json.Unmarshal([]byte(out), &entries); err != nil {
			t.Fatalf("log --json does not parse: %v\n%s", err, out)
		}
		// Also check the raw field names a harness relies on.
		var raw []map[string]any
		json.Unmarshal([]byte(out), &raw)
		for _, k := range []string{"type", "sequence", "time", "label", "changes", "start", "end"} {
			if _, ok := raw[0][k]; !ok {
				t.Errorf("log --json entry lacks %q: %v", k, raw[0])
			}
		}
		if len(entries) != 3 {
			t.Fatalf("got %d entries, want 3: %s", len(entries), out)
		}
		labels := []string{entries[0].Label, entries[1].Label, entries[2].Label}
		if strings.Join(labels, ",") != "Read,Bash,Edit" {
			t.Errorf("got labels %v, want newest first Read,Bash,Edit", labels)
		}
		got := map[string]string{}
		for _, c := range entries[1].Changes {
			got[c.Path] = c.Change
		}
		want := map[string]string{"renamed.txt": "renamed", "gone.txt": "deleted", "script.sh": "mode", "bin.dat": "modified"}
		for p, ch := range want {
			if got[p] != ch {
				t.Errorf("Bash step: %s is %q, want %q (all: %v)", p, got[p], ch, got)
			}
		}
		if len(got) != len(want) {
			t.Errorf("Bash step changes %v, want %v", got, want)
		}
		edit := entries[2]
		if len(edit.Changes) != 2 || edit.Changes[0].Path != "a.txt" || edit.Changes[0].Change != "modified" ||
			edit.Changes[0].Blob == "" || edit.Changes[1].Path != "new.txt" || edit.Changes[1].Change != "added" {
			t.Errorf("Edit step changes %+v", edit.Changes)
		}
		if len(entries[0].Changes) != 0 {
			t.Errorf("Read step changes %+v, want none", entries[0].Changes)
		}
	})
}

func TestDiffGolden(t *testing.T) {
	bothSources(t, func(t *testing.T, ws string) {
		golden(t, "diff-0-now.txt", mustRun(t, ws, "diff", "0"))
		golden(t, "diff-0-now-paths.txt", mustRun(t, ws, "diff", "0", "--", "a.txt", "script.sh"))
		// The reverse direction, between two past states.
		head := strings.Fields(mustRun(t, ws, "log", "--all"))[1]
		golden(t, "diff-head-0.txt", mustRun(t, ws, "diff", head, "0"))
		// From a subdirectory, paths are relative to it.
		if out := mustRun(t, filepath.Join(ws, "src"), "diff", "0", "--", "main.go"); out != "" {
			t.Errorf("diff of an unchanged file: %q, want nothing", out)
		}
	})
}

func TestShow(t *testing.T) {
	bothSources(t, func(t *testing.T, ws string) {
		if got := mustRun(t, ws, "show", "0", "gone.txt"); got != "bye\n" {
			t.Errorf("show 0 gone.txt = %q", got)
		}
		if got := mustRun(t, ws, "show", "@0", "old.txt"); got != "moved, not changed\n" {
			t.Errorf("show @0 old.txt = %q", got)
		}
		// Relative to the cwd, and workspace-relative from a subdirectory.
		sub := filepath.Join(ws, "src")
		if got := mustRun(t, sub, "show", "0", "main.go"); got != "package main\n" {
			t.Errorf("show 0 main.go from src = %q", got)
		}
		if got := mustRun(t, sub, "show", "0", "a.txt"); !strings.HasPrefix(got, "alpha\nbeta\n") {
			t.Errorf("show 0 a.txt from src = %q", got)
		}
		if got := mustRun(t, ws, "show", "0", "."); !strings.Contains(got, "src/\n") || strings.Contains(got, ".zero") {
			t.Errorf("show 0 . = %q", got)
		}
		wantFail(t, ws, 1, "zerofs: new.txt did not exist at 0", "show", "0", "new.txt")
		wantFail(t, ws, 1, "no sequence 999 (head is", "show", "999", "a.txt")
		wantFail(t, ws, 1, "outside the workspace", "show", "0", "../x")
		wantFail(t, ws, 1, "sequence 0 is the state before any step", "show", "0")
		wantFail(t, ws, 2, "usage: zerofs show STEP | show SEQ PATH", "show", "0", "a", "b")
		wantFail(t, ws, 2, "bad sequence", "show", "x", "a.txt")
	})
}

func TestRewindUndoRedo(t *testing.T) {
	bothSources(t, func(t *testing.T, ws string) {
		read := func(p string) string {
			b, err := os.ReadFile(filepath.Join(ws, p))
			if err != nil {
				return "<absent>"
			}
			return string(b)
		}
		wantFail(t, ws, 1, "nothing to redo", "redo")
		// undo skips the empty Read step and rolls back Bash.
		out := mustRun(t, ws, "undo")
		if want := "undid step 4 \"Bash\": restored 4, deleted 1\n"; out != want {
			t.Errorf("undo said %q, want %q", out, want)
		}
		if read("gone.txt") != "bye\n" || read("renamed.txt") != "<absent>" || read("new.txt") != "brand new\n" {
			t.Errorf("after undo: gone.txt %q renamed.txt %q new.txt %q", read("gone.txt"), read("renamed.txt"), read("new.txt"))
		}
		// A second undo goes one step further back: Edit.
		mustRun(t, ws, "undo")
		if read("new.txt") != "<absent>" || !strings.HasPrefix(read("a.txt"), "alpha\nbeta\n") {
			t.Errorf("after second undo: new.txt %q a.txt %q", read("new.txt"), read("a.txt"))
		}
		wantFail(t, ws, 1, "nothing to undo", "undo")
		// redo undoes the last undo.
		mustRun(t, ws, "redo")
		if read("new.txt") != "brand new\n" || read("gone.txt") != "bye\n" {
			t.Errorf("after redo: new.txt %q gone.txt %q", read("new.txt"), read("gone.txt"))
		}
		// rewind to 0 restores everything; rewinds show in the log.
		out = mustRun(t, ws, "rewind", "0")
		if !strings.HasPrefix(out, "rewound to 0: restored ") {
			t.Errorf("rewind said %q", out)
		}
		if read("old.txt") != "moved, not changed\n" || read("new.txt") != "<absent>" {
			t.Errorf("after rewind 0: old.txt %q new.txt %q", read("old.txt"), read("new.txt"))
		}
		if log := mustRun(t, ws, "log"); strings.Count("\n"+log, "\nrewind ") != 4 || !strings.Contains(log, "rewind to 0: restored") || !strings.Contains(log, "undo of step ") || !strings.Contains(log, "redo of step ") {
			t.Errorf("log shows %d rewinds, want 4 (a rewind to 0, an undo and a redo named as such):\n%s", strings.Count("\n"+log, "\nrewind "), log)
		}
		wantFail(t, ws, 1, "no sequence 1000 (head is", "rewind", "1000")
		wantFail(t, ws, 2, "usage: zerofs rewind [--dry-run] SEQ", "rewind")
		wantFail(t, ws, 2, "zerofs rewind: bad reference \"@-x\"", "rewind", "@-x")
		wantFail(t, ws, 2, "unexpected argument", "undo", "3")
	})
}

func TestStatusAndStep(t *testing.T) {
	s := buildHistory(t)
	out := mustRun(t, s.ws, "status")
	for _, want := range []string{"workspace: " + s.ws, "mounted:   no", "step:      ", "Read", "steps:     3", "blobs", "captures:  link removed files"} {
		if !strings.Contains(out, want) {
			t.Errorf("status lacks %q:\n%s", want, out)
		}
	}
	// A step on an unmounted workspace would never be filled: it fails as
	// run does; a hook only warns (it must never block an agent).
	before := mustRun(t, s.ws, "log")
	wantFail(t, s.ws, 1, "is not mounted, so nothing would be recorded in the step (zerofs mount ", "step", "fix", "the", "bug")
	wantFail(t, s.ws, 2, "want a LABEL", "step")
	hook := `{"session_id":"abc","hook_event_name":"PreToolUse","tool_name":"Edit","tool_input":{"file_path":"a.txt"},"cwd":"` + s.ws + `"}`
	r := zerofs(t, "/", hook, "step", "--hook")
	if r.code != 0 || !strings.Contains(r.stderr, "zerofs: warning: "+s.ws+" is not mounted; step \"Edit a.txt\" not recorded") {
		t.Fatalf("step --hook unmounted: exit %d, stderr %q", r.code, r.stderr)
	}
	if after := mustRun(t, s.ws, "log"); after != before {
		t.Errorf("a step on an unmounted workspace changed the log:\n%s\nwas:\n%s", after, before)
	}
	// Outside any workspace a hook warns and lets the agent go on.
	r = zerofs(t, t.TempDir(), `{"tool_name":"Bash"}`, "step", "--hook")
	if r.code != 0 || !strings.Contains(r.stderr, "warning") {
		t.Errorf("hook outside a workspace: exit %d, stderr %q", r.code, r.stderr)
	}
	// Garbage on stdin is a warning, never a failure (agents show exit 1
	// as a failed hook, and take 2 as "block this call").
	r = zerofs(t, s.ws, "not json", "step", "--hook")
	if r.code != 0 || !strings.Contains(r.stderr, "zerofs: warning: step --hook: stdin is not a hook's JSON object") {
		t.Errorf("hook with bad JSON: exit %d, stderr %q, want 0 and a warning", r.code, r.stderr)
	}
	wantFail(t, s.ws, 1, "is not mounted", "run", "--", "true")
	wantFail(t, s.ws, 2, "want a command", "run")
}

func TestGC(t *testing.T) {
	s := buildHistory(t)
	wantFail(t, s.ws, 2, "exclude each other", "gc", "--before", "1", "--keep", "1h")
	wantFail(t, s.ws, 1, "no sequence 500", "gc", "--before", "500")
	// A gc that forgets nothing says so and appends no event.
	before := mustRun(t, s.ws, "log")
	if out := mustRun(t, s.ws, "gc"); !strings.HasPrefix(out, "history already starts at 0: removed 0 unneeded blobs") {
		t.Errorf("gc: %q", out)
	}
	if out := mustRun(t, s.ws, "gc", "--keep", "1h"); !strings.HasPrefix(out, "history already starts at 0:") {
		t.Errorf("gc --keep 1h: %q", out)
	}
	if after := mustRun(t, s.ws, "log"); after != before {
		t.Errorf("a gc that freed nothing changed the log:\n%s\nwas:\n%s", after, before)
	}
	wantFail(t, s.ws, 2, "exclude each other", "gc", "--keep-steps", "1", "--keep", "1h")
	if out := mustRun(t, s.ws, "gc", "--keep-steps", "5"); !strings.HasPrefix(out, "history already starts at 0:") {
		t.Errorf("gc --keep-steps 5 of 3: %q", out)
	}
	if out := mustRun(t, s.ws, "gc", "--keep-steps", "2"); !strings.Contains(out, "the states of 1 step went") {
		t.Errorf("gc --keep-steps 2 of 3: %q", out)
	}
	head := strings.Fields(mustRun(t, s.ws, "log"))[1]
	out := mustRun(t, s.ws, "gc", "--before", head)
	if !strings.HasPrefix(out, "pruned history before "+head+": removed ") {
		t.Errorf("gc --before %s: %q", head, out)
	}
	wantFail(t, s.ws, 1, "was pruned", "show", "0", "a.txt")
	if out := mustRun(t, s.ws, "verify"); !strings.HasPrefix(out, "ok: ") {
		t.Errorf("verify after gc: %q", out)
	}
	if out := mustRun(t, s.ws, "log"); !strings.Contains(out, "pruned history before "+head) {
		t.Errorf("log after gc:\n%s", out)
	}
	mustRun(t, s.ws, "log", "--stat")
}

func TestUsage(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		args []string
		code int
		out  string // in stdout for 0, stderr otherwise
	}{
		{nil, 2, "usage:"},
		{[]string{"--help"}, 0, "zerofs mount [flags] WORKSPACE [MOUNTPOINT]"},
		{[]string{"help", "diff"}, 0, "usage: zerofs diff [--stat] [SEQ [SEQ2]] [-- PATH...]"},
		{[]string{"help", "nope"}, 2, `unknown command "nope"`},
		{[]string{"nope"}, 2, `unknown command "nope"`},
		{[]string{"log", "--help"}, 0, "usage: zerofs log"},
		{[]string{"log", "--bogus"}, 2, "flag provided but not defined: -bogus"},
		{[]string{"log"}, 1, "zerofs: not in a zerofs workspace"},
		{[]string{"status"}, 1, "zerofs: not in a zerofs workspace"},
		{[]string{"verify"}, 1, "zerofs: not in a zerofs workspace"},
		{[]string{"undo"}, 1, "zerofs: not in a zerofs workspace"},
		{[]string{"diff"}, 1, "zerofs: not in a zerofs workspace"},
		{[]string{"-C", "missing", "log"}, 1, "zerofs: -C " + filepath.Join(dir, "missing") + ": not a directory"},
		{[]string{"-C"}, 2, "-C wants a directory"},
		{[]string{"gc", "--keep", "7x"}, 2, "bad duration"},
		{[]string{"diff", "1", "2", "3"}, 2, "usage: zerofs diff"},
		{[]string{"gc", "--keep", "soon"}, 2, "invalid value"},
		{[]string{"mount"}, 2, "usage: zerofs mount"},
		{[]string{"mount", "--sync", "never", dir}, 2, "--sync must be always or batch"},
		{[]string{"mount", "-f", filepath.Join(dir, "missing")}, 1, "no such file or directory"},
		{[]string{"umount", dir}, 1, "is not a zerofs mount"},
		{[]string{"umount", "a", "b"}, 2, "usage: zerofs umount"},
	} {
		r := zerofs(t, dir, "", tc.args...)
		where := r.stderr
		if tc.code == 0 {
			where = r.stdout
		}
		if r.code != tc.code || !strings.Contains(where, tc.out) {
			t.Errorf("zerofs %v: exit %d, stdout %q, stderr %q; want exit %d and %q", tc.args, r.code, r.stdout, r.stderr, tc.code, tc.out)
		}
	}
}

func TestStoreInUse(t *testing.T) {
	s := buildHistory(t)
	s.open()
	defer s.close()
	wantFail(t, s.ws, 1, "is in use by a running zerofs", "log")
	wantFail(t, s.ws, 1, "is in use by a running zerofs", "undo")
	// status and verify only read, so they work next to a running zerofs.
	mustRun(t, s.ws, "status")
	mustRun(t, s.ws, "verify")
}

// status shows the store's ratios and what gc would free: a blob no
// checkpoint names (left by a crash between blob and event) is counted.
func TestStatusStoreFigures(t *testing.T) {
	s := buildHistory(t)
	out := mustRun(t, s.ws, "status")
	for _, want := range []string{"(dedup ", "(compression ", "packs, 0 loose", "gc:        would free up to 0 B (0 blobs no state since 0 needs)"} {
		if !strings.Contains(out, want) {
			t.Errorf("status lacks %q:\n%s", want, out)
		}
	}
	bs, err := blobstore.Open(filepath.Join(s.ws, ".zero", "blobs"), blobstore.Options{Sync: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := bs.Put(strings.NewReader(strings.Repeat("orphan ", 1000))); err != nil {
		t.Fatal(err)
	}
	if err := bs.Close(); err != nil {
		t.Fatal(err)
	}
	if out := mustRun(t, s.ws, "status"); !strings.Contains(out, "(1 blob no state since 0 needs)") {
		t.Errorf("status with an orphan blob:\n%s", out)
	}
}
