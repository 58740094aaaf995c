package durable

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
)

// TestHook is a fault-injection seam (STYLE rule 16) for the crash tests of
// the store packages: when non-nil, it is called at named points inside these
// helpers, with the path concerned. The points:
//
//	"renamed": Commit has renamed a temporary file to its final name and has
//	not yet fsynced the directory.
//
// blobstore calls it too, at points of its own (see its doc.go), and
// rewind/internal/index at "snapshot:block", between two blocks of paths
// of an index snapshot it encodes (path: the temporary file).
//
// A crash test sets it in a child process to SIGKILL itself there. Production
// code never sets it; this package is internal, so nothing outside zerofs can.
var TestHook func(point, path string)

// dirSyncWarned makes the "directory fsync not supported" warning appear once.
var dirSyncWarned sync.Once

// SyncDir fsyncs the directory at path, so that entries created, removed or
// renamed in it are durable. Filesystems that cannot fsync a directory
// (EINVAL, ENOTSUP) are tolerated with one warning.
func SyncDir(path string) error {
	d, err := os.Open(path)
	if err != nil {
		return err
	}
	defer d.Close()
	return SyncDirFile(d)
}

// SyncDirFile is SyncDir on an open directory.
func SyncDirFile(d *os.File) error {
	if err := d.Sync(); err != nil {
		if errors.Is(err, syscall.EINVAL) || errors.Is(err, syscall.ENOTSUP) {
			dirSyncWarned.Do(func() {
				slog.Warn("durable: directory fsync not supported; entries may not survive a power loss", "dir", d.Name(), "err", err)
			})
			return nil
		}
		return fmt.Errorf("durable: fsync directory %s: %w", d.Name(), err)
	}
	return nil
}

// The one scheme for temporary file names, in the store and in the
// workspace alike: ".tmp-<name>-<16 hex digits>", where name is the final
// name the file will get, cut to tempNameMax bytes so that the whole stays
// within NAME_MAX (255). A crash can leave such a file behind; whoever
// sweeps them recognises them with IsTemp and IsTempFor.
const (
	tempPrefix  = ".tmp-"
	tempRandLen = 16
	tempNameMax = 255 - len(tempPrefix) - 1 - tempRandLen
)

// TempName returns a unique temporary file name for name: ".tmp-<name>-<rand>".
func TempName(name string) string {
	var b [tempRandLen / 2]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err) // crypto/rand never fails on Linux
	}
	if len(name) > tempNameMax {
		name = name[:tempNameMax]
	}
	return tempPrefix + name + "-" + hex.EncodeToString(b[:])
}

// IsTemp reports whether n is a name TempName returns for some name.
func IsTemp(n string) bool {
	if len(n) < len(tempPrefix)+1+tempRandLen || !strings.HasPrefix(n, tempPrefix) || n[len(n)-tempRandLen-1] != '-' {
		return false
	}
	for _, c := range n[len(n)-tempRandLen:] {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// IsTempFor reports whether n is a name TempName(name) returns.
func IsTempFor(n, name string) bool {
	if len(name) > tempNameMax {
		name = name[:tempNameMax]
	}
	return IsTemp(n) && len(n) == len(tempPrefix)+len(name)+1+tempRandLen && n[len(tempPrefix):len(tempPrefix)+len(name)] == name
}

// CreateTemp creates a new temporary file in dir for the final name, mode perm.
func CreateTemp(dir, name string, perm os.FileMode) (*os.File, error) {
	for range 10 {
		f, err := os.OpenFile(filepath.Join(dir, TempName(name)), os.O_RDWR|os.O_CREATE|os.O_EXCL, perm)
		if errors.Is(err, os.ErrExist) {
			continue
		}
		return f, err
	}
	return nil, fmt.Errorf("durable: could not create a temporary file in %s", dir)
}

// Commit makes the temporary file f durable under its final name: it fsyncs f
// (when sync is true), closes it, renames it to dir/name and fsyncs dir (when
// sync is true). f is closed in every case. An error before the rename removes
// the temporary file; an error from the directory fsync leaves the file under
// its final name, complete but with an entry that may not survive a power
// loss (the caller reports the error; a later SyncDir of dir makes it durable).
func Commit(f *os.File, dir, name string, sync bool) error {
	tmp := f.Name()
	fail := func(err error) error {
		f.Close()
		os.Remove(tmp)
		return err
	}
	if sync {
		if err := f.Sync(); err != nil {
			return fail(fmt.Errorf("durable: fsync %s: %w", tmp, err))
		}
	}
	if err := f.Close(); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("durable: close %s: %w", tmp, err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, name)); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("durable: rename into %s: %w", filepath.Join(dir, name), err)
	}
	if TestHook != nil {
		TestHook("renamed", filepath.Join(dir, name))
	}
	if sync {
		return SyncDir(dir)
	}
	return nil
}

// WriteFileAtomic replaces dir/name with data: unique temporary file, write,
// check the length, fsync, rename, fsync the directory. Readers see the old
// content or the new, never a mix.
func WriteFileAtomic(dir, name string, data []byte, perm os.FileMode) error {
	f, err := CreateTemp(dir, name, perm)
	if err != nil {
		return err
	}
	n, err := f.Write(data)
	if err == nil && n != len(data) {
		err = io.ErrShortWrite
	}
	if err != nil {
		f.Close()
		os.Remove(f.Name())
		return fmt.Errorf("durable: write %s: %w", f.Name(), err)
	}
	return Commit(f, dir, name, true)
}

// CreateExclusive creates dir/name, which must not exist, with data, and makes
// file and entry durable.
func CreateExclusive(dir, name string, data []byte, perm os.FileMode) error {
	path := filepath.Join(dir, name)
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		os.Remove(path)
		return fmt.Errorf("durable: write %s: %w", path, err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		os.Remove(path)
		return fmt.Errorf("durable: fsync %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return err
	}
	return SyncDir(dir)
}

// Sync fsyncs an open file. It exists so that store code never calls
// (*os.File).Sync directly and fsync failures are always wrapped the same way.
func Sync(f *os.File) error {
	if err := f.Sync(); err != nil {
		return fmt.Errorf("durable: fsync %s: %w", f.Name(), err)
	}
	return nil
}

// Fdatasync flushes f's data (and the metadata needed to read it back).
//
// It goes through SyscallConn rather than f.Fd(): that holds a reference on
// the descriptor for the duration of the call, so a concurrent Close cannot
// free the number for another file to reuse (an fdatasync of the wrong file
// would report success for data that is not durable), and it leaves the
// descriptor's mode alone.
func Fdatasync(f *os.File) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return fmt.Errorf("durable: fdatasync %s: %w", f.Name(), err)
	}
	var serr error
	if err := rc.Control(func(fd uintptr) {
		for {
			serr = syscall.Fdatasync(int(fd))
			if serr != syscall.EINTR {
				return
			}
		}
	}); err != nil {
		return fmt.Errorf("durable: fdatasync %s: %w", f.Name(), err)
	}
	if serr != nil {
		return fmt.Errorf("durable: fdatasync %s: %w", f.Name(), serr)
	}
	return nil
}

// SyncFS makes everything written to the filesystem holding f durable
// (syncfs(2)): every file's data and metadata, with one journal commit
// rather than one per file. Since Linux 5.8 it reports a writeback error
// of any file on that filesystem seen since f was opened, so it can fail
// for a file that is not the caller's: that errs towards refusing, never
// towards acknowledging data that is not durable.
func SyncFS(f *os.File) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return fmt.Errorf("durable: syncfs %s: %w", f.Name(), err)
	}
	var serr error
	if err := rc.Control(func(fd uintptr) {
		for {
			_, _, e := syscall.Syscall(sysSyncfs, fd, 0, 0)
			if e != syscall.EINTR {
				if e != 0 {
					serr = e
				}
				return
			}
		}
	}); err != nil {
		return fmt.Errorf("durable: syncfs %s: %w", f.Name(), err)
	}
	if serr != nil {
		return fmt.Errorf("durable: syncfs %s: %w", f.Name(), serr)
	}
	return nil
}

// Remove deletes dir/name and fsyncs dir. A missing file is not an error.
func Remove(dir, name string) error {
	if err := os.Remove(filepath.Join(dir, name)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return SyncDir(dir)
}

// StartWriteback asks the kernel to begin writing f's dirty pages now
// (sync_file_range SYNC_FILE_RANGE_WRITE), without waiting and without
// making anything durable: a later Fdatasync of f then has less to wait
// for. Errors are ignored (it is only a hint).
func StartWriteback(f *os.File) {
	rc, err := f.SyscallConn()
	if err != nil {
		return
	}
	rc.Control(func(fd uintptr) {
		syscall.Syscall6(sysSyncFileRange, fd, 0, 0, syncFileRangeWrite, 0, 0)
	})
}

// syncFileRangeWrite is SYNC_FILE_RANGE_WRITE.
const syncFileRangeWrite = 2
