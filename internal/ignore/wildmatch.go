package ignore

// wildmatch is git's wildmatch (wildmatch.c) with WM_PATHNAME, on bytes:
// * and ? never match a /, ** matches across directories where it stands
// alone between slashes or at either end of the pattern.

const (
	matched = iota
	noMatch
	abortAll
	abortToStarStar
)

func wildmatch(pat, text string) int {
	return dowild(pat, 0, text, 0)
}

// at is s[i], or 0 past its end (the C string's terminator).
func at(s string, i int) byte {
	if i < len(s) {
		return s[i]
	}
	return 0
}

func isGlobSpecial(c byte) bool {
	return c == '*' || c == '?' || c == '[' || c == '\\'
}

func dowild(pat string, p int, text string, t int) int {
	for ; p < len(pat); t, p = t+1, p+1 {
		pc := pat[p]
		tc := at(text, t)
		if t >= len(text) && pc != '*' {
			return abortAll
		}
		switch pc {
		case '\\':
			p++
			pc = at(pat, p)
			if tc != pc {
				return noMatch
			}
		default:
			if tc != pc {
				return noMatch
			}
		case '?':
			if tc == '/' {
				return noMatch
			}
		case '*':
			var matchSlash bool
			p++
			if at(pat, p) == '*' {
				prev := p - 2
				for p++; at(pat, p) == '*'; p++ {
				}
				if (prev < 0 || pat[prev] == '/') &&
					(p >= len(pat) || pat[p] == '/' || (pat[p] == '\\' && at(pat, p+1) == '/')) {
					// "**/" may match no directory at all: try the rest
					// of the pattern here first.
					if at(pat, p) == '/' && dowild(pat, p+1, text, t) == matched {
						return matched
					}
					matchSlash = true
				} else {
					matchSlash = false // ** elsewhere is a plain *
				}
			}
			if p >= len(pat) {
				// A trailing ** matches everything, a trailing * only a
				// rest without a slash.
				if !matchSlash {
					for i := t; i < len(text); i++ {
						if text[i] == '/' {
							return noMatch
						}
					}
				}
				return matched
			} else if !matchSlash && pat[p] == '/' {
				// One * followed by a slash matches the rest of this name.
				i := t
				for i < len(text) && text[i] != '/' {
					i++
				}
				if i >= len(text) {
					return noMatch
				}
				// Both slashes are matched by the loop's step: p is on
				// the pattern's, t goes to the text's.
				t = i
				continue
			}
			for {
				if t >= len(text) {
					break
				}
				if !isGlobSpecial(pat[p]) {
					// Skip ahead to the next byte that could match the
					// literal after the star.
					want := pat[p]
					for t < len(text) && (matchSlash || text[t] != '/') {
						if text[t] == want {
							break
						}
						t++
					}
					if at(text, t) != want {
						if matchSlash {
							return abortAll
						}
						return abortToStarStar
					}
				}
				tc = at(text, t)
				if r := dowild(pat, p, text, t); r != noMatch {
					if !matchSlash || r != abortToStarStar {
						return r
					}
				} else if !matchSlash && tc == '/' {
					return abortToStarStar
				}
				t++
			}
			return abortAll
		case '[':
			p++
			pc = at(pat, p)
			if pc == '^' {
				pc = '!'
			}
			negated := pc == '!'
			if negated {
				p++
				pc = at(pat, p)
			}
			var prev byte
			hit := false
			for {
				if p >= len(pat) {
					return abortAll
				}
				if pc == '\\' {
					p++
					if p >= len(pat) {
						return abortAll
					}
					pc = pat[p]
					if tc == pc {
						hit = true
					}
				} else if pc == '-' && prev != 0 && p+1 < len(pat) && pat[p+1] != ']' {
					p++
					pc = pat[p]
					if pc == '\\' {
						p++
						if p >= len(pat) {
							return abortAll
						}
						pc = pat[p]
					}
					if tc <= pc && tc >= prev {
						hit = true
					}
					pc = 0 // the next byte starts no range
				} else if pc == '[' && at(pat, p+1) == ':' {
					s := p + 2
					p = s
					for p < len(pat) && pat[p] != ']' {
						p++
					}
					if p >= len(pat) {
						return abortAll
					}
					n := p - s - 1
					if n < 0 || pat[p-1] != ':' {
						// No ":]": a plain "[" in the set, and the ":"
						// after it dropped, as git does.
						p = s - 1
						pc = '['
						if tc == pc {
							hit = true
						}
					} else {
						ok, known := inClass(pat[s:s+n], tc)
						if !known {
							return abortAll
						}
						if ok {
							hit = true
						}
						pc = 0
					}
				} else if tc == pc {
					hit = true
				}
				prev = pc
				p++
				pc = at(pat, p)
				if pc == ']' {
					break
				}
			}
			if hit == negated || tc == '/' {
				return noMatch
			}
		}
	}
	if t < len(text) {
		return noMatch
	}
	return matched
}

// inClass reports whether c is in the POSIX class named; known is false for
// a name that is no class.
func inClass(name string, c byte) (ok, known bool) {
	upper := c >= 'A' && c <= 'Z'
	lower := c >= 'a' && c <= 'z'
	digit := c >= '0' && c <= '9'
	alpha := upper || lower
	switch name {
	case "alnum":
		return alpha || digit, true
	case "alpha":
		return alpha, true
	case "blank":
		return c == ' ' || c == '\t', true
	case "cntrl":
		return c < 0x20 || c == 0x7f, true
	case "digit":
		return digit, true
	case "graph":
		return c > 0x20 && c < 0x7f, true
	case "lower":
		return lower, true
	case "print":
		return c >= 0x20 && c < 0x7f, true
	case "punct":
		return c > 0x20 && c < 0x7f && !alpha && !digit, true
	case "space":
		return c == ' ' || (c >= '\t' && c <= '\r'), true
	case "upper":
		return upper, true
	case "xdigit":
		return digit || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'), true
	}
	return false, false
}
