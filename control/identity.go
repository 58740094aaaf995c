package control

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
)

// A daemon's identity is its pid and its start time (clock ticks since
// boot, field 22 of /proc/PID/stat): a pid alone can name a killed daemon's
// successor, or an unrelated process that got its number. The status
// report and the store's daemon.pid carry both, and a client acts on (and
// signals) a pid only while the process with that pid started at that
// time.

// ProcessStart is the start time of process pid, and whether it runs (a
// zombie does not: it has exited, only its parent has not reaped it).
func ProcessStart(pid int) (start uint64, running bool) {
	if pid <= 0 {
		return 0, false
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, false
	}
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
	start, err = strconv.ParseUint(string(f[19]), 10, 64)
	if err != nil {
		return 0, false
	}
	return start, true
}

// SelfStart is this process's start time.
func SelfStart() uint64 {
	s, _ := ProcessStart(os.Getpid())
	return s
}

// SameProcess reports whether process pid runs and is the one that
// started at start. A start of 0 (a daemon from before start times were
// recorded) matches any running process with that pid.
func SameProcess(pid int, start uint64) bool {
	s, ok := ProcessStart(pid)
	return ok && (start == 0 || s == start)
}

// FormatPIDFile is daemon.pid's content: "PID START\n".
func FormatPIDFile(pid int, start uint64) []byte {
	return fmt.Appendf(nil, "%d %d\n", pid, start)
}

// ParsePIDFile reads daemon.pid: "PID START", or "PID" as older daemons
// wrote it (start 0).
func ParsePIDFile(b []byte) (pid int, start uint64, err error) {
	f := bytes.Fields(b)
	if len(f) < 1 || len(f) > 2 {
		return 0, 0, fmt.Errorf("control: bad pid file %q", b)
	}
	if pid, err = strconv.Atoi(string(f[0])); err != nil || pid <= 0 {
		return 0, 0, fmt.Errorf("control: bad pid file %q", b)
	}
	if len(f) == 2 {
		if start, err = strconv.ParseUint(string(f[1]), 10, 64); err != nil {
			return 0, 0, fmt.Errorf("control: bad pid file %q", b)
		}
	}
	return pid, start, nil
}
