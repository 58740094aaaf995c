package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestLogFilters: log -n N and log -- PATH, one golden for both sources.
func TestLogFilters(t *testing.T) {
	bothSourcesTidy(t, func(t *testing.T, ws string) {
		golden(t, "log-n2.txt", mustRun(t, ws, "log", "-n", "2"))
		golden(t, "log-path.txt", mustRun(t, ws, "log", "--stat", "--", "a.txt", "src"))
		// Paths are relative to the current directory; a rename counts for
		// both of its names.
		if got, want := mustRun(t, filepath.Join(ws, "src"), "log", "--", "main.go"), mustRun(t, ws, "log", "--", "src/main.go"); got != want {
			t.Errorf("log -- main.go from src:\n%s\nwant\n%s", got, want)
		}
		if out := mustRun(t, ws, "log", "--stat", "--", "old.txt"); !strings.Contains(out, "renamed   old.txt -> renamed.txt") {
			t.Errorf("log -- old.txt:\n%s", out)
		}
		wantFail(t, ws, 1, "zerofs: no step changed nothing-here, and nothing-here does not exist", "log", "--", "nothing-here")
		wantFail(t, ws, 2, "-n -1 is negative", "log", "-n", "-1")
		wantFail(t, ws, 2, "paths go after --", "log", "a.txt")
	})
}

// TestLogOfUntouchedPaths: log of a path no step changed says so, and
// whether it exists: one that exists is an answer (exit 0), one that does
// not is a typo until shown otherwise (exit 1, as rewind refuses it), also
// among other paths. "no history yet" is kept for a workspace with none.
func TestLogOfUntouchedPaths(t *testing.T) {
	bothSources(t, func(t *testing.T, ws string) {
		if out := mustRun(t, ws, "log", "--", "src/main.go"); out != "no step changed src/main.go (it exists)\n" {
			t.Errorf("log -- src/main.go (untouched): %q", out)
		}
		if out := mustRun(t, filepath.Join(ws, "src"), "log", "--", "main.go", "."); out != "no step changed src/main.go or src (they exist)\n" {
			t.Errorf("log -- main.go . from src: %q", out)
		}
		wantFail(t, ws, 1, "zerofs: no step changed mian.go, and mian.go does not exist (paths are relative to this directory", "log", "--", "mian.go")
		wantFail(t, ws, 1, "zerofs: no step changed src/main.go or mian.go or \"a\\nb\", and mian.go, \"a\\nb\" do not exist", "log", "--", "src/main.go", "mian.go", "a\nb")
		if out := mustRun(t, ws, "log", "--json", "--", "mian.go"); strings.TrimSpace(out) != "[]" {
			t.Errorf("log --json -- mian.go: %q, want []", out)
		}
	})
	s := newStore(t, map[string]string{"f": "x\n"})
	s.close()
	if out := mustRun(t, s.ws, "log", "--", "mian.go"); out != "no history yet\n" {
		t.Errorf("log -- mian.go in a workspace with no history: %q", out)
	}
}

// TestNoEmptyImplicitSteps: a capture outside any step that changed
// nothing in the end (a tool that opened a file for writing and wrote
// nothing) makes no "(no step)" entry.
func TestNoEmptyImplicitSteps(t *testing.T) {
	t.Run("unmounted", func(t *testing.T) {
		s := buildHistory(t)
		mustRun(t, s.ws, "rewind", "4")
		s.open()
		s.change(func(string) error { return nil }, "a.txt")
		s.close()
		if out := mustRun(t, s.ws, "log"); strings.Contains(out, "(no step)") {
			t.Errorf("log shows an empty implicit step:\n%s", out)
		}
	})
	t.Run("mounted", func(t *testing.T) {
		ws := buildMounted(t, false)
		mustRun(t, ws, "rewind", "4")
		f, err := os.OpenFile(filepath.Join(ws, "a.txt"), os.O_RDWR, 0)
		if err != nil {
			t.Fatal(err)
		}
		f.Close()
		log := readTrim(t, filepath.Join(ws, ".zero", "log"))
		if !strings.Contains(log[strings.LastIndex(log, "session_rewind"):], "session_checkpoint") {
			t.Skip("opening for writing captured nothing: no empty implicit step to hide")
		}
		if out := mustRun(t, ws, "log"); strings.Contains(out, "(no step)") {
			t.Errorf("log shows an empty implicit step:\n%s", out)
		}
		// One that changed something is shown.
		writeFile(t, filepath.Join(ws, "a.txt"), "changed\n")
		if out := mustRun(t, ws, "log"); !strings.Contains(out, "(no step)") {
			t.Errorf("log hides an implicit step that changed a.txt:\n%s", out)
		}
	})
}

// TestRunMissingCommand: `zerofs run` of a command that does not exist
// exits 127, as a shell does, and leaves no step.
func TestRunMissingCommand(t *testing.T) {
	ws := buildMounted(t, false)
	before := mustRun(t, ws, "log")
	r := bin(t, ws, "", "run", "--", "no-such-command-zerofs")
	if r.code != 127 || !strings.Contains(r.stderr, "no-such-command-zerofs: command not found") {
		t.Errorf("run of a missing command: exit %d, stderr %q; want 127", r.code, r.stderr)
	}
	if after := mustRun(t, ws, "log"); after != before {
		t.Errorf("run of a missing command left a step:\n%s", after)
	}
}

// TestVersionAndCompletion: zerofs version, --version, and completion
// scripts that bash parses and that complete command names and flags.
func TestVersionAndCompletion(t *testing.T) {
	dir := t.TempDir()
	for _, args := range [][]string{{"version"}, {"--version"}} {
		r := zerofs(t, dir, "", args...)
		if r.code != 0 || !strings.HasPrefix(r.stdout, "zerofs ") || !strings.Contains(r.stdout, " go1.") {
			t.Errorf("zerofs %v: exit %d, stdout %q", args, r.code, r.stdout)
		}
	}
	script := filepath.Join(dir, "zerofs.bash")
	if err := os.WriteFile(script, []byte(mustRun(t, dir, "completion", "bash")), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ words, want string }{
		{"zerofs u", "ui umount undo"},
		{"zerofs log --s", "--stat"},
		{"zerofs completion z", "zsh"},
		{"zerofs help ver", "version verify"},
	} {
		words := strings.Fields(tc.words)
		cmd := exec.Command("bash", "-c", `. ./zerofs.bash; COMP_WORDS=(`+tc.words+`); COMP_CWORD=`+
			strconv.Itoa(len(words)-1)+`; _zerofs; printf '%s\n' "${COMPREPLY[@]}"`)
		cmd.Dir = dir
		b, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("bash completion of %q: %v\n%s", tc.words, err, b)
		}
		out := string(b)
		want := strings.Fields(tc.want)
		if got := sorted(strings.Fields(out)); strings.Join(got, " ") != strings.Join(sorted(want), " ") {
			t.Errorf("completing %q: got %q, want %q", tc.words, got, want)
		}
	}
	zsh := mustRun(t, dir, "completion", "zsh")
	for _, want := range []string{"#compdef zerofs", `"undo:roll back the last step, or a rewind or revert just made; names it"`, `log) _arguments "--json[]" "--stat[]" "--all[]" "--failed[]" "-n[]"`, `bisect) _arguments "--turns[]" "--good[]" "--bad[]" "--timeout[]"`} {
		if !strings.Contains(zsh, want) {
			t.Errorf("zsh completion lacks %q:\n%s", want, zsh)
		}
	}
	wantFail(t, dir, 2, "want bash or zsh", "completion")
	wantFail(t, dir, 2, `no completion for "tcsh"`, "completion", "tcsh")
}

func sorted(xs []string) []string {
	out := append([]string(nil), xs...)
	for i := range out {
		for j := i + 1; j < len(out); j++ {
			if out[j] < out[i] {
				out[i], out[j] = out[j], out[i]
			}
		}
	}
	return out
}
