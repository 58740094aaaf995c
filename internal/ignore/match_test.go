package ignore

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/zerofs/zerofs/internal/testsupport"
)

// gitCase is a set of patterns and the workspace they are asked about:
// paths ending in / are directories.
type gitCase struct {
	name     string
	patterns []string
	paths    []string
}

var gitCases = []gitCase{
	{"plain name at any depth", []string{"foo"},
		[]string{"foo", "a/foo", "a/b/foo/", "a/b/foo/x", "foobar", "xfoo", "a/foo.c"}},
	{"directory only", []string{"build/"},
		[]string{"build/", "build/x.o", "a/build/", "a/build/y", "build2/", "c/build"}},
	{"anchored", []string{"/top", "mid/dle"},
		[]string{"top", "a/top", "mid/dle/", "a/mid/dle", "mid/dle/x", "middle"}},
	{"anchored directory", []string{"/out/"},
		[]string{"out/", "out/a", "x/out/", "x/out/a"}},
	{"star", []string{"*.o", "lib*.a"},
		[]string{"a.o", "x/b.o", "x/y/c.o", ".o", "a.oo", "libz.a", "x/libfoo.a", "lib/z.a"}},
	{"star does not cross a slash", []string{"a/*/c", "d/*"},
		[]string{"a/b/c", "a/b/x/c", "a/c", "d/e/", "d/e/f", "x/d/e"}},
	{"double star leading", []string{"**/logs", "**/cache/tmp"},
		[]string{"logs/", "logs/a", "x/logs/", "x/y/logs/b", "cache/tmp", "x/cache/tmp", "x/cache/y/tmp"}},
	{"double star trailing", []string{"vendor/**"},
		[]string{"vendor/", "vendor/a/", "vendor/a/b", "x/vendor/a", "vendorx/a"}},
	{"double star middle", []string{"a/**/b"},
		[]string{"a/b", "a/x/b", "a/x/y/b", "a/xb", "x/a/b"}},
	{"double star not alone", []string{"x**y", "p/**q"},
		[]string{"xy", "xay", "x/y", "xa/by", "p/q", "p/aq", "p/a/q"}},
	{"question mark", []string{"?.txt", "a?c"},
		[]string{"a.txt", "ab.txt", "d/b.txt", "abc", "a/c", "a.c"}},
	{"character classes", []string{"[abc].x", "[!d-f].y", "[^g].z", "file[0-9][0-9]"},
		[]string{"a.x", "d.x", "c.x", "d.y", "g.y", "e.y", "g.z", "h.z", "file12", "file1a", "file123"}},
	{"posix classes", []string{"[[:digit:]]*", "[[:upper:][:space:]]q", "x[[:punct:]]"},
		[]string{"1abc", "abc", "Aq", " q", "aq", "x!", "x_", "xa"}},
	{"class edge cases", []string{"[]]a", "[a-]b", "[!]]c", "[\\]]d", "[[:alpha]e"},
		[]string{"]a", "aa", "-b", "ab", "xb", "xc", "]c", "]d", "[e", ":e", "ae", "pe", "xe"}},
	{"escapes", []string{"\\#hash", "\\!bang", "star\\*", "q\\?", "\\[x]"},
		[]string{"#hash", "!bang", "star*", "starx", "q?", "qx", "[x]", "x"}},
	{"comments and blanks", []string{"# not a pattern", "", "   ", "real"},
		[]string{"# not a pattern", "real", "a/real"}},
	{"trailing spaces", []string{"sp  ", "esc\\ ", "both\\  "},
		[]string{"sp", "sp  ", "esc ", "esc", "both ", "both  "}},
	{"negation", []string{"*.log", "!keep.log"},
		[]string{"a.log", "keep.log", "x/keep.log", "x/b.log"}},
	{"negation cannot reach below an ignored directory", []string{"node_modules/", "!node_modules/keep", "!node_modules/keep/**"},
		[]string{"node_modules/", "node_modules/keep", "node_modules/a/", "node_modules/a/b.js"}},
	{"negation below a starred directory", []string{"cache/*", "!cache/keep"},
		[]string{"cache/", "cache/a", "cache/keep", "cache/keep2", "cache/sub/", "cache/sub/x"}},
	{"re-ignore after negation", []string{"*.tmp", "!*.tmp", "a.tmp"},
		[]string{"a.tmp", "b.tmp", "x/a.tmp"}},
	{"negated directory only", []string{"d*", "!dir/"},
		[]string{"dir/", "dir/x", "dfile", "dother/", "dother/y"}},
	{"trailing backslash", []string{"bad\\", "good"},
		[]string{"bad", "bad\\", "good"}},
	{"slash alone", []string{"/", "!/"},
		[]string{"a", "b/", "b/c"}},
	{"odd names", []string{"*.bin", "new*line"},
		[]string{"caf\xe9.bin", "x/\xff\xfe.bin", "new\nline", "new/line", "sp ace.bin"}},
	{"dot files", []string{".*", "!.zeroignore"},
		[]string{".env", "a/.cache/", "a/.cache/x", ".zeroignore", "visible"}},
	{"everything then nothing", []string{"*", "!*/", "!*.go"},
		[]string{"a.go", "b.txt", "d/", "d/e.go", "d/f.txt"}},
	{"star directory", []string{"*/", "!src/"},
		[]string{"a/", "a/b", "src/", "src/c", "file"}},
	{"anchored double star", []string{"/**/z", "/a/**"},
		[]string{"z", "x/z", "x/y/z", "a/", "a/b", "b/a/c"}},
	{"deep", []string{"a/b/c/", "**/q/**/r"},
		[]string{"a/b/c/", "a/b/c/d", "x/a/b/c/", "q/r", "q/1/2/r", "x/q/1/r/s"}},
	{"double star alone", []string{"**", "!keep"},
		[]string{"a", "keep", "d/", "d/keep"}},
	{"double star directories only", []string{"a/**/", "!a/f"},
		[]string{"a/", "a/f", "a/d/", "a/d/g", "a/e/", "x"}},
	{"leading space and escaped backslash", []string{" lead", "back\\\\slash", "tab\t"},
		[]string{" lead", "lead", "back\\slash", "tab\t", "tabt"}},
}

// TestMatchesGit asks git check-ignore --no-index about the same patterns
// and paths, with the paths present on disk (so git knows directories),
// and compares every answer.
func TestMatchesGit(t *testing.T) {
	git, err := exec.LookPath("git")
	if err != nil {
		testsupport.Unavailable(t, "git not installed: the comparison needs it")
	}
	for _, tc := range gitCases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			run := func(stdin []byte, args ...string) ([]byte, error) {
				cmd := exec.Command(git, append([]string{"-C", dir}, args...)...)
				cmd.Stdin = bytes.NewReader(stdin)
				cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "HOME="+dir, "XDG_CONFIG_HOME="+dir)
				var stderr bytes.Buffer
				cmd.Stderr = &stderr
				out, err := cmd.Output()
				if err != nil && stderr.Len() > 0 {
					return out, errors.New(strings.TrimSpace(stderr.String()))
				}
				return out, err
			}
			if _, err := run(nil, "init", "-q"); err != nil {
				t.Fatal(err)
			}
			text := strings.Join(tc.patterns, "\n") + "\n"
			if err := os.WriteFile(filepath.Join(dir, ".git", "info", "exclude"), []byte(text), 0o644); err != nil {
				t.Fatal(err)
			}
			var stdin []byte
			for _, p := range tc.paths {
				name := strings.TrimSuffix(p, "/")
				full := filepath.Join(dir, name)
				if strings.HasSuffix(p, "/") {
					if err := os.MkdirAll(full, 0o755); err != nil {
						t.Fatal(err)
					}
				} else {
					if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
						t.Fatal(err)
					}
					if err := os.WriteFile(full, nil, 0o644); err != nil {
						t.Fatal(err)
					}
				}
				stdin = append(append(stdin, name...), 0)
			}
			out, err := run(stdin, "check-ignore", "--no-index", "--stdin", "-z")
			var exit *exec.ExitError
			if err != nil && !(errors.As(err, &exit) && exit.ExitCode() == 1) {
				t.Fatalf("git check-ignore: %v", err)
			}
			want := map[string]bool{}
			for _, p := range strings.Split(string(out), "\x00") {
				if p != "" {
					want[p] = true
				}
			}
			m := Parse([]byte(text))
			var got []string
			for _, p := range tc.paths {
				name := strings.TrimSuffix(p, "/")
				isDir := strings.HasSuffix(p, "/")
				if m.Match(name, isDir) != want[name] {
					t.Errorf("patterns %q, path %q (dir %v): got ignored=%v, want %v (git)", tc.patterns, name, isDir, !want[name], want[name])
				}
				if want[name] {
					got = append(got, name)
				}
			}
			if len(got) == 0 || len(got) == len(tc.paths) {
				sort.Strings(got)
				t.Logf("git ignores %d of %d paths: %q", len(got), len(tc.paths), got)
			}
		})
	}
}

func TestPatternsAndLen(t *testing.T) {
	m := Parse([]byte("# c\n\nnode_modules/\n!keep\r\n  \n*.o  \n"))
	if got, want := strings.Join(m.Patterns(), ","), "node_modules/,!keep,*.o"; got != want {
		t.Errorf("Patterns: got %q, want %q", got, want)
	}
	if m.Len() != 3 {
		t.Errorf("Len: got %d, want 3", m.Len())
	}
	var none *Matcher
	if none.Match("a", false) || none.Len() != 0 {
		t.Error("a nil Matcher ignores nothing")
	}
	if New("*").Match("", true) {
		t.Error("the root is never ignored")
	}
	j := Join(New("*.o"), New("!a.o"))
	if j.Match("a.o", false) || !j.Match("b.o", false) {
		t.Error("Join: the second list's patterns decide where both match")
	}
}

func BenchmarkMatch(b *testing.B) {
	m := Parse([]byte("node_modules/\ndist/\n*.log\n!important.log\n/coverage\n**/.cache/**\nbuild/\n*.o\n"))
	paths := []string{"src/app/components/button.tsx", "node_modules/react/cjs/react.development.js", "docs/a.md"}
	for b.Loop() {
		for _, p := range paths {
			m.Match(p, false)
		}
	}
}
