package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestForkErrorsSayFork: a fork refused for its directory, or failing to
// make it, says "fork into DIR" and why, never the engine's package name,
// mounted or not; nothing is left behind.
func TestForkErrorsSayFork(t *testing.T) {
	bothSources(t, func(t *testing.T, ws string) {
		taken := t.TempDir()
		for _, tc := range []struct{ dir, want string }{
			{filepath.Join(ws, "inside"), "zerofs: fork into " + ws + "/inside: it is inside the workspace " + ws + " (a fork is a new directory outside it)"},
			{taken, "zerofs: fork into " + taken + ": it exists (a fork is a new directory: name one that does not exist)"},
			{filepath.Join(taken, "no", "parent"), "zerofs: fork into " + taken + "/no/parent: "},
		} {
			r := wantFail(t, ws, 1, tc.want, "fork", "1", tc.dir)
			if strings.Contains(r.stderr, "rewind:") {
				t.Errorf("fork %s: %q names the engine's package", tc.dir, r.stderr)
			}
		}
		if _, err := os.Lstat(filepath.Join(ws, "inside")); !os.IsNotExist(err) {
			t.Errorf("the refused fork inside the workspace left %s (%v)", filepath.Join(ws, "inside"), err)
		}
	})
}
