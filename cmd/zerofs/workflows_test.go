package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// formsEnv runs the workflow commands one way: in-process on an unmounted
// workspace, or with the binary through a real mount.
type formsEnv struct {
	ws string
	// run runs zerofs from dir.
	run func(t *testing.T, dir string, args ...string) result
	// step begins a step; write writes a file, as a tool would.
	step  func(label string)
	write func(p, content string)
	// done finishes building the history (the unmounted store is closed
	// so the CLI can open it); later writes a file after that, as a person
	// would.
	done  func()
	later func(p, content string)
}

// callerRE matches the process that made a change, which differs between
// the in-process store and a shell under the mount.
var callerRE = regexp.MustCompile(`by \S+ \(pid \d+\)|by \S+, pid \d+`)

// TestWorkflowsUnmounted and TestWorkflowsMounted run the same session
// of revert, path rewinds, dry runs and fork against the same goldens.
func TestWorkflowsUnmounted(t *testing.T) {
	s := newStore(t, map[string]string{"main.go": "v1\n", "notes.txt": "n1\n"})
	testWorkflows(t, formsEnv{
		ws:    s.ws,
		run:   func(t *testing.T, dir string, args ...string) result { return zerofs(t, dir, "", args...) },
		step:  func(label string) { s.step(label) },
		write: s.write,
		done:  s.close,
		later: func(p, content string) { s.open(); s.write(p, content); s.close() },
	})
}

func TestWorkflowsMounted(t *testing.T) {
	built.NeedFUSE(t)
	ws := filepath.Join(t.TempDir(), "ws")
	os.MkdirAll(ws, 0o755)
	writeFile(t, filepath.Join(ws, "main.go"), "v1\n")
	writeFile(t, filepath.Join(ws, "notes.txt"), "n1\n")
	mountT(t, ws)
	fork := testWorkflows(t, formsEnv{
		ws:    ws,
		run:   func(t *testing.T, dir string, args ...string) result { return bin(t, dir, "", args...) },
		step:  func(label string) { binOK(t, ws, "step", label) },
		write: func(p, content string) { writeFile(t, filepath.Join(ws, p), content) },
		done:  func() {},
		later: func(p, content string) { writeFile(t, filepath.Join(ws, p), content) },
	})
	// The fork mounts: its @1 is the state forked, and a rewind works.
	mountT(t, fork)
	if got := readTrim(t, filepath.Join(fork, "@1", "notes.txt")); got != "n2" {
		t.Fatalf("the mounted fork's @1/notes.txt: %q, want n2", got)
	}
	writeFile(t, filepath.Join(fork, "notes.txt"), "changed in the fork\n")
	if out := binOK(t, fork, "rewind", "1"); !strings.HasPrefix(out, "rewound to 1: restored 1") {
		t.Fatalf("rewind 1 in the fork: %q", out)
	}
	if got := readTrim(t, filepath.Join(fork, "notes.txt")); got != "n2" {
		t.Fatalf("the fork's notes.txt after rewind 1: %q, want n2", got)
	}
	if got := readTrim(t, filepath.Join(ws, "notes.txt")); got != "n2" {
		t.Fatalf("the source's notes.txt changed with the fork: %q", got)
	}
}

// testWorkflows runs the session and returns the fork it made.
func testWorkflows(t *testing.T, env formsEnv) (fork string) {
	ws := env.ws
	ok := func(args ...string) string {
		t.Helper()
		r := env.run(t, ws, args...)
		if r.code != 0 {
			t.Fatalf("zerofs %s: exit %d, stderr %q", strings.Join(args, " "), r.code, r.stderr)
		}
		return r.stdout
	}
	fail := func(code int, want string, args ...string) result {
		t.Helper()
		r := env.run(t, ws, args...)
		if r.code != code || !strings.Contains(r.stderr, want) {
			t.Fatalf("zerofs %s: exit %d, stderr %q; want exit %d and %q", strings.Join(args, " "), r.code, r.stderr, code, want)
		}
		if code == 1 && (strings.Count(r.stderr, "\n") != 1 || !strings.HasPrefix(r.stderr, "zerofs: ")) {
			t.Fatalf("zerofs %s: stderr %q, want one line \"zerofs: ...\"", strings.Join(args, " "), r.stderr)
		}
		return r
	}
	read := func(p string) string {
		b, err := os.ReadFile(filepath.Join(ws, p))
		if err != nil {
			return "<absent>"
		}
		return string(b)
	}
	// 1 step, 2 main.go; 3 step, 4 notes.txt, 5 new.txt; 6 step, 7 main.go.
	env.step("Edit main.go")
	env.write("main.go", "v2\nline2\n")
	env.step("Write notes")
	env.write("notes.txt", "n2\n")
	env.write("new.txt", "new\n")
	env.step("Edit main.go again")
	env.write("main.go", "v3\nline2\n")
	env.done()

	golden(t, "undo-dry-run.txt", ok("undo", "--dry-run"))
	golden(t, "revert-dry-run.txt", ok("revert", "--dry-run", "3"))
	// Step 1's main.go was changed again by step 6: a conflict, nothing changes.
	r := fail(1, "zerofs: revert of step 1 \"Edit main.go\" conflicts with later changes to main.go (--force puts them back too)", "revert", "1")
	if r.stdout != "" || read("main.go") != "v3\nline2\n" {
		t.Fatalf("a refused revert: stdout %q, main.go %q", r.stdout, read("main.go"))
	}
	r = fail(1, "conflicts with later changes to main.go", "revert", "--dry-run", "1")
	golden(t, "revert-dry-run-conflict.txt", r.stdout)
	// A forced dry run says what the forced run would do: main.go goes back too.
	golden(t, "revert-dry-run-force.txt", ok("revert", "--dry-run", "--force", "1"))

	golden(t, "revert.txt", ok("revert", "3"))
	if read("notes.txt") != "n1\n" || read("new.txt") != "<absent>" || read("main.go") != "v3\nline2\n" {
		t.Fatalf("after revert 3: notes %q new %q main %q", read("notes.txt"), read("new.txt"), read("main.go"))
	}
	golden(t, "rewind-paths-dry-run.txt", ok("rewind", "--dry-run", "1", "--", "main.go"))
	golden(t, "rewind-paths.txt", ok("rewind", "1", "--", "main.go"))
	if read("main.go") != "v1\n" {
		t.Fatalf("after rewind 1 -- main.go: %q", read("main.go"))
	}
	// Again, main.go is as it was at 1: the dry run says what the real
	// run says, and neither changes or records anything.
	logBefore := ok("log", "--all")
	dryAgain, again := ok("rewind", "--dry-run", "1", "--", "main.go"), ok("rewind", "1", "--", "main.go")
	if want := "nothing to change: main.go is already as it would be\n"; dryAgain != want || again != want {
		t.Errorf("rewind (--dry-run) 1 -- main.go of an unchanged path: %q and %q, want %q for both", dryAgain, again, want)
	}
	if got := ok("log", "--all"); got != logBefore {
		t.Errorf("a rewind that changed nothing was recorded: log\n%s\nwas\n%s", got, logBefore)
	}
	// A change made after a rewind, before any step: a rewind over it says so.
	env.later("typed.txt", "by hand\n")
	dry := env.run(t, ws, "rewind", "--dry-run", "7")
	if dry.code != 0 {
		t.Fatalf("rewind --dry-run 7: %+v", dry)
	}
	golden(t, "rewind-dry-run-foreign.txt", callerRE.ReplaceAllString(dry.stdout, "by COMM, pid PID"))
	r = env.run(t, ws, "rewind", "7")
	if r.code != 0 || !strings.Contains(r.stderr, "zerofs: warning: this overwrote typed.txt, changed between steps") {
		t.Fatalf("rewind 7 over a change made between steps: exit %d, stderr %q", r.code, r.stderr)
	}
	golden(t, "revert-force.txt", ok("revert", "--force", "1"))
	if read("main.go") != "v1\n" {
		t.Fatalf("after revert --force 1: main.go %q", read("main.go"))
	}
	// undo after a revert undoes the revert, not more.
	ok("undo")
	if read("main.go") != "v3\nline2\n" || read("notes.txt") != "n2\n" {
		t.Fatalf("undo of the forced revert: main.go %q, notes.txt %q", read("main.go"), read("notes.txt"))
	}
	ok("revert", "--force", "1")

	// Fork the state at 5 (after "Write notes").
	dir := filepath.Join(t.TempDir(), "fork")
	out := ok("fork", "5", dir)
	golden(t, "fork.txt", strings.ReplaceAll(out, dir, "DIR"))
	for p, want := range map[string]string{"main.go": "v2\nline2\n", "notes.txt": "n2\n", "new.txt": "new\n"} {
		if b, err := os.ReadFile(filepath.Join(dir, p)); err != nil || string(b) != want {
			t.Fatalf("fork's %s: %q, %v; want %q", p, b, err, want)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "typed.txt")); !os.IsNotExist(err) {
		t.Fatalf("the fork has typed.txt, made after 5: %v", err)
	}
	if b, err := os.ReadFile(filepath.Join(dir, ".zero", "events.jsonl")); err != nil ||
		!strings.Contains(string(b), `"type":"workspace_forked"`) || !strings.Contains(string(b), `"source":"`+ws+`"`) ||
		!regexp.MustCompile(`"payload":\{"source":"[^"]+","sequence":5[,}]`).Match(b) {
		t.Fatalf("fork's log: %s, %v", b, err)
	}
	// The fork is a workspace of its own (unmounted here).
	if got := zerofs(t, dir, "", "show", "1", "notes.txt"); got.code != 0 || got.stdout != "n2\n" {
		t.Fatalf("zerofs show 1 notes.txt in the fork: %+v", got)
	}

	// Errors: usage (2) and failures (1, one line).
	fail(2, "usage: zerofs revert [--dry-run] [--force] SEQ", "revert")
	fail(2, "usage: zerofs revert", "revert", "1", "2")
	fail(2, "no step at 0", "revert", "0")
	fail(2, "usage: zerofs revert", "revert", "-1x")
	fail(2, "flag provided but not defined", "revert", "--bogus", "1")
	fail(1, "no sequence 999 (head is", "revert", "999")
	fail(1, "no sequence 999 (head is", "revert", "--dry-run", "999")
	fail(1, "no sequence 999 (head is", "rewind", "999", "--", "main.go")
	fail(1, "no sequence 999 (head is", "rewind", "--dry-run", "999")
	fail(2, "want PATHs after --", "rewind", "1", "--")
	fail(1, "is outside the workspace", "rewind", "1", "--", "../elsewhere")
	fail(1, "not a path zerofs versions", "rewind", "1", "--", ".zero/events.jsonl")
	fail(2, "usage: zerofs undo [--dry-run]", "undo", "--dry-run", "3")
	fail(2, "usage: zerofs fork SEQ DIR", "fork", "1")
	fail(1, "no sequence 999 (head is", "fork", "999", filepath.Join(t.TempDir(), "x"))
	fail(1, "exists", "fork", "1", dir)
	fail(1, "inside the workspace", "fork", "1", filepath.Join(ws, "sub"))
	return dir
}
