package blobstore

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"

	"golang.org/x/sys/unix"
)

// How a batch-mode Sync makes a window's kept files durable (syncKept). A
// syncfs writes every dirty page of the filesystem, the workspace's too:
// after a git commit of 12k objects, the removals that follow wait for all
// of them. An fdatasync of each file writes only that file, but costs a
// flush of the disk each (merged when several run at once). So a window
// of syncfsFrom files or more (syncfsRingFrom where they go through
// io_uring: syncring.go) is synced with one syncfs only while the
// system's dirty data is not much more than the files' own (a tree written
// and removed at once); otherwise each file is synced alone, through the
// ring or syncEach at a time (docs/performance.md, Code written for speed).
const (
	// syncfsOver and syncfsSlack: syncfs while dirty <= syncfsOver x the
	// files' bytes + syncfsSlack.
	syncfsOver  = 2
	syncfsSlack = 16 << 20
	// syncEach is how many fdatasyncs run at once.
	syncEach = 8
)

// dirtyBytes is the seam (STYLE rule 16) that says how many bytes of the
// page cache wait to be written (Dirty and Writeback in /proc/meminfo);
// ok is false when it cannot tell.
var dirtyBytes = func() (n int64, ok bool) {
	b, err := readMeminfo()
	if err != nil {
		return 0, false
	}
	found := 0
	for line := range bytes.Lines(b) {
		for _, key := range []string{"Dirty:", "Writeback:"} {
			rest, is := bytes.CutPrefix(line, []byte(key))
			if !is {
				continue
			}
			f := bytes.Fields(rest)
			if len(f) != 2 || string(f[1]) != "kB" {
				return 0, false
			}
			kb, err := strconv.ParseInt(string(f[0]), 10, 64)
			if err != nil {
				return 0, false
			}
			n += kb << 10
			found++
		}
	}
	return n, found == 2
}

// meminfo is /proc/meminfo, opened once: a pread at offset 0 reads it
// afresh, one system call a window where os.ReadFile makes six.
var meminfo struct {
	once sync.Once
	fd   int
	err  error
}

// readMeminfo returns the contents of /proc/meminfo.
func readMeminfo() ([]byte, error) {
	meminfo.once.Do(func() {
		meminfo.fd, meminfo.err = unix.Open("/proc/meminfo", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	})
	if meminfo.err != nil {
		return os.ReadFile("/proc/meminfo")
	}
	b := make([]byte, 16<<10)
	n, err := unix.Pread(meminfo.fd, b, 0)
	if err != nil || n == len(b) {
		return os.ReadFile("/proc/meminfo") // longer than b: the slow way
	}
	return b[:n], nil
}

// wholeFS reports whether the kept files pending (names in kept/, open at
// dir) are best made durable with one syncfs.
func (s *Store) wholeFS(dir *os.File, pending []string) bool {
	if len(pending) < syncfsFrom || len(pending) < syncfsRingFrom && s.syncRingUp() {
		return false
	}
	dirty, ok := dirtyBytes()
	if !ok {
		return true
	}
	var own int64
	var ids []string
	s.kmu.Lock()
	for _, name := range pending {
		if ki := s.kept.stash[name]; ki != nil {
			own += ki.stashBytes
		} else {
			ids = append(ids, name)
		}
	}
	s.kmu.Unlock()
	for _, name := range ids {
		var st unix.Stat_t
		if unix.Fstatat(int(dir.Fd()), name, &st, unix.AT_SYMLINK_NOFOLLOW) == nil {
			own += st.Size
		}
	}
	return dirty <= syncfsOver*own+syncfsSlack
}

// syncEachFile fdatasyncs each of the kept files pending (names in kept/,
// open at dir), syncEach at a time; a name no longer there was detached and
// removed, pruned, or is a stash named since.
func (s *Store) syncEachFile(dir *os.File, pending []string) error {
	one := func(name string) error {
		// unix.Openat and NewFile, not os.Open: os.Open tries the poller
		// (four fcntls and an epoll_ctl a file) first.
		fd, err := unix.Openat(int(dir.Fd()), name, unix.O_RDONLY|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0)
		if errors.Is(err, unix.ENOENT) {
			return nil
		}
		if err == nil {
			f := os.NewFile(uintptr(fd), filepath.Join(s.dir, keptDirName, name))
			err = fdatasync(f)
			f.Close()
		}
		if err != nil {
			return fmt.Errorf("blobstore: sync kept blob %s: %w", name, err)
		}
		return nil
	}
	if len(pending) == 1 {
		return one(pending[0])
	}
	names := make(chan string)
	errs := make(chan error, syncEach)
	var wg sync.WaitGroup
	for range min(syncEach, len(pending)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var first error
			for name := range names {
				if err := one(name); err != nil && first == nil {
					first = err
				}
			}
			errs <- first
		}()
	}
	for _, name := range pending {
		names <- name
	}
	close(names)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}
