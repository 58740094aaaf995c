// Package ignore matches workspace paths against gitignore patterns: the
// rules of a .zeroignore file (and of --ignore on mount) that say which
// paths zerofs leaves out of history.
//
// The syntax and the result are git's (gitignore(5)), checked against
// `git check-ignore --no-index` for the same patterns (match_test.go):
// blank lines and lines beginning with # are skipped; trailing spaces are
// dropped unless escaped; ! negates; a / at the start or in the middle
// anchors a pattern to the root, else it matches a name at any depth; a
// trailing / matches directories only; * and ? never match a /; ** matches
// across directories where it stands alone between slashes (or at either
// end); [...] is a character class (ranges, ! or ^ negation, [:alpha:]
// and the other POSIX classes); a backslash escapes the next character.
// The last pattern that matches decides, and a directory that is ignored
// ignores everything beneath it: no later ! can take a path below an
// ignored directory back, exactly as git never looks inside one.
//
// Paths are workspace-relative, clean, separated by /, and compared byte
// for byte (case-sensitive, any bytes: a name need not be UTF-8). A
// Matcher is immutable once built and safe for concurrent use. It imports
// only the standard library.
package ignore
