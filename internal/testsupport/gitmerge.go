package testsupport

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
)

// GitMergeFile runs `git merge-file -p ours base theirs` on the three texts
// and returns its output and whether it merged cleanly (exit 0; exit 1-127
// is a conflict). The merge tests take git's answer as the reference.
func GitMergeFile(base, ours, theirs string) (merged string, clean bool, err error) {
	dir, err := os.MkdirTemp("", "zerofs-merge-file-")
	if err != nil {
		return "", false, err
	}
	defer os.RemoveAll(dir)
	for name, s := range map[string]string{"base": base, "ours": ours, "theirs": theirs} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(s), 0o600); err != nil {
			return "", false, err
		}
	}
	cmd := exec.Command("git", "merge-file", "-p", "ours", "base", "theirs")
	cmd.Dir = dir
	out, err := cmd.Output()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return string(out), true, nil
	case errors.As(err, &ee) && ee.ExitCode() > 0 && ee.ExitCode() < 128:
		return string(out), false, nil
	}
	return "", false, fmt.Errorf("git merge-file: %w", err)
}
