// Command zerofs mounts a directory as a time-travel workspace and inspects,
// diffs and rewinds its history (SPEC.md, "Command line").
//
// Layout: main.go dispatches (no os.Exit below main: run returns the exit
// code, so tests call it in-process); one file per command otherwise. The
// domain logic (finding the workspace, the history Source mounted or not,
// steps, changes, diffs, undo and redo, verify) is package history: a
// command parses its flags, calls the library and renders what it returns.
// mount and umount stand on package daemon (the daemon started, served,
// replaced when dead, unmounted) the same way.
//
// Adding a command: one declaration, a *command in the command's own
// file (see cli.go) with its usage line (SPEC's, where SPEC has one),
// summary, help (about, then the flags and the arguments that have help,
// then more), flags (name, short, arg, default, help, completion kind) and
// positional arguments; add it to the commands list in main.go, in SPEC's
// order. Its run parses with c.parse(args) and reads each flag by name
// (o.Bool("dry-run")). From the declaration come the parsing, `zerofs help
// CMD` and CMD --help, the bash, zsh and fish completions (completion.go), and
// docs/reference.md, which `go generate ./cmd/zerofs` rewrites from
// reference.md.tmpl (its prose); TestReferenceGenerated fails while the
// committed file differs, and TestUsageMatchesSpec holds the usage lines to
// SPEC's (testdata/spec-usage.txt).
//
// Exit codes: 0 success; 1 failure, with one "zerofs: reason" line on
// stderr; 2 bad usage, with the usage line. `zerofs run` exits with its
// command's status. `zerofs step --hook` exits 0 with a warning outside any
// workspace and never 2, which agent hooks take as "block the tool call".
//
// Durability: the CLI writes nothing itself (the daemon's pid file and
// log are package daemon's); every change to the history goes through the
// engine or the control files, which return once it is durable.
package main

//go:generate env ZEROFS_WRITE_REFERENCE=1 go test -run ^TestReferenceGenerated$ .
