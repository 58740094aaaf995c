package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// setidScript creates files and directories with set-id and sticky bits
// under two umasks, in its own directory and in "sg" (a setgid directory of
// a group the caller is not in), and prints each result's mode: what the
// kernel gives natively is what a mount must give.
const setidScript = `
import os, stat, sys
out = []
for um in (0o022, 0o000):
    os.umask(um)
    for d in (".", "sg"):
        for m in (0o4755, 0o2755, 0o6777, 0o1777, 0o2711, 0o4700):
            n = "%s/f%o-%o" % (d, m, um)
            os.close(os.open(n, os.O_CREAT | os.O_WRONLY | os.O_EXCL, m))
            out.append("%s %o" % (n, stat.S_IMODE(os.lstat(n).st_mode)))
            n = "%s/d%o-%o" % (d, m, um)
            os.mkdir(n, m)
            out.append("%s %o" % (n, stat.S_IMODE(os.lstat(n).st_mode)))
print("\n".join(out))
`

// Set-id bits asked for at create are kept as the kernel keeps them
// natively (issue 14, defect 8): nobody's open(O_CREAT, 04755) in its own
// directory gives 4755, not the 0755 the daemon's chown after the create
// left; likewise 02755 and 06777; mkdir keeps the sticky bit and inherits a
// setgid directory's; a setgid directory of another group strips a new
// file's setgid bit.
func TestCreateKeepsSetIDBitsAsTheKernelDoes(t *testing.T) {
	ws := sharedWS(t)
	native := filepath.Join(filepath.Dir(ws), "native")
	for _, d := range []string{ws + "/d", native} {
		if err := os.MkdirAll(d+"/sg", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(d, nobody, nobody); err != nil {
			t.Fatal(err)
		}
		// sg: root's group, setgid, writable by nobody.
		if err := os.Chmod(d+"/sg", 0o777|os.ModeSetgid); err != nil {
			t.Fatal(err)
		}
	}
	mountWS(t, ws, "--allow-other")
	want := mustNobody(t, native, "python3 -c '"+setidScript+"'")
	got := mustNobody(t, ws+"/d", "python3 -c '"+setidScript+"'")
	if got != want {
		t.Fatalf("modes created through the mount differ from native ones:\n%s", lineDiff(want, got))
	}
}

// lineDiff names the lines of got that differ from want's, side by side.
func lineDiff(want, got string) string {
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	var b strings.Builder
	for i := range max(len(w), len(g)) {
		var wl, gl string
		if i < len(w) {
			wl = w[i]
		}
		if i < len(g) {
			gl = g[i]
		}
		if wl != gl {
			fmt.Fprintf(&b, "native %q, mount %q\n", wl, gl)
		}
	}
	return b.String()
}
