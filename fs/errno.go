package fs

import (
	"context"
	"errors"
	iofs "io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"syscall"

	"github.com/zerofs/zerofs/blobstore"
	"github.com/zerofs/zerofs/eventlog"
	"github.com/zerofs/zerofs/record"
	"github.com/zerofs/zerofs/rewind"
)

// This file is the only place where errors become errnos (STYLE rule 6).
// go-fuse's ToErrno does not unwrap %w chains, so it is never used.

// seqMeaning says what ErrNoSuchSeq means where the error happened: a bad
// argument to a control file (EINVAL) or a view that does not exist (ENOENT).
type seqMeaning int

const (
	seqInvalid  seqMeaning = iota // .zero/rewind, .zero/gc: EINVAL
	seqNotFound                   // @T lookups: ENOENT
)

// engineErrno maps an error from the engine (or the store under it). op and
// path name the request in the one log line written for unexpected errors.
func engineErrno(log *slog.Logger, op, path string, err error, seq seqMeaning) syscall.Errno {
	if err == nil {
		return 0
	}
	// Our sentinels first.
	switch {
	case errors.Is(err, record.ErrNoSuchSeq):
		if seq == seqNotFound {
			return syscall.ENOENT
		}
		return syscall.EINVAL
	case errors.Is(err, record.ErrReserved):
		return syscall.EPERM
	case errors.Is(err, record.ErrUnsafePath), errors.Is(err, record.ErrBadRequest), errors.Is(err, record.ErrNotFork):
		return syscall.EINVAL
	case errors.Is(err, record.ErrConflict):
		return syscall.EBUSY
	case errors.Is(err, record.ErrNothingToUndo), errors.Is(err, record.ErrNothingToRedo), errors.Is(err, record.ErrNoTurn),
		errors.Is(err, record.ErrNoSuchPath), errors.Is(err, rewind.ErrNoStepForResult):
		return syscall.ENOENT
	case errors.Is(err, rewind.ErrSkipped):
		log.Warn("zerofs: state was not kept", "op", op, "path", path, "err", err)
		return syscall.EIO
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return syscall.EINTR
	}
	// A full disk or quota is the caller's to see, unchanged.
	switch {
	case errors.Is(err, syscall.ENOSPC):
		return syscall.ENOSPC
	case errors.Is(err, syscall.EDQUOT):
		return syscall.EDQUOT
	}
	// A rewind that could not change the workspace (and was rolled back):
	// the backing errno (EBUSY for a mount point in the way).
	if errors.Is(err, record.ErrWorkspace) {
		var en syscall.Errno
		if errors.As(err, &en) {
			return en
		}
		return syscall.EIO
	}
	// Damage, a closed store, or any other failure of the store: EIO,
	// whatever errno may be inside. (An EACCES creating a blob's temporary
	// file is no answer to the caller's write(2): nothing about its own
	// file was refused.)
	if errors.Is(err, record.ErrCorrupt) || errors.Is(err, eventlog.ErrClosed) || errors.Is(err, eventlog.ErrFailed) ||
		errors.Is(err, blobstore.ErrCorrupt) || errors.Is(err, blobstore.ErrNotFound) || storeFile(err) {
		log.Error("zerofs: store failure", "op", op, "path", path, "err", err)
		return syscall.EIO
	}
	var errno syscall.Errno
	if errors.As(err, &errno) && errno != 0 {
		return errno
	}
	log.Error("zerofs: unexpected error", "op", op, "path", path, "err", err)
	return syscall.EIO
}

// storeFile reports whether err is about a file of the store. The engine
// names the workspace's files by their path relative to the root (it
// reaches them through the root's descriptor, never by an absolute path),
// while every store file is named by its absolute path under the store
// directory: a path error naming an absolute path is the store's.
func storeFile(err error) bool {
	var pe *iofs.PathError
	if errors.As(err, &pe) {
		return filepath.IsAbs(pe.Path)
	}
	var le *os.LinkError
	if errors.As(err, &le) {
		return filepath.IsAbs(le.Old) || filepath.IsAbs(le.New)
	}
	return false
}

// sysErrno maps an error from a syscall on the backing filesystem: x/sys
// returns bare Errnos; anything else is unexpected.
func sysErrno(err error) syscall.Errno {
	if err == nil {
		return 0
	}
	var errno syscall.Errno
	if errors.As(err, &errno) {
		return errno
	}
	return syscall.EIO
}
