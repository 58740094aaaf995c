package e2e

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// With --rename-records, @T serves a file beneath a directory renamed since
// from its present name: a reader needs the access both its state at T and
// that present path give them (SPEC, Trust), checked against the present
// path, not the old name. And `zerofs log` names the directory's rename once.
func TestViewThroughARenameRecordChecksThePresentPath(t *testing.T) {
	ws := sharedWS(t)
	if err := os.Chown(ws, nobody, nobody); err != nil {
		t.Fatal(err)
	}
	mountWS(t, ws, "--allow-other", "--rename-records")
	sh(t, ws, "mkdir src && echo anyone > src/pub && chown -R 65534:65534 src")
	T := step(t, ws, "mv")
	sh(t, ws, "mv src dst")
	v := view(ws, T)
	if got := mustNobody(t, ws, "cat "+v+"/src/pub"); got != "anyone\n" {
		t.Fatalf("nobody reads @%d/src/pub = %q", T, got)
	}
	step(t, ws, "lock")
	sh(t, ws, "chown root:root dst && chmod 700 dst")
	deniedNobody(t, ws, "cat "+v+"/src/pub")
	if got := must(t, ws, nil, "cat", v+"/src/pub"); got != "anyone\n" {
		t.Fatalf("root reads @%d/src/pub = %q", T, got)
	}
	if out := zerofsOK(t, ws, "log", "--stat"); !strings.Contains(out, "src -> dst") {
		t.Fatalf("zerofs log --stat does not name the rename src -> dst:\n%s", out)
	}
}

// `zerofs diff` across rename records lists every file that differs: a
// directory moved away and back with an edit made under its other name,
// and one moved onto an empty directory (a directory on both sides).
func TestDiffThroughRenameRecords(t *testing.T) {
	ws := filepath.Join(t.TempDir(), "ws")
	if err := os.Mkdir(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	mountWS(t, ws, "--rename-records")
	sh(t, ws, "mkdir src e && echo a > src/x && echo keep > src/y")
	T := step(t, ws, "mv")
	sh(t, ws, "mv src dst")
	step(t, ws, "edit")
	sh(t, ws, "echo b > dst/x")
	step(t, ws, "mv back")
	sh(t, ws, "mv dst src")
	out := zerofsOK(t, ws, "diff", strconv.FormatInt(T, 10))
	if !strings.Contains(out, "src/x") || !strings.Contains(out, "+b") || strings.Contains(out, "src/y") {
		t.Fatalf("zerofs diff %d after mv and back with an edit:\n%s", T, out)
	}
	// log -- a path beneath the directory names the steps that moved it.
	out = zerofsOK(t, ws, "log", "--", "src/x")
	for _, want := range []string{"mv back", "mv"} {
		if !strings.Contains(out, want) {
			t.Fatalf("zerofs log -- src/x does not name step %q:\n%s", want, out)
		}
	}
	T2 := step(t, ws, "onto empty")
	sh(t, ws, "mv -T src e")
	out = zerofsOK(t, ws, "diff", strconv.FormatInt(T2, 10))
	for _, want := range []string{"e/x", "e/y", "src/x", "src/y"} {
		if !strings.Contains(out, want) {
			t.Fatalf("zerofs diff %d after mv onto an empty directory does not name %s:\n%s", T2, want, out)
		}
	}
}
