package fs

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/zerofs/zerofs/internal/testsupport"
	"github.com/zerofs/zerofs/rewind"
)

// A fork, made through the mount's @T/ (as the CLI does when mounted) or by
// the engine, mounts: its tree is the state forked, its @1 shows the same,
// and a rewind in it works and leaves the source alone.
func TestForkMount(t *testing.T) {
	ctx := context.Background()
	m := mountT(t, Options{})
	mp := m.Mountpoint()
	writeFile(t, filepath.Join(mp, "a.txt"), "one\n")
	if err := os.Mkdir(filepath.Join(mp, "d"), 0o750); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(mp, "d/x"), "x\n")
	s := stepT(t, mp, "edit")
	want := testsupport.Snapshot(t, mp)
	writeFile(t, filepath.Join(mp, "a.txt"), "two\n")
	for _, how := range []string{"view", "engine"} {
		t.Run(how, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "fork")
			var err error
			if how == "view" {
				_, err = rewind.ForkDir(ctx, view(mp, s), s, dir, m.fs.workspace)
			} else {
				_, err = m.fs.eng.Fork(ctx, s, dir, m.fs.workspace)
			}
			if err != nil {
				t.Fatal(err)
			}
			fm := mountT(t, Options{Workspace: dir})
			fmp := fm.Mountpoint()
			if d := diffTrees(testsupport.Snapshot(t, fmp), want); d != "" {
				t.Fatalf("the mounted fork differs from @%d:\n%s", s, d)
			}
			if d := diffTrees(testsupport.Snapshot(t, view(fmp, 1)), want); d != "" {
				t.Fatalf("the fork's @1 differs from the source's @%d:\n%s", s, d)
			}
			if log := ctlRead(t, fmp, "log"); !strings.Contains(strings.SplitN(log, "\n", 2)[0], `"type":"workspace_forked"`) {
				t.Fatalf("the fork's log does not begin with workspace_forked:\n%s", log)
			}
			writeFile(t, filepath.Join(fmp, "a.txt"), "in the fork\n")
			rewindT(t, fmp, 1)
			if got := readFile(t, filepath.Join(fmp, "a.txt")); got != "one\n" {
				t.Fatalf("a.txt after rewinding the fork to 1: %q, want one", got)
			}
			if got := readFile(t, filepath.Join(mp, "a.txt")); got != "two\n" {
				t.Fatalf("the source's a.txt changed: %q", got)
			}
		})
	}
}
