package daemon

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/moby/sys/mountinfo"
	"golang.org/x/sys/unix"

	"github.com/zerofs/zerofs/internal/proc"
	"github.com/zerofs/zerofs/internal/quote"
)

// Holder is a process that keeps a mount busy, as `fuser -m` names it:
// its working or root directory, its executable, a file it holds open or
// has mapped is in the mount (or in a mount beneath it).
type Holder struct {
	PID   int
	Start uint64 // its start time (proc.Same): tells it from a later process with its pid
	// Comm is its command name as /proc says it: the process chose it, so
	// it is quoted wherever it is printed.
	Comm string
	// Uses is what of it is in the mount, at most maxUses of them; More
	// counts the rest.
	Uses []Use
	More int
}

// Use is one thing of a holder's in the mount.
type Use struct {
	What string // "working directory", "root directory", "executable", "open file", "mapped file"
	Path string // where, as /proc names it (a name the process chose: quoted when printed)
}

// maxUses bounds the uses a Holder lists.
const maxUses = 3

// String is the holder for a person: `pid 4242 (sleep: working directory
// /ws/sub)`, every name quoted as quote.Name does.
func (h Holder) String() string {
	var uses []string
	for _, u := range h.Uses {
		uses = append(uses, u.What+" "+quote.Name(u.Path))
	}
	s := strings.Join(uses, ", ")
	if h.More > 0 {
		s += fmt.Sprintf(" and %d more", h.More)
	}
	return fmt.Sprintf("pid %d (%s: %s)", h.PID, quote.Name(h.Comm), s)
}

// Running reports whether the holder is still the process it was.
func (h Holder) Running() bool { return proc.Same(h.PID, h.Start) }

// BusyError is Unmount's refusal of a mount that processes hold (without
// Lazy): nothing was changed.
type BusyError struct {
	Mountpoint string
	Holders    []Holder
}

// maxHoldersNamed bounds how many holders an error names.
const maxHoldersNamed = 5

func (e *BusyError) Error() string {
	return fmt.Sprintf("%s is busy: %s", quote.Name(e.Mountpoint), HoldersText(e.Holders))
}

// HoldersText names holders in one line, the first few in full.
func HoldersText(hs []Holder) string {
	var names []string
	for i, h := range hs {
		if i == maxHoldersNamed {
			names = append(names, fmt.Sprintf("and %d more processes", len(hs)-i))
			break
		}
		names = append(names, h.String())
	}
	return strings.Join(names, ", ")
}

// busyGrace is how long a mount's holders are looked for again before the
// mount counts as busy: a process killed a moment ago lets go of its
// files only as it finishes exiting.
var busyGrace = time.Second

// holdersOf lists the processes holding the mount entry or any mount
// beneath it, looking again for up to busyGrace while there are any.
func holdersOf(entry mountEntry) ([]Holder, error) {
	deadline := time.Now().Add(busyGrace)
	for {
		hs, err := findHolders(entry.id)
		if err != nil || len(hs) == 0 || time.Now().After(deadline) {
			return hs, err
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// findHolders scans /proc for the processes holding mount id or a mount
// beneath it. Nothing of it asks any filesystem: a directory or file of
// a process is opened O_PATH through its /proc link (no lookup in the
// filesystem it is on, which may be a hung FUSE mount) and its mount read
// from /proc/self/fdinfo; open files by their fdinfo; mapped files by the
// device /proc/PID/maps names. What /proc says is the processes' own to
// choose (names, paths): it is parsed defensively and only printed
// quoted. A process this one may not inspect (another user's, unless
// root) is passed over; this process is too.
func findHolders(id int) ([]Holder, error) {
	ids, devs, err := mountTree(id)
	if err != nil {
		return nil, err
	}
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	self := os.Getpid()
	var hs []Holder
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid <= 0 || pid == self {
			continue
		}
		if h, ok := holderOf(pid, ids, devs); ok {
			hs = append(hs, h)
		}
	}
	return hs, nil
}

// mountTree is mount id and every mount beneath it, by id, and their
// devices ("major:minor" as /proc/PID/maps writes them, in hex).
func mountTree(id int) (map[int]bool, map[string]bool, error) {
	infos, err := mountinfo.GetMounts(nil)
	if err != nil {
		return nil, nil, err
	}
	ids := map[int]bool{id: true}
	for grew := true; grew; {
		grew = false
		for _, m := range infos {
			if ids[m.Parent] && !ids[m.ID] {
				ids[m.ID], grew = true, true
			}
		}
	}
	devs := map[string]bool{}
	for _, m := range infos {
		if ids[m.ID] {
			devs[fmt.Sprintf("%02x:%02x", m.Major, m.Minor)] = true
		}
	}
	return ids, devs, nil
}

// holderOf says what of process pid is in the mounts ids (devices devs).
func holderOf(pid int, ids map[int]bool, devs map[string]bool) (Holder, bool) {
	dir := "/proc/" + strconv.Itoa(pid)
	start, ok := proc.Start(pid)
	if !ok {
		return Holder{}, false
	}
	h := Holder{PID: pid, Start: start}
	add := func(what, path string) {
		if len(h.Uses) < maxUses {
			h.Uses = append(h.Uses, Use{What: what, Path: path})
		} else {
			h.More++
		}
	}
	for _, l := range []struct{ link, what string }{{"cwd", "working directory"}, {"root", "root directory"}, {"exe", "executable"}} {
		if in, path := linkIn(dir+"/"+l.link, ids); in {
			add(l.what, path)
		}
	}
	if fds, err := os.ReadDir(dir + "/fd"); err == nil {
		for _, fd := range fds {
			if _, err := strconv.Atoi(fd.Name()); err != nil {
				continue
			}
			b, err := readSmall(dir + "/fdinfo/" + fd.Name())
			if err != nil {
				continue
			}
			if mnt, ok := fdinfoMount(b); ok && ids[mnt] {
				path, _ := os.Readlink(dir + "/fd/" + fd.Name())
				add("open file", path)
			}
		}
	}
	for _, path := range mappedIn(dir+"/maps", devs) {
		add("mapped file", path)
	}
	if len(h.Uses) == 0 {
		return Holder{}, false
	}
	comm, _ := readSmall(dir + "/comm")
	h.Comm = strings.TrimSuffix(string(comm), "\n")
	return h, true
}

// linkIn reports whether /proc link (a process's cwd, root or exe) leads
// into the mounts ids, and where it leads. The O_PATH open of a /proc link
// asks no filesystem.
func linkIn(link string, ids map[int]bool) (bool, string) {
	fd, err := unix.Open(link, unix.O_PATH|unix.O_CLOEXEC, 0)
	if err != nil {
		return false, ""
	}
	defer unix.Close(fd)
	b, err := readSmall("/proc/self/fdinfo/" + strconv.Itoa(fd))
	if err != nil {
		return false, ""
	}
	mnt, ok := fdinfoMount(b)
	if !ok || !ids[mnt] {
		return false, ""
	}
	path, _ := os.Readlink(link)
	return true, path
}

// fdinfoMount reads the mnt_id line of an fdinfo file.
func fdinfoMount(b []byte) (int, bool) {
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "mnt_id:"); ok {
			id, err := strconv.Atoi(strings.TrimSpace(v))
			return id, err == nil
		}
	}
	return 0, false
}

// mappedIn lists the files of a /proc/PID/maps on the devices devs, each
// once. A line is "start-end perms offset dev inode path"; the path, the
// rest of the line, is the process's to choose.
func mappedIn(maps string, devs map[string]bool) []string {
	f, err := os.Open(maps)
	if err != nil {
		return nil
	}
	defer f.Close()
	seen := map[string]bool{}
	var out []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		var fields []string
		for range 5 {
			line = strings.TrimLeft(line, " ")
			f, rest, ok := strings.Cut(line, " ")
			if !ok {
				break
			}
			fields, line = append(fields, f), rest
		}
		path := strings.TrimLeft(line, " ")
		if len(fields) < 5 || path == "" || !devs[fields[3]] {
			continue
		}
		if !seen[path] {
			seen[path] = true
			out = append(out, path)
		}
	}
	return out
}

// readSmall reads a /proc file of a few lines.
func readSmall(p string) ([]byte, error) {
	f, err := os.Open(p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(io.LimitReader(f, 4096))
}
