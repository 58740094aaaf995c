package e2e

import (
	"os"
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
