package merge

import (
	"bytes"
	"math/rand/v2"
	"os/exec"
	"strings"
	"testing"

	"github.com/zerofs/zerofs/internal/testsupport"
)

// gitMerge is git's answer for the three texts: its output and whether it
// merged cleanly.
func gitMerge(t *testing.T, base, ours, theirs string) (string, bool) {
	t.Helper()
	out, clean, err := testsupport.GitMergeFile(base, ours, theirs)
	if err != nil {
		t.Fatal(err)
	}
	return out, clean
}

func needGit(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Fatal("git is needed: the line merge is checked against git merge-file")
	}
}

// TestLinesMatchesGit checks Lines against git merge-file on a table of
// cases: what merges cleanly merges to git's bytes, and what conflicts for
// git conflicts here.
func TestLinesMatchesGit(t *testing.T) {
	needGit(t)
	l := func(s ...string) string {
		if len(s) == 0 {
			return ""
		}
		return strings.Join(s, "\n") + "\n"
	}
	cases := []struct{ name, base, ours, theirs string }{
		{"disjoint edits", l("a", "b", "c", "d", "e", "f"), l("A", "b", "c", "d", "e", "f"), l("a", "b", "c", "d", "e", "F")},
		{"same line both", l("a", "b", "c"), l("a", "X", "c"), l("a", "Y", "c")},
		{"same change both", l("a", "b", "c"), l("a", "X", "c"), l("a", "X", "c")},
		{"adjacent lines", l("a", "b", "c", "d"), l("a", "B", "c", "d"), l("a", "b", "C", "d")},
		{"one line apart", l("a", "b", "c", "d", "e"), l("a", "B", "c", "d", "e"), l("a", "b", "c", "D", "e")},
		{"insert at top and bottom", l("a", "b", "c"), l("x", "a", "b", "c"), l("a", "b", "c", "y")},
		{"insert same place", l("a", "b"), l("a", "x", "b"), l("a", "y", "b")},
		{"insert same text same place", l("a", "b"), l("a", "x", "b"), l("a", "x", "b")},
		{"delete vs edit elsewhere", l("a", "b", "c", "d", "e"), l("a", "c", "d", "e"), l("a", "b", "c", "d", "E")},
		{"delete vs edit same", l("a", "b", "c"), l("a", "c"), l("a", "B", "c")},
		{"both delete same", l("a", "b", "c"), l("a", "c"), l("a", "c")},
		{"ours unchanged", l("a", "b"), l("a", "b"), l("a", "b", "c")},
		{"theirs unchanged", l("a", "b"), l("z", "a", "b"), l("a", "b")},
		{"empty base add both differ", "", l("a"), l("b")},
		{"empty base add both same", "", l("a"), l("a")},
		{"to empty vs edit", l("a", "b"), "", l("a", "B")},
		{"no final newline ours", l("a", "b", "c", "d"), "a\nb\nc\nD", l("A", "b", "c", "d")},
		{"no final newline both", "a\nb", "a\nB", "A\nb"},
		{"repeated lines insert", l("x", "x", "x", "y"), l("x", "x", "x", "x", "y"), l("x", "x", "x", "Y")},
		{"repeated lines delete", l("a", "x", "x", "b", "c", "d"), l("a", "x", "b", "c", "d"), l("a", "x", "x", "b", "c", "D")},
		{"blank line slides", l("f() {", "}", "", "g() {", "}"), l("f() {", "}", "", "h() {", "}", "", "g() {", "}"), l("f() {", "}", "", "g() {", "  x", "}")},
		{"many hunks", l("1", "2", "3", "4", "5", "6", "7", "8", "9"), l("1", "two", "3", "4", "five", "6", "7", "8", "9"), l("1", "2", "3", "4", "5", "6", "seven", "8", "nine")},
		{"crlf lines", "a\r\nb\r\nc\r\n", "A\r\nb\r\nc\r\n", "a\r\nb\r\nC\r\n"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			want, wantOK := gitMerge(t, c.base, c.ours, c.theirs)
			got, ok := Lines([]byte(c.base), []byte(c.ours), []byte(c.theirs))
			if ok != wantOK {
				t.Fatalf("merged cleanly: got %v, want %v (git's output %q)", ok, wantOK, want)
			}
			if ok && string(got) != want {
				t.Fatalf("got %q, want %q", got, want)
			}
		})
	}
}

// TestLinesBinary: a file with a NUL byte is not merged line by line (git
// merge-file refuses it too).
func TestLinesBinary(t *testing.T) {
	if _, ok := Lines([]byte("a\x00\nb\n"), []byte("A\x00\nb\n"), []byte("a\x00\nB\n")); ok {
		t.Fatal("a binary file merged line by line")
	}
}

// TestLinesRandomAgainstGit compares Lines with git merge-file on random
// edits of random files drawn from a few distinct lines (so that repeated
// lines, where a diff has choices to make, are common). Lines never
// merges what git finds a conflict, and never merges to other bytes; where
// its diff pairs repeated lines otherwise than xdiff's (which discards
// lines found on one side only before it searches), it may find a
// conflict git does not: at most 1% of these cases (1 in 2000 seen).
func TestLinesRandomAgainstGit(t *testing.T) {
	needGit(t)
	n := 500
	if testing.Short() {
		n = 50
	}
	rng := rand.New(rand.NewPCG(29, 1))
	words := []string{"a", "b", "c", "d", "e", "", "}", "x"}
	gen := func(k int) []string {
		out := make([]string, k)
		for i := range out {
			out[i] = words[rng.IntN(len(words))]
		}
		return out
	}
	edit := func(in []string) []string {
		out := append([]string(nil), in...)
		for range 1 + rng.IntN(2) {
			i := rng.IntN(len(out) + 1)
			switch rng.IntN(3) {
			case 0:
				out = append(out[:i], append(gen(1+rng.IntN(2)), out[i:]...)...)
			case 1:
				if i < len(out) {
					out = append(out[:i], out[i+1:]...)
				}
			case 2:
				if i < len(out) {
					out[i] = strings.ToUpper(out[i]) + "!"
				}
			}
		}
		return out
	}
	join := func(s []string) string {
		if len(s) == 0 {
			return ""
		}
		return strings.Join(s, "\n") + "\n"
	}
	mismatch, stricter := 0, 0
	for i := range n {
		b := gen(4 + rng.IntN(12))
		base, ours, theirs := join(b), join(edit(b)), join(edit(b))
		want, wantOK := gitMerge(t, base, ours, theirs)
		got, ok := Lines([]byte(base), []byte(ours), []byte(theirs))
		if !ok && wantOK {
			stricter++
			t.Logf("case %d: a conflict here, merged by git: base %q ours %q theirs %q", i, base, ours, theirs)
			continue
		}
		if ok != wantOK || ok && !bytes.Equal(got, []byte(want)) {
			mismatch++
			t.Errorf("case %d: base %q ours %q theirs %q: got %q (clean %v), git %q (clean %v)", i, base, ours, theirs, got, ok, want, wantOK)
		}
	}
	if mismatch > 0 || stricter*100 > n {
		t.Errorf("%d of %d merged otherwise than git, %d found a conflict git did not", mismatch, n, stricter)
	}
}
