package rewind

import (
	"fmt"

	"github.com/zerofs/zerofs/record"
)

// stashAt captures p, about to be unlinked from the directory open at
// dirfd as name, by a stash linked by its name (blobstore.Store.StashAt):
// a linkat and an lstat of the stash, and its xattrs read from the stash
// (the same inode), where readStateAt would stat, open, fstat and close
// the workspace file too. ok is false, and nothing is stored, when it is
// not a regular file the store can stash (the caller captures it as
// usual). For batch mode only (StashAt).
func (e *Engine) stashAt(p string, dirfd int, name string) (fs record.FileState, ok bool, err error) {
	stash, st, ok, err := e.blobs.StashAt(dirfd, name, e.openForWrite)
	if err != nil {
		return record.FileState{}, false, fmt.Errorf("rewind: capture %q: %w", p, err)
	}
	if !ok {
		return record.FileState{}, false, nil
	}
	if e.opts.MaxBlobSize > 0 && st.Size > e.opts.MaxBlobSize {
		// Recorded as skipped, as readStateAt does.
		e.blobs.Unstash([]string{stash})
		return record.FileState{}, false, nil
	}
	fs = record.FileState{Path: p, Kind: record.KindFile, Mode: st.Mode & 0o7777, Bytes: st.Size, Kept: stash}
	setMeta(&fs, &st)
	if fs.Xattrs, err = e.stashXattrs(stash); err != nil {
		e.blobs.Unstash([]string{stash})
		return record.FileState{}, false, fmt.Errorf("rewind: capture %q: %w", p, err)
	}
	return fs, true, nil
}

// stashXattrs reads the kept xattrs of stash as fdXattrs does, through
// its path under the store's kept directory: no descriptor of its own.
func (e *Engine) stashXattrs(stash string) (map[string][]byte, error) {
	xs, err := readXattrsAt(e.blobs.StashPath(stash), false)
	return capturedXattrs(xs, err)
}

// dirXattrs reads the kept xattrs of directory name in the directory open
// at dirfd as fdXattrs does, by a path through dirfd's /proc link, never
// following name: an fstatat and a listxattr for a removed directory's
// capture, where opening it cost an openat2 from the root, an fcntl and a
// close more.
func dirXattrs(dirfd int, name string) (map[string][]byte, error) {
	return capturedXattrs(readXattrsAt(procFd(dirfd)+"/"+name, false))
}
