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
// Exit codes: 0 success; 1 failure, with one "zerofs: reason" line on
// stderr; 2 bad usage, with the usage line. `zerofs run` exits with its
// command's status. `zerofs step --hook` exits 0 with a warning outside any
// workspace and never 2, which agent hooks take as "block the tool call".
//
// Durability: the CLI writes nothing itself (the daemon's pid file and
// log are package daemon's); every change to the history goes through the
// engine or the control files, which return once it is durable.
package main
