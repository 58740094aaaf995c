package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// headOf is the mounted workspace's head sequence.
func headOf(t *testing.T, ws string) string {
	t.Helper()
	return readTrim(t, filepath.Join(ws, ".zero", "head"))
}

// logChanges is every path `log --json` names in any entry's changes.
func logChanges(t *testing.T, ws string) map[string]bool {
	t.Helper()
	var ents []struct {
		Changes []struct {
			Path string `json:"path"`
			From string `json:"from"`
		} `json:"changes"`
	}
	if err := json.Unmarshal([]byte(binOK(t, ws, "log", "--json", "--all")), &ents); err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, e := range ents {
		for _, c := range e.Changes {
			out[c.Path] = true
			if c.From != "" {
				out[c.From] = true
			}
		}
	}
	return out
}

func noneUnder(t *testing.T, what string, paths map[string]bool, words ...string) {
	t.Helper()
	for p := range paths {
		for _, w := range words {
			if strings.Contains(p, w) {
				t.Errorf("%s names %q, which is ignored", what, p)
			}
		}
	}
}

// TestZeroignoreOnMount: on a real mount, .zeroignore (written through
// the mount) and --ignore keep node_modules, build output and logs out of
// history; a rewind to before `npm ci` leaves node_modules as it is; status
// and log say what is ignored; an rm -rf of a partly ignored tree, odd
// names, views, fork and the control directory behave as docs/guide.md
// says.
func TestZeroignoreOnMount(t *testing.T) {
	built.NeedFUSE(t)
	ws := filepath.Join(t.TempDir(), "ws")
	os.MkdirAll(ws, 0o755)
	writeFile(t, filepath.Join(ws, "package.json"), "{}\n")
	mountT(t, ws, "--ignore", "*.log")

	binOK(t, ws, "step", "ignore deps")
	sh(t, ws, `printf 'node_modules/\n*.bin\n.zero\n@*\n' > .zeroignore`)
	st := binOK(t, ws, "status")
	if !strings.Contains(st, "ignoring:  on, 5 patterns (4 from .zeroignore, 1 from --ignore)") {
		t.Errorf("status after writing .zeroignore:\n%s", st)
	}
	before := headOf(t, ws)
	binOK(t, ws, "step", "npm ci")
	sh(t, ws, `mkdir -p node_modules/left-pad/lib && echo 'module.exports=1' > node_modules/left-pad/index.js
		for i in 1 2 3 4 5; do echo $i > node_modules/left-pad/lib/f$i.js; done
		echo lock > package-lock.json; echo out > npm-debug.log
		printf 'x' > "$(printf 'caf\351.bin')"; printf 'y' > "$(printf 'new\nline.bin')"; printf 'z' > "$(printf 'kept\nname.txt')"`)
	changes := logChanges(t, ws)
	noneUnder(t, "log --json", changes, "node_modules", ".log", ".bin")
	for _, p := range []string{".zeroignore", "package-lock.json", "kept\nname.txt"} {
		if !changes[p] {
			t.Errorf("log --json lacks %q: %v", p, changes)
		}
	}
	if out := binOK(t, ws, "log"); !strings.Contains(out, `.zeroignore: from then on ignores node_modules/ *.bin .zero @*`) {
		t.Errorf("log does not say what .zeroignore ignores from then on:\n%s", out)
	}
	ign := binOK(t, ws, "status", "--ignored")
	for _, want := range []string{"ignored:   node_modules/\n", "ignored:   npm-debug.log\n", `ignored:   "caf\351.bin"` + "\n", `ignored:   "new\nline.bin"` + "\n"} {
		if !strings.Contains(ign, want) {
			t.Errorf("status --ignored lacks %q:\n%s", want, ign)
		}
	}
	var sj struct {
		Ignore struct {
			Patterns int      `json:"patterns"`
			Flags    []string `json:"flags"`
		} `json:"ignore"`
		Ignored []string `json:"ignored"`
	}
	if err := json.Unmarshal([]byte(binOK(t, ws, "status", "--json", "--ignored")), &sj); err != nil {
		t.Fatal(err)
	}
	if sj.Ignore.Patterns != 5 || len(sj.Ignore.Flags) != 1 || len(sj.Ignored) != 4 {
		t.Errorf("status --json --ignored: got %+v", sj)
	}
	mc := newMCPClient(t, ws)
	if text, st := mc.ok("zerofs_status", map[string]any{}); !strings.Contains(text, "ignoring what 5 patterns match") ||
		len(st["ignored_patterns"].([]any)) != 5 {
		t.Errorf("zerofs_status: %s\n%v", text, st)
	}
	// Its server stands in the workspace: ended before the umount below,
	// which refuses a mount a process still uses.
	mc.cs.Close()
	// The control directory and views are not workspace paths: patterns
	// naming them change nothing.
	binOK(t, ws, "step", "still works")
	if got := readTrim(t, filepath.Join(ws, "@"+before, "package.json")); got != "{}" {
		t.Errorf("@%s/package.json: %q", before, got)
	}
	// A view shows an ignored path as it is now (nothing recorded it).
	if got := readTrim(t, filepath.Join(ws, "@"+before, "node_modules/left-pad/lib/f3.js")); got != "3" {
		t.Errorf("@%s/node_modules/left-pad/lib/f3.js: %q, want it as it is now", before, got)
	}

	// A rewind to before npm ci takes back the lock file, keeps node_modules.
	out := binOK(t, ws, "rewind", before)
	if _, err := os.Lstat(filepath.Join(ws, "package-lock.json")); !os.IsNotExist(err) {
		t.Errorf("package-lock.json after the rewind: %v (%s)", err, out)
	}
	if got := readTrim(t, filepath.Join(ws, "node_modules/left-pad/lib/f5.js")); got != "5" {
		t.Errorf("node_modules after the rewind: f5.js %q", got)
	}
	for _, p := range []string{"npm-debug.log", "caf\xe9.bin", "new\nline.bin"} {
		if _, err := os.Lstat(filepath.Join(ws, p)); err != nil {
			t.Errorf("%q after the rewind: %v, want it left alone", p, err)
		}
	}
	if _, err := os.Lstat(filepath.Join(ws, "kept\nname.txt")); !os.IsNotExist(err) {
		t.Errorf("kept\\nname.txt (not ignored) after the rewind: %v, want gone", err)
	}
	binOK(t, ws, "undo")
	if r := bin(t, ws, "", "rewind", before, "--", "node_modules"); r.code != 1 || !strings.Contains(r.stderr, "zerofs: rewind: node_modules is ignored (.zeroignore or --ignore): rewinds leave ignored paths alone") {
		t.Errorf("rewind of an ignored path: exit %d, stderr %q", r.code, r.stderr)
	}

	// rm -rf of a partly ignored tree: the recorded part comes back, the
	// ignored part was never recorded and does not.
	sh(t, ws, `mkdir -p web/node_modules/m web/src && echo i > web/src/index.js && echo m > web/node_modules/m/m.js`)
	binOK(t, ws, "step", "rm web")
	gone := headOf(t, ws)
	sh(t, ws, `rm -rf web`)
	noneUnder(t, "log --json after rm -rf", logChanges(t, ws), "node_modules", ".log", ".bin")
	binOK(t, ws, "rewind", gone)
	if got := readTrim(t, filepath.Join(ws, "web/src/index.js")); got != "i" {
		t.Errorf("web/src/index.js after rewinding the rm: %q", got)
	}
	if _, err := os.Lstat(filepath.Join(ws, "web/node_modules")); !os.IsNotExist(err) {
		t.Errorf("web/node_modules after rewinding the rm: %v, want it not recorded and not back", err)
	}
	if out := binOK(t, ws, "verify"); !strings.HasPrefix(out, "ok: ") {
		t.Errorf("verify: %q", out)
	}

	// A rename out of the ignored name is captured on the side that is
	// not ignored; a rewind takes that side back and leaves the other.
	binOK(t, ws, "step", "mv out")
	mv := headOf(t, ws)
	sh(t, ws, `mv node_modules vendored`)
	if !logChanges(t, ws)["vendored/left-pad/index.js"] {
		t.Errorf("log --json lacks vendored/left-pad/index.js after mv node_modules vendored")
	}
	binOK(t, ws, "rewind", mv)
	if _, err := os.Lstat(filepath.Join(ws, "vendored")); !os.IsNotExist(err) {
		t.Errorf("vendored after the rewind: %v", err)
	}
	binOK(t, ws, "undo") // vendored comes back from the rewind's own capture
	if got := readTrim(t, filepath.Join(ws, "vendored/left-pad/lib/f2.js")); got != "2" {
		t.Errorf("vendored/left-pad/lib/f2.js after undoing the rewind: %q", got)
	}
	sh(t, ws, `mv vendored node_modules`)

	// A fork leaves out what is ignored.
	fork := filepath.Join(t.TempDir(), "fork")
	binOK(t, ws, "fork", headOf(t, ws), fork)
	for _, p := range []string{"node_modules", "npm-debug.log"} { // .zeroignore's, --ignore's
		if _, err := os.Lstat(filepath.Join(fork, p)); !os.IsNotExist(err) {
			t.Errorf("fork holds %s: %v", p, err)
		}
	}
	if got := readTrim(t, filepath.Join(fork, ".zeroignore")); !strings.Contains(got, "node_modules/") {
		t.Errorf("fork's .zeroignore: %q", got)
	}
	// A merge of the fork brings in its change and leaves what is ignored.
	sh(t, fork, `echo theirs > fork-new.txt && echo theirs > npm-debug.log && mkdir -p node_modules/left-pad && echo theirs > node_modules/left-pad/index.js`)
	binOK(t, ws, "merge", fork)
	if got := readTrim(t, filepath.Join(ws, "fork-new.txt")); got != "theirs" {
		t.Errorf("fork-new.txt after the merge: %q", got)
	}
	if got := readTrim(t, filepath.Join(ws, "npm-debug.log")); got != "out" {
		t.Errorf("npm-debug.log after the merge: %q, want ours (ignored)", got)
	}
	if got := readTrim(t, filepath.Join(ws, "node_modules/left-pad/index.js")); got != "module.exports=1" {
		t.Errorf("node_modules/left-pad/index.js after the merge: %q, want ours (ignored)", got)
	}

	// A .zeroignore that is a symlink is not used: status says so, and
	// everything but --ignore's matches is recorded again.
	sh(t, ws, `cp .zeroignore real-ignore && ln -sf real-ignore .zeroignore`)
	binOK(t, ws, "step", "symlinked")
	if st := binOK(t, ws, "status"); !strings.Contains(st, "ignoring:  .zeroignore not used (.zeroignore is a symlink") {
		t.Errorf("status with a symlinked .zeroignore:\n%s", st)
	}
	sh(t, ws, `echo 6 > node_modules/left-pad/lib/f6.js`)
	if !logChanges(t, ws)["node_modules/left-pad/lib/f6.js"] {
		t.Error("with .zeroignore unusable, a change in node_modules was not recorded")
	}
	// Mounted again so, the mount says it on stderr.
	binOK(t, "/", "umount", ws)
	r := bin(t, "/", "", "mount", ws)
	if r.code != 0 || !strings.Contains(r.stderr, "zerofs: warning: .zeroignore not used (.zeroignore is a symlink") {
		t.Errorf("mount with a symlinked .zeroignore: exit %d, stderr %q", r.code, r.stderr)
	}
}
