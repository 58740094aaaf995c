package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The unmounted store was an ordinary directory that `git add -A` took in,
// history, blobs and daemon log included. The store holds a .gitignore of
// "*" (SPEC, Trust): a new store gets it, and an older store without it
// gets it at the next open.
func TestGitAddTakesNothingOfTheStore(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git")
	}
	ws := filepath.Join(t.TempDir(), "ws")
	os.Mkdir(ws, 0o755)
	os.WriteFile(filepath.Join(ws, "main.go"), []byte("package main\n"), 0o644)
	mountT(t, ws)
	binOK(t, ws, "step", "edit")
	sh(t, ws, "echo 'package main // 2' > main.go")
	unmountT(t, ws)

	git := func(args ...string) string {
		t.Helper()
		cmd := exec.Command("git", append([]string{"-c", "init.defaultBranch=main"}, args...)...)
		cmd.Dir = ws
		cmd.Env = append(os.Environ(), "HOME="+t.TempDir(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("git %s: %v: %s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	check := func(when string) {
		t.Helper()
		git("add", "-A")
		files := git("ls-files")
		if strings.Contains(files, ".zero") || !strings.Contains(files, "main.go") {
			t.Fatalf("%s: git add -A took %q, want main.go and nothing of .zero/", when, files)
		}
	}
	if b, err := os.ReadFile(filepath.Join(ws, ".zero", ".gitignore")); err != nil || string(b) != "*\n" {
		t.Fatalf("the new store's .gitignore: %q, %v; want \"*\\n\"", b, err)
	}
	git("init", "-q")
	check("a new store")

	// A store made before .gitignore existed gets one at its next open.
	os.Remove(filepath.Join(ws, ".zero", ".gitignore"))
	git("rm", "-r", "-q", "--cached", ".")
	mountT(t, ws)
	unmountT(t, ws)
	check("an older store, opened again")
}
