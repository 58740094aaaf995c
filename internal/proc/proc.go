// Package proc tells a process from a later one with its pid: a process's
// identity is its pid and its start time (clock ticks since boot, field 22
// of /proc/PID/stat). A pid alone can name a killed daemon's successor, or
// an unrelated process that got its number. The status report and the
// store's daemon.pid carry both (control.FormatPIDFile), and a client acts
// on (and signals) a pid only while the process with that pid started at
// that time.
//
// It reads /proc/PID/stat and nothing else; it holds no state.
package proc

import (
	"bytes"
	"os"
	"strconv"
)

// Start is the start time of process pid, and whether it runs (a zombie
// does not: it has exited, only its parent has not reaped it).
func Start(pid int) (start uint64, running bool) {
	if pid <= 0 {
		return 0, false
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, false
	}
	return parseStat(b)
}

// parseStat reads the state and the start time from a /proc/PID/stat line.
func parseStat(b []byte) (start uint64, running bool) {
	// The command name, in parentheses, may itself hold ") ".
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, false
	}
	f := bytes.Fields(b[i+1:])
	// f[0] is the state (field 3); the start time is field 22.
	if len(f) < 20 {
		return 0, false
	}
	if s := f[0]; len(s) == 1 && (s[0] == 'Z' || s[0] == 'X') {
		return 0, false
	}
	start, err := strconv.ParseUint(string(f[19]), 10, 64)
	if err != nil {
		return 0, false
	}
	return start, true
}

// SelfStart is this process's start time.
func SelfStart() uint64 {
	s, _ := Start(os.Getpid())
	return s
}

// Same reports whether process pid runs and is the one that started at
// start. A start of 0 (a daemon from before start times were recorded)
// matches any running process with that pid.
func Same(pid int, start uint64) bool {
	s, ok := Start(pid)
	return ok && (start == 0 || s == start)
}
