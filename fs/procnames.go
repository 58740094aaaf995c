package fs

import (
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/zerofs/zerofs/rewind"
)

// procNames answers processOf from descriptors it keeps open, so that a
// capture costs one pread of /proc/<pid>/comm rather than reading and
// parsing /proc/<tid>/status (open, stat, read, close, and the kernel
// formatting forty lines): an rm -rf asks once per file
// (docs/performance.md, Code written for speed).
//
// Thread ids are reused, so the cache keys nothing by number alone: each
// entry holds /proc/<tid>/comm (and, for a thread other than the leader,
// /proc/<tgid>/comm) open. Such a descriptor stays bound to the task it was
// opened for: once that task is gone its reads fail with ESRCH, also after
// the id was given to another process, and the entry is resolved again.
// An exec keeps the task (a leader's) and changes its comm, which the next
// pread reads; a thread that execs becomes the leader and its old id's
// descriptor fails. A name read less than commFresh ago is answered without
// reading again. The process's descriptor is opened while the thread's
// is held and checked alive after: the thread lives, so its process did
// when its descriptor was opened.
type procNames struct {
	mu sync.Mutex
	m  map[int]*procEntry // by thread id
}

// procEntry is one cached thread.
type procEntry struct {
	tgid   int
	thread int // /proc/<tid>/comm
	proc   int // /proc/<tgid>/comm; -1 when tid is the leader (thread serves)
	// lineage is the process's lineage (lineage.go) once read: its ids and
	// start times stay true while the entry's descriptors read (a parent
	// that exits leaves its child's recorded ancestry as it was, which
	// keeps an orphan of an agent the agent's); nil until asked. checked
	// is when the descriptors last read (time.Now's monotonic clock).
	lineage []rewind.Proc
	checked time.Time
	// who is the process and comm last read, at read (time.Now's
	// monotonic clock): lookup answers with it within commFresh.
	who  rewind.Caller
	read time.Time
}

// treeFresh is how long tree trusts an entry's lineage without reading its
// descriptor again: a change by a process that already changed something
// costs no system call then. Within it, only a thread that exited and whose
// id the kernel gave out again (after every other id up to pid_max, 32768
// here, in under a treeFresh) could be taken for the one before it.
const treeFresh = 500 * time.Millisecond

// commFresh is how long lookup answers a thread's process and comm from
// its last read without a pread: an rm -rf or a tar -x asks once per file,
// a request every few hundred microseconds, so the name costs a system
// call every commFresh instead of one per file (docs/performance.md,
// System calls per entry). The price: a process that execs and changes
// something within commFresh of a change before the exec is recorded under
// its old comm (its pid and lineage stay exact: lineage is read by tree);
// and, as for treeFresh, a thread id given out again within it (after
// every other id up to pid_max) would be taken for the one before.
var commFresh = 50 * time.Millisecond

// procNamesMax bounds the cache (each entry holds one or two descriptors).
const procNamesMax = 256

var procCache = &procNames{m: map[int]*procEntry{}}

// processOf names the process (thread group) of thread tid and its comm.
// When /proc cannot say (the thread is gone), the thread id stands and
// comm is empty.
func processOf(tid int) rewind.Caller {
	return procCache.lookup(tid)
}

func (c *procNames) lookup(tid int) rewind.Caller {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e := c.m[tid]; e != nil {
		now := time.Now()
		if now.Sub(e.read) < commFresh {
			return e.who
		}
		if who, ok := e.readComm(); ok {
			e.who, e.read = who, now
			return who
		}
		e.close()
		delete(c.m, tid)
	}
	e, who := resolveProc(tid)
	if e == nil {
		return who
	}
	if len(c.m) >= procNamesMax {
		for k, old := range c.m {
			old.close()
			delete(c.m, k)
		}
	}
	e.who, e.read = who, time.Now()
	c.m[tid] = e
	return who
}

// tree is lineageOf(tid), kept in tid's entry: after the first call for a
// process, nothing (within treeFresh of the last check) or one pread (the
// entry's check) instead of a walk of /proc.
func (c *procNames) tree(tid int) []rewind.Proc {
	c.mu.Lock()
	if e := c.m[tid]; e != nil && e.lineage != nil {
		now := time.Now()
		if now.Sub(e.checked) < treeFresh {
			lin := e.lineage
			c.mu.Unlock()
			return lin
		}
		if _, ok := e.readComm(); ok {
			e.checked = now
			lin := e.lineage
			c.mu.Unlock()
			return lin
		}
	}
	c.mu.Unlock()
	lin := lineageOf(tid) // resolves tid's entry (processOf) first
	c.mu.Lock()
	if e := c.m[tid]; e != nil && len(lin) > 0 && lin[0].PID == e.tgid {
		e.lineage, e.checked = lin, time.Now()
	}
	c.mu.Unlock()
	return lin
}

// readComm gives the entry's process and its current comm; ok is false
// when its thread or process is gone.
func (e *procEntry) readComm() (rewind.Caller, bool) {
	var buf [64]byte
	n, err := unix.Pread(e.thread, buf[:], 0)
	if err != nil {
		return rewind.Caller{}, false
	}
	if e.proc >= 0 {
		if n, err = unix.Pread(e.proc, buf[:], 0); err != nil {
			return rewind.Caller{}, false
		}
	}
	return rewind.Caller{PID: e.tgid, Comm: strings.TrimSpace(string(buf[:n]))}, true
}

func (e *procEntry) close() {
	unix.Close(e.thread)
	if e.proc >= 0 {
		unix.Close(e.proc)
	}
}

// resolveProc reads thread tid's process from /proc/<tid>/status, through a
// directory descriptor that pins the thread, and opens the entry's
// descriptors. e is nil when that fails; who then says what is known.
func resolveProc(tid int) (*procEntry, rewind.Caller) {
	who := rewind.Caller{PID: tid}
	dfd, err := unix.Open("/proc/"+strconv.Itoa(tid), unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, who
	}
	defer unix.Close(dfd)
	tgid, ok := readTgid(dfd)
	if !ok {
		return nil, who
	}
	thread, err := unix.Openat(dfd, "comm", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, who
	}
	e := &procEntry{tgid: tgid, thread: thread, proc: -1}
	if tgid != tid {
		// The process's own name, not this thread's.
		if e.proc, err = unix.Open("/proc/"+strconv.Itoa(tgid)+"/comm", unix.O_RDONLY|unix.O_CLOEXEC, 0); err != nil {
			unix.Close(thread)
			return nil, who
		}
	}
	got, ok := e.readComm() // after both opens: the thread still lives
	if !ok {
		e.close()
		return nil, who
	}
	return e, got
}

// readTgid reads the Tgid line of the status file under the /proc/<tid>
// directory dfd.
func readTgid(dfd int) (int, bool) {
	fd, err := unix.Openat(dfd, "status", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return 0, false
	}
	defer unix.Close(fd)
	buf := make([]byte, 4096)
	n, err := unix.Read(fd, buf)
	if err != nil {
		return 0, false
	}
	for line := range strings.Lines(string(buf[:n])) {
		if v, ok := strings.CutPrefix(line, "Tgid:"); ok {
			tgid, err := strconv.Atoi(strings.TrimSpace(v))
			return tgid, err == nil && tgid > 0
		}
	}
	return 0, false
}
