package e2e

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
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
