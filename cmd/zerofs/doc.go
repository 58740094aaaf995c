// Command zerofs mounts a directory as a time-travel workspace and inspects,
// diffs and rewinds its history (SPEC.md, "Command line").
//
// Layout: main.go dispatches (no os.Exit below main: run returns the exit
// code, so tests call it in-process); workspace.go finds the workspace the
// way git finds .git; history.go and engine.go give every command one
// interface to the history, mounted (control files and @T/ views, never the
// store) or not (the engine, which takes the store's lock, so a command
// never races a daemon); blocks.go and changes.go turn the event log into
// the steps `log`, `undo` and `redo` reason about. One file per command
// otherwise.
//
// Exit codes: 0 success; 1 failure, with one "zerofs: reason" line on
// stderr; 2 bad usage, with the usage line. `zerofs run` exits with its
// command's status. `zerofs step --hook` exits 0 with a warning outside any
// workspace and never 2, which agent hooks take as "block the tool call".
//
// Durability: the CLI writes nothing itself but the daemon's pid file and
// log; every change to the history goes through the engine or the control
// files, which return once it is durable.
package main
