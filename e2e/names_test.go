package e2e

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
)

// Names another user chooses (issue 14, defects 3 and 4), on a real mount
// with --allow-other: nobody names files to forge root's output, and with
// bytes that are not UTF-8.

// noControls fails unless out has no control character but newline and
// tab, no C1 control, no U+FFFD and nothing that is not UTF-8.
func noControls(t *testing.T, what, out string) {
	t.Helper()
	for i, r := range out {
		if (r < 0x20 && r != '\n' && r != '\t') || r == 0x7f || (r >= 0x80 && r < 0xa0) || r == '\ufffd' {
			t.Errorf("%s holds %U at byte %d:\n%q", what, r, i, out)
			return
		}
	}
}

// TestAnotherUsersFileNamesCannotForgeRootsLog: a name with newlines and
// ESC sequences made root's `zerofs log --stat` show a forged step and
// erase the real "deleted README.md" line; diff headers split.
func TestAnotherUsersFileNamesCannotForgeRootsLog(t *testing.T) {
	ws := sharedWS(t)
	if err := os.WriteFile(filepath.Join(ws, "README.md"), []byte("readme\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(ws, "pub"), 0o777); err != nil {
		t.Fatal(err)
	}
	os.Chmod(filepath.Join(ws, "pub"), 0o777)
	mountWS(t, ws, "--allow-other")
	step(t, ws, "Edit")
	mustNobody(t, filepath.Join(ws, "pub"), `printf x > "$(printf 'n\n\nstep   9  2026-01-01 00:00:00  Edit\n    modified  notes.txt\033[2K\033[1A')"`)
	if err := os.Remove(filepath.Join(ws, "README.md")); err != nil {
		t.Fatal(err)
	}
	step(t, ws, "Read")
	stat := zerofsOK(t, ws, "log", "--stat")
	noControls(t, "log --stat", stat)
	if !strings.Contains(stat, "deleted   README.md") || strings.Contains(stat, "\nstep   9") ||
		!strings.Contains(stat, `added     "pub/n\n\nstep   9  2026-01-01 00:00:00  Edit\n    modified  notes.txt\033[2K\033[1A"`) {
		t.Errorf("log --stat:\n%s", stat)
	}
	diff := zerofsOK(t, ws, "diff", "0")
	noControls(t, "diff", diff)
	if !strings.Contains(diff, `diff --git "a/pub/n\n\nstep`) {
		t.Errorf("diff header not quoted:\n%s", diff)
	}
	dry := zerofsOK(t, ws, "rewind", "--dry-run", "1")
	noControls(t, "rewind --dry-run", dry)
	if !strings.Contains(dry, `delete   "pub/n\n\nstep`) {
		t.Errorf("rewind --dry-run:\n%s", dry)
	}
}

// TestNonUTF8NamesStayApart: bad\xff, bad\xfe and bad\uFFFD were merged
// into one name in the log, so the view at a past state, log --json and
// a rewind saw one file (or none) for three. Each must keep its bytes:
// in the log, in @T, after a remount (the index rebuilt from the log), and
// through a rewind.
func TestNonUTF8NamesStayApart(t *testing.T) {
	ws := sharedWS(t)
	pub := filepath.Join(ws, "pub")
	if err := os.Mkdir(pub, 0o777); err != nil {
		t.Fatal(err)
	}
	os.Chmod(pub, 0o777)
	names := []string{"bad\xff", "bad\xfe", "bad\ufffd"}
	mountWS(t, ws, "--allow-other")
	step(t, ws, "create")
	mustNobody(t, pub, `printf 1 > "$(printf 'bad\377')"; printf 22 > "$(printf 'bad\376')"; printf 333 > "$(printf 'bad\357\277\275')"`)
	s1 := step(t, ws, "change")
	mustNobody(t, pub, `printf one > "$(printf 'bad\377')"; printf two > "$(printf 'bad\376')"; printf three > "$(printf 'bad\357\277\275')"`)
	s2 := step(t, ws, "after")
	check := func(when string) {
		t.Helper()
		ents, err := os.ReadDir(filepath.Join(view(ws, s1), "pub"))
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, e := range ents {
			got = append(got, e.Name())
		}
		want := slices.Clone(names)
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Errorf("%s: @%d/pub lists %q, want %q", when, s1, got, want)
		}
		for i, n := range names {
			b, err := os.ReadFile(filepath.Join(view(ws, s1), "pub", n))
			if want := strings.Repeat(string(rune('1'+i)), i+1); err != nil || string(b) != want {
				t.Errorf("%s: @%d/pub/%q = %q, %v; want %q", when, s1, n, b, err, want)
			}
		}
	}
	check("mounted")
	// The index rebuilt from the log (no snapshot) keeps them apart too.
	zerofsOK(t, "/", "umount", ws)
	os.Remove(filepath.Join(ws, ".zero", "index.snapshot"))
	mountWS(t, ws, "--allow-other")
	check("remounted")
	rewindTo(t, ws, s1)
	for i, n := range names {
		b, err := os.ReadFile(filepath.Join(pub, n))
		if want := strings.Repeat(string(rune('1'+i)), i+1); err != nil || string(b) != want {
			t.Errorf("after rewind to %d: pub/%q = %q, %v; want %q", s1, n, b, err, want)
		}
	}
	rewindTo(t, ws, s2)
	diff := zerofsOK(t, ws, "diff", itoa(s1), itoa(s2))
	noControls(t, "diff", diff)
	for _, q := range []string{`"a/pub/bad\377"`, `"a/pub/bad\376"`, `"a/pub/bad\357\277\275"`} {
		if strings.Count(diff, "diff --git "+q) != 1 {
			t.Errorf("diff %d %d: want one header for %s:\n%s", s1, s2, q, diff)
		}
	}
}

// TestNonUTF8NamesThroughEveryRequest: issue 14, defect 4, the requests.
// On a mounted workspace `zerofs rewind SEQ -- bad\xff` went to the daemon
// as JSON with "bad\uFFFD" in it and rewound that other file. Each front
// end that names a path (rewind -- PATH and its dry run, .zero/rewind with
// pathsBytes, revert's conflicts, diff and show of a path, log --json of
// the rewind) keeps the name's bytes and prints it quoted; a request that
// is not UTF-8 is refused (EINVAL), never read as another name.
func TestNonUTF8NamesThroughEveryRequest(t *testing.T) {
	ws := sharedWS(t)
	pub := filepath.Join(ws, "pub")
	if err := os.Mkdir(pub, 0o777); err != nil {
		t.Fatal(err)
	}
	os.Chmod(pub, 0o777)
	names := []string{"pub/bad\xff", "pub/bad\xfe", "pub/bad\ufffd"}
	mountWS(t, ws, "--allow-other")
	write := func(what string) {
		t.Helper()
		mustNobody(t, pub, fmt.Sprintf(`for n in "$(printf 'bad\377')" "$(printf 'bad\376')" "$(printf 'bad\357\277\275')"; do printf %s > "$n"; done`, what))
	}
	contents := func() []string {
		var out []string
		for _, n := range names {
			b, _ := os.ReadFile(filepath.Join(ws, n))
			out = append(out, string(b))
		}
		return out
	}
	step(t, ws, "create")
	write("one")
	s1 := step(t, ws, "change")
	write("two")
	s2 := step(t, ws, "after")

	dry := zerofsOK(t, ws, "rewind", "--dry-run", itoa(s1), "--", "pub/bad\xff")
	noControls(t, "rewind --dry-run -- bad\\xff", dry)
	if !strings.Contains(dry, `"pub/bad\377"`) || strings.Contains(dry, `\357\277\275`) || strings.Contains(dry, `\376`) {
		t.Errorf("rewind --dry-run -- bad\\xff:\n%s", dry)
	}
	out := zerofsOK(t, ws, "rewind", itoa(s1), "--", "pub/bad\xff")
	noControls(t, "rewind -- bad\\xff", out)
	if want := fmt.Sprintf("rewound \"pub/bad\\377\" to %d: restored 1, deleted 0, skipped 0\n", s1); out != want {
		t.Errorf("rewind -- bad\\xff said %q, want %q", out, want)
	}
	if got := contents(); !slices.Equal(got, []string{"one", "two", "two"}) {
		t.Errorf("after rewind -- bad\\xff: contents %q, want only bad\\xff back", got)
	}
	// The session_rewind records the path by its bytes; log --json shows them.
	if j := zerofsOK(t, ws, "log", "--json", "-n", "1"); !strings.Contains(j, `"pathsBytes": [`) || !strings.Contains(j, `"cHViL2JhZP8="`) {
		t.Errorf("log --json of the path rewind lacks pathsBytes:\n%s", j)
	}

	// .zero/rewind with pathsBytes, as another client would write it.
	req := fmt.Sprintf(`{"target": %d, "paths": ["pub/bad\ufffd"], "pathsBytes": ["cHViL2JhZP4="]}`, s1)
	if err := os.WriteFile(filepath.Join(ws, ".zero", "rewind"), []byte(req), 0o600); err != nil {
		t.Fatalf("write .zero/rewind %s: %v", req, err)
	}
	if got := contents(); !slices.Equal(got, []string{"one", "one", "two"}) {
		t.Errorf("after .zero/rewind with pathsBytes for bad\\xfe: contents %q", got)
	}
	raw := fmt.Sprintf("{\"target\": %d, \"paths\": [\"pub/bad\xff\"]}", s2)
	if err := os.WriteFile(filepath.Join(ws, ".zero", "rewind"), []byte(raw), 0o600); !errors.Is(err, syscall.EINVAL) {
		t.Errorf("a request that is not UTF-8: %v, want EINVAL", err)
	}
	if got := contents(); !slices.Equal(got, []string{"one", "one", "two"}) {
		t.Errorf("a refused request changed: contents %q", got)
	}

	// diff and show of one such path find that file alone.
	diff := zerofsOK(t, ws, "diff", itoa(s1), "--", "pub/bad\xfe")
	noControls(t, "diff -- bad\\xfe", diff)
	if strings.Count(diff, "diff --git ") != 0 {
		t.Errorf("diff %d -- bad\\xfe (unchanged since): %s", s1, diff)
	}
	diff = zerofsOK(t, ws, "diff", itoa(s1), "--", "pub/bad\ufffd")
	if strings.Count(diff, "diff --git ") != 1 || !strings.Contains(diff, `diff --git "a/pub/bad\357\277\275"`) {
		t.Errorf("diff %d -- bad\\uFFFD:\n%s", s1, diff)
	}
	if got := zerofsOK(t, ws, "show", itoa(s2), "pub/bad\xff"); got != "two" {
		t.Errorf("show %d bad\\xff = %q, want two", s2, got)
	}

	// A revert whose paths changed since names them quoted, by their bytes.
	step(t, ws, "more")
	write("three")
	step(t, ws, "last")
	res, err := zerofs(t, ws, "revert", itoa(s1))
	noControls(t, "revert conflict", res)
	if exitCode(err) != 1 || !strings.Contains(res, `"pub/bad\377"`) || !strings.Contains(res, `"pub/bad\376"`) {
		t.Errorf("revert %d with later changes: %v\n%s", s1, err, res)
	}
}
