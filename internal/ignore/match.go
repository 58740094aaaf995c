package ignore

import (
	"strings"
)

// Matcher is an ordered list of patterns; the last one that matches a
// path decides.
type Matcher struct {
	pats []pattern
}

// pattern is one parsed line.
type pattern struct {
	text    string // as written, for people (Patterns)
	glob    string // what is matched: without !, the trailing / and a leading /
	negate  bool   // began with !
	dirOnly bool   // ended with /
	base    bool   // had no / (besides a trailing one): matches a name at any depth
	literal bool   // glob holds no special character: compared as a string
	invalid bool   // ends in an unescaped backslash: matches nothing, as in git
}

// Parse reads gitignore text: one pattern a line.
func Parse(data []byte) *Matcher {
	m := &Matcher{}
	m.add(strings.Split(string(data), "\n"))
	return m
}

// New builds a Matcher from patterns, one per element, each with the
// syntax of a line.
func New(lines ...string) *Matcher {
	m := &Matcher{}
	m.add(lines)
	return m
}

// Join is a Matcher with a's patterns then b's (b's decide where both
// match). Either may be nil.
func Join(a, b *Matcher) *Matcher {
	m := &Matcher{}
	if a != nil {
		m.pats = append(m.pats, a.pats...)
	}
	if b != nil {
		m.pats = append(m.pats, b.pats...)
	}
	return m
}

func (m *Matcher) add(lines []string) {
	for _, line := range lines {
		line = strings.TrimSuffix(line, "\r")
		if p, ok := parseLine(line); ok {
			m.pats = append(m.pats, p)
		}
	}
}

// parseLine parses one line; ok is false for a blank line or a comment.
func parseLine(line string) (p pattern, ok bool) {
	line = trimTrailingSpaces(line)
	if line == "" || line[0] == '#' {
		return p, false
	}
	p.text = line
	if line[0] == '!' {
		p.negate = true
		line = line[1:]
	}
	if strings.HasSuffix(line, "/") {
		p.dirOnly = true
		line = line[:len(line)-1]
	}
	if line == "" {
		// "/" or "!/": git keeps such a line and it matches nothing.
		p.invalid = true
		return p, true
	}
	p.base = !strings.Contains(line, "/")
	line = strings.TrimPrefix(line, "/")
	p.glob = line
	p.literal = !strings.ContainsAny(line, `*?[\`)
	p.invalid = endsInEscape(line)
	return p, true
}

// trimTrailingSpaces drops trailing spaces not escaped by a backslash.
func trimTrailingSpaces(s string) string {
	end := len(s)
	for end > 0 && s[end-1] == ' ' {
		// An odd run of backslashes before the space escapes it.
		bs := 0
		for i := end - 2; i >= 0 && s[i] == '\\'; i-- {
			bs++
		}
		if bs%2 == 1 {
			break
		}
		end--
	}
	return s[:end]
}

// endsInEscape reports whether s ends in a backslash that escapes nothing.
func endsInEscape(s string) bool {
	bs := 0
	for i := len(s) - 1; i >= 0 && s[i] == '\\'; i-- {
		bs++
	}
	return bs%2 == 1
}

// Len is the number of patterns (blank lines and comments not counted).
func (m *Matcher) Len() int {
	if m == nil {
		return 0
	}
	return len(m.pats)
}

// Patterns are the patterns as written, in order.
func (m *Matcher) Patterns() []string {
	if m == nil {
		return nil
	}
	out := make([]string, len(m.pats))
	for i, p := range m.pats {
		out[i] = p.text
	}
	return out
}

// Match reports whether path (workspace-relative, clean, / separated) is
// ignored; isDir says whether it is a directory. A path beneath an ignored
// directory is ignored whatever its own patterns say. The root ("") is
// never ignored.
func (m *Matcher) Match(path string, isDir bool) bool {
	if m == nil || len(m.pats) == 0 || path == "" {
		return false
	}
	for i := 0; i < len(path); i++ {
		if path[i] == '/' && m.decide(path[:i], true) {
			return true
		}
	}
	return m.decide(path, isDir)
}

// MatchDir reports whether directory path itself is ignored, its
// ancestors aside: for walking a tree top-down, where the ancestors were
// asked first.
func (m *Matcher) MatchDir(path string) bool {
	if m == nil || path == "" {
		return false
	}
	return m.decide(path, true)
}

// decide is the verdict of the last pattern that matches path itself.
func (m *Matcher) decide(path string, isDir bool) bool {
	name := path
	if i := strings.LastIndexByte(path, '/'); i >= 0 {
		name = path[i+1:]
	}
	for i := len(m.pats) - 1; i >= 0; i-- {
		p := &m.pats[i]
		if p.invalid || (p.dirOnly && !isDir) {
			continue
		}
		subject := path
		if p.base {
			subject = name
		}
		var hit bool
		if p.literal {
			hit = subject == p.glob
		} else {
			hit = wildmatch(p.glob, subject) == matched
		}
		if hit {
			return !p.negate
		}
	}
	return false
}
