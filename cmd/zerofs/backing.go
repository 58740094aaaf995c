package main

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// inBacking reports whether this process's working directory is a
// directory a mount now hides: after `cd ws && zerofs mount .` the shell
// still stands in the backing directory, and whatever it changes there
// bypasses zerofs and is never recorded. Its path leads into the mount,
// but "." is still the directory underneath: they are different files.
// Only the process's own working directory can be checked (not a -C DIR).
func inBacking(e *env) bool {
	wd, err := os.Getwd()
	if err != nil || wd != e.cwd {
		return false
	}
	var dot, byPath unix.Stat_t
	if unix.Stat(".", &dot) != nil || unix.Stat(e.cwd, &byPath) != nil {
		return false
	}
	return dot.Dev != byPath.Dev || dot.Ino != byPath.Ino
}

// warnBacking tells the user, on stderr, when their shell stands in the
// directory under the mount, and how to enter the mount.
func warnBacking(e *env) {
	if inBacking(e) {
		fmt.Fprintf(e.stderr, "zerofs: warning: this shell's working directory is the directory under the mount, not the mount: nothing changed from here is recorded; enter the mount with: cd \"$PWD\"\n")
	}
}
