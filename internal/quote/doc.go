// Package quote is the one place that makes a name safe to print for a
// person: a file name (or a label, a process name, a symlink target) that
// holds a control character, a newline, a byte that is not UTF-8, or a
// character that reorders or hides text, is shown double-quoted with C
// escapes, as git's core.quotePath does. A name can then never forge,
// split or erase a line of output (a newline, an ESC sequence, a
// right-to-left override, a C1 CSI).
//
// Names that need no quoting are returned unchanged, so ordinary output
// stays as it was; a name that starts with a double quote or holds a
// backslash is quoted too, so a quoted form is never ambiguous. The
// quoting is for text only: JSON output carries the exact bytes (SPEC's
// pathBytes), never this form.
//
// It imports only the standard library.
package quote
