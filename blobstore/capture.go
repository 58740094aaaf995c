package blobstore

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// Strategy is how Capture stored a workspace file's before-state.
type Strategy uint8

// The strategies, in the order Capture tries them. Each is durable the same
// way, stated once here: with Options.Sync, what it stored is durable when
// Capture returns; without it (batch), it is written (safe from a crash of
// any process) and the next Sync makes it durable, and the caller must Sync
// before it syncs any log line naming it. How each is made durable:
//
//   - Stashed and Kept link the workspace file's own inode into kept/; with
//     Options.Sync, an fdatasync of the file and an fsync of kept/ before
//     Capture returns; in batch, Sync fdatasyncs each file linked since the
//     last Sync and fsyncs kept/ once (fewer than 64 files), or runs one
//     syncfs of the store's filesystem (more), and a file of 1 MiB or more
//     has its writeback started at once.
//   - SparseCopied and Cloned write a file of the store's own into kept/ (a
//     copy of the data extents; a reflink): made durable like a kept file.
//   - Packed appends records to a pack: with Options.Sync, the pack is
//     fdatasynced (and a new pack's entry synced) before Capture returns;
//     in batch, Sync fdatasyncs each pack written to once.
//
// A stash (Stashed, SparseCopied) is no blob yet: the caller records it by
// its name and names it later (Name), then removes the stash (Unstash).
const (
	// Stashed: a file about to lose its last name (an unlink), linked
	// unread under a new stash name (Stash).
	Stashed Strategy = iota + 1
	// Kept: a file about to lose its last name, hashed and linked as the
	// blob of its sha256 (Keep).
	Kept
	// SparseCopied: a large file about to be written, mostly holes, copied
	// by its data extents into a stash (StashCopy).
	SparseCopied
	// Cloned: a file over Options.ChunkAbove reflinked into the store
	// (Clone), where the filesystem can.
	Cloned
	// Packed: the content read and stored in packs (Put), which always
	// works.
	Packed
)

func (s Strategy) String() string {
	switch s {
	case Stashed:
		return "stash"
	case Kept:
		return "keep"
	case SparseCopied:
		return "sparse copy"
	case Cloned:
		return "reflink"
	case Packed:
		return "pack"
	}
	return fmt.Sprintf("strategy(%d)", uint8(s))
}

// CaptureOptions say which strategies a capture may use.
type CaptureOptions struct {
	// Removed: the file is about to lose its name (an unlink, a rename's
	// victim) and has no other link, so it may be kept (or stashed).
	Removed bool
	// Stash: the file may be stashed rather than kept (an unlink's
	// capture: the caller names the stash later). Only with Removed.
	Stash bool
	// Sparse: the file may be stash-copied if large and mostly holes (a
	// capture whose caller names stashes afterwards).
	Sparse bool
	// Writing reports whether a handle holds the file (device, inode) open
	// for writing: such a file is never kept or stashed.
	Writing func(dev, ino uint64) bool
	// Name names the file in errors when Capture makes its *os.File.
	Name string
}

// Captured is what Capture stored and why.
type Captured struct {
	Strategy Strategy
	// ID is the blob (Kept, Cloned, Packed); Stash is the stash's name
	// (Stashed, SparseCopied).
	ID    ID
	Stash string
	// Bytes is the file's size.
	Bytes int64
	// Passed are the strategies the options allowed that refused this
	// file, in the order tried; Why says why Strategy was taken.
	Passed []Strategy
	Why    string
}

// Capture stores the content of the regular workspace file open at fd by
// the first strategy that the options allow and that takes it: stash, keep
// (Removed), sparse copy (Sparse), reflink, pack. f is the *os.File of fd
// when the caller has one, and stays the caller's. With f nil, Capture
// owns fd: a stash in batch mode uses the bare descriptor (no *os.File, so
// none of the runtime's fcntl and epoll_ctl calls for an rm -rf's files),
// and fd is closed when Capture returns.
func (s *Store) Capture(fd int, f *os.File, o CaptureOptions) (c Captured, err error) {
	stash := o.Removed && o.Stash
	if f == nil {
		if stash && !s.opts.Sync {
			name, n, ok, err := s.StashFd(fd, o.Writing)
			if err != nil || ok {
				unix.Close(fd)
			}
			if err != nil {
				return Captured{}, err
			}
			if ok {
				return Captured{Strategy: Stashed, Stash: name, Bytes: n, Why: "an unlink's only link, stashed unread"}, nil
			}
			c.Passed = append(c.Passed, Stashed)
			stash = false // refused: kept or copied below
		}
		f = os.NewFile(uintptr(fd), o.Name)
		defer f.Close()
	}
	if stash {
		name, n, ok, err := s.Stash(f, o.Writing)
		if err != nil {
			return Captured{}, err
		}
		if ok {
			return Captured{Strategy: Stashed, Stash: name, Bytes: n, Why: "an unlink's only link, stashed unread"}, nil
		}
		c.Passed = append(c.Passed, Stashed)
	}
	if o.Removed {
		id, n, ok, err := s.Keep(f, o.Writing)
		if err != nil {
			return Captured{}, err
		}
		if ok {
			c.Strategy, c.ID, c.Bytes, c.Why = Kept, id, n, "a removed file's only link, kept"
			return c, nil
		}
		c.Passed = append(c.Passed, Kept)
	}
	// A large file mostly holes is copied by its data, not hashed: its
	// holes would be hashed as zeros on the writer's open.
	if o.Sparse {
		name, n, ok, err := s.StashCopy(f)
		if err != nil {
			return Captured{}, err
		}
		if ok {
			c.Strategy, c.Stash, c.Bytes, c.Why = SparseCopied, name, n, "large and mostly holes, copied by its data"
			return c, nil
		}
		c.Passed = append(c.Passed, SparseCopied)
	}
	// A large file (about to be written, or one that could not be kept)
	// is cloned where the filesystem has reflinks.
	if id, n, ok, err := s.Clone(f); err != nil {
		return Captured{}, err
	} else if ok {
		c.Strategy, c.ID, c.Bytes, c.Why = Cloned, id, n, "large, on a filesystem with reflinks"
		return c, nil
	}
	c.Passed = append(c.Passed, Cloned)
	id, n, err := s.Put(f)
	if err != nil {
		return Captured{}, err
	}
	c.Strategy, c.ID, c.Bytes, c.Why = Packed, id, n, "read and stored in packs"
	return c, nil
}
