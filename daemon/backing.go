package daemon

import (
	"os"

	"golang.org/x/sys/unix"
)

// InBacking reports whether this process's working directory, which it
// knows by the path cwd, is a directory a mount now hides: after `cd ws &&
// zerofs mount .` the shell still stands in the backing directory, and
// whatever it changes there bypasses zerofs and is never recorded. Its
// path leads into the mount, but "." is still the directory underneath:
// they are different files. Only the process's own working directory can
// be checked (not a -C DIR): cwd must be where it stands.
func InBacking(cwd string) bool {
	wd, err := os.Getwd()
	if err != nil || wd != cwd {
		return false
	}
	var dot, byPath unix.Stat_t
	if unix.Stat(".", &dot) != nil || unix.Stat(cwd, &byPath) != nil {
		return false
	}
	return dot.Dev != byPath.Dev || dot.Ino != byPath.Ino
}
