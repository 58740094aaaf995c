package archtest

import (
	"bufio"
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode"
)

// The README is the front door (STYLE.md rule 20): what zerofs is, the
// set-up, a short session and links; the rest lives under docs/.
const readmeMaxLines = 400

func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("no go.mod at %s: %v", root, err)
	}
	return root
}

func TestReadmeIsAFrontDoor(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(repoRoot(t), "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	if n := bytes.Count(b, []byte("\n")); n > readmeMaxLines {
		t.Errorf("README.md has %d lines, want at most %d: move sections under docs/", n, readmeMaxLines)
	}
}

// TestDocLinks resolves every relative link of every Markdown file in the
// repository: the file it names must exist, and an #anchor must name a
// heading of that file (as GitHub derives anchors from headings).
func TestDocLinks(t *testing.T) {
	root := repoRoot(t)
	docs := map[string]mdFile{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "node_modules") {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(p, ".md") {
			f, err := readMarkdown(p)
			if err != nil {
				return err
			}
			docs[p] = f
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(docs) < 2 {
		t.Fatalf("found %d Markdown files under %s", len(docs), root)
	}
	for p, f := range docs {
		rel, _ := filepath.Rel(root, p)
		for _, l := range f.links {
			target, anchor, _ := strings.Cut(l.target, "#")
			dest := p
			if target != "" {
				dest = filepath.Join(filepath.Dir(p), filepath.FromSlash(target))
				if _, err := os.Stat(dest); err != nil {
					t.Errorf("%s:%d: link %q: %v", rel, l.line, l.target, err)
					continue
				}
			}
			if anchor == "" {
				continue
			}
			d, ok := docs[dest]
			if !ok {
				t.Errorf("%s:%d: link %q: an anchor in a file that is not Markdown", rel, l.line, l.target)
				continue
			}
			if !d.anchors[anchor] {
				t.Errorf("%s:%d: link %q: no heading there has the anchor #%s", rel, l.line, l.target, anchor)
			}
		}
	}
}

type mdLink struct {
	line   int
	target string
}

type mdFile struct {
	links   []mdLink
	anchors map[string]bool
}

var (
	heading  = regexp.MustCompile(`^#{1,6} (.*)$`)
	link     = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	codeSpan = regexp.MustCompile("`[^`]*`")
	scheme   = regexp.MustCompile(`^[a-zA-Z][a-zA-Z0-9+.-]*:`)
)

// readMarkdown collects a file's relative links and its headings' anchors,
// outside fenced and indented code.
func readMarkdown(p string) (mdFile, error) {
	b, err := os.ReadFile(p)
	if err != nil {
		return mdFile{}, err
	}
	f := mdFile{anchors: map[string]bool{}}
	seen := map[string]int{}
	fenced := false
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(nil, 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if strings.HasPrefix(line, "```") {
			fenced = !fenced
			continue
		}
		if fenced || strings.HasPrefix(line, "    ") || strings.HasPrefix(line, "\t") {
			continue
		}
		if m := heading.FindStringSubmatch(line); m != nil {
			s := slug(m[1])
			if k := seen[s]; k > 0 {
				f.anchors[fmt.Sprintf("%s-%d", s, k)] = true
			} else {
				f.anchors[s] = true
			}
			seen[s]++
		}
		for _, m := range link.FindAllStringSubmatch(codeSpan.ReplaceAllString(line, ""), -1) {
			if !scheme.MatchString(m[1]) {
				f.links = append(f.links, mdLink{n, m[1]})
			}
		}
	}
	return f, sc.Err()
}

// slug is GitHub's anchor for a heading: lower case, punctuation other
// than '-' and '_' dropped, spaces turned into '-'.
func slug(h string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(h)) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}
