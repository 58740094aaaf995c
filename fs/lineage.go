package fs

import (
	"bytes"
	"strconv"

	"golang.org/x/sys/unix"

	"github.com/zerofs/zerofs/rewind"
)

// lineageOf is thread tid's process and its ancestors, nearest first, each
// with its start time and name, read from /proc/PID/stat (the engine asks
// only when several agent sessions have a step open: rewind/session.go).
// A parent that started after its child is not its parent any more (the id
// was reused after it exited), and the walk stops there; it also stops at
// init and after maxLineage processes.
func lineageOf(tid int) []rewind.Proc {
	pid := processOf(tid).PID
	var out []rewind.Proc
	for len(out) < maxLineage && pid > 0 {
		p, ppid, ok := readStat(pid)
		if !ok || (len(out) > 0 && p.Start > out[len(out)-1].Start) {
			break
		}
		out = append(out, p)
		pid = ppid
	}
	return out
}

// maxLineage bounds a lineage (a process tree is rarely 20 deep).
const maxLineage = 64

// readStat reads process pid's name, start time and parent from
// /proc/PID/stat: "pid (comm) state ppid ... starttime(22) ...", where comm
// may hold spaces and parentheses (so the fields start after the last ')').
func readStat(pid int) (p rewind.Proc, ppid int, ok bool) {
	fd, err := unix.Open("/proc/"+strconv.Itoa(pid)+"/stat", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return p, 0, false
	}
	defer unix.Close(fd)
	var buf [1024]byte
	n, err := unix.Read(fd, buf[:])
	if err != nil || n <= 0 {
		return p, 0, false
	}
	b := buf[:n]
	open, end := bytes.IndexByte(b, '('), bytes.LastIndexByte(b, ')')
	if open < 0 || end < open {
		return p, 0, false
	}
	fields := bytes.Fields(b[end+1:]) // fields[0] is field 3 (state)
	if len(fields) < 20 {
		return p, 0, false
	}
	ppid, err1 := strconv.Atoi(string(fields[1]))
	start, err2 := strconv.ParseUint(string(fields[19]), 10, 64)
	if err1 != nil || err2 != nil {
		return p, 0, false
	}
	return rewind.Proc{PID: pid, Start: start, Comm: string(b[open+1 : end])}, ppid, true
}
