package quote

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// Name is s as it may be printed for a person: s itself when every
// character in it is harmless, else s in double quotes with C escapes
// (\n, \t, \033, \\, \", and \ooo octal for each byte of a character that
// is not shown as is).
func Name(s string) string {
	if !Needed(s) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 8)
	b.WriteByte('"')
	escape(&b, s, true)
	b.WriteByte('"')
	return b.String()
}

// Names quotes each of names and joins them with sep.
func Names(names []string, sep string) string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = Name(n)
	}
	return strings.Join(q, sep)
}

// Needed reports whether Name would quote s.
func Needed(s string) bool {
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c < 0x20 || c == 0x7f || c == '"' || c == '\\' {
				return true
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size <= 1 {
			return true
		}
		if !shown(r) {
			return true
		}
		i += size
	}
	return false
}

// shown reports whether a non-ASCII rune is printed as is: a graphic
// character or an ordinary space, never a control (C1 controls include the
// one-byte CSI, U+009B), a format character (the bidirectional overrides
// and isolates, zero-width joiners), a line or paragraph separator, a
// private-use or unassigned code point.
func shown(r rune) bool {
	if r == utf8.RuneError {
		return false // a literal U+FFFD looks like a replaced byte: show its bytes
	}
	return unicode.IsGraphic(r) && !unicode.Is(unicode.Cf, r) && !unicode.Is(unicode.Co, r)
}

// ascii writes one ASCII byte inside quotes.
func ascii(b *strings.Builder, c byte) {
	switch c {
	case '"':
		b.WriteString(`\"`)
	case '\\':
		b.WriteString(`\\`)
	case '\a':
		b.WriteString(`\a`)
	case '\b':
		b.WriteString(`\b`)
	case '\t':
		b.WriteString(`\t`)
	case '\n':
		b.WriteString(`\n`)
	case '\v':
		b.WriteString(`\v`)
	case '\f':
		b.WriteString(`\f`)
	case '\r':
		b.WriteString(`\r`)
	default:
		if c < 0x20 || c == 0x7f {
			octal(b, c)
			return
		}
		b.WriteByte(c)
	}
}

// escape writes s with every character Name would escape escaped; quotes
// and backslashes too when inQuotes.
func escape(b *strings.Builder, s string, inQuotes bool) {
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size <= 1:
			octal(b, s[i])
		case !inQuotes && (r == '"' || r == '\\'):
			b.WriteByte(byte(r))
		case r < 0x80:
			ascii(b, byte(r))
		case shown(r):
			b.WriteString(s[i : i+size])
		default:
			for j := i; j < i+size; j++ {
				octal(b, s[j])
			}
		}
		i += size
	}
}

// octal writes c as a three-digit octal escape, as git does.
func octal(b *strings.Builder, c byte) {
	b.WriteByte('\\')
	b.WriteByte('0' + c>>6)
	b.WriteByte('0' + c>>3&7)
	b.WriteByte('0' + c&7)
}

// Line is free text (an error message that may hold names from anywhere)
// made safe to print as one line: newlines become "; ", and every other
// character Name would escape is escaped in place, without the quotes.
func Line(s string) string {
	s = strings.ReplaceAll(strings.TrimSpace(s), "\n", "; ")
	if !Needed(s) {
		return s
	}
	var b strings.Builder
	escape(&b, s, false)
	return b.String()
}
