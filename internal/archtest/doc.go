// Package archtest holds tests of the module's shape: which package may
// import which (STYLE.md rules 1 and 2), and the documents' (rule 20: the
// README a front door of at most 400 lines, every relative link and anchor
// of a Markdown file resolving). It has no code of its own.
package archtest
