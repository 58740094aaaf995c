package control

import (
	"bytes"
	"fmt"
	"strconv"
)

// A daemon's identity is its pid and its start time (internal/proc): the
// status report (StatusReport.PID, StatusReport.Start) and the store's daemon.pid
// carry both.

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
