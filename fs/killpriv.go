package fs

import (
	"context"
	"slices"

	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"
)

// The mount asks for FUSE_HANDLE_KILLPRIV_V2 (serve): the daemon, not the
// kernel, clears a file's set-id bits when an unprivileged write, truncate
// or chown changes it. In return the kernel marks the superblock SB_NOSEC,
// so a file's inode remembers that it has no set-id bits and no
// security.capability (S_NOSEC) until its attributes are next refreshed:
// a write no longer asks GETXATTR "security.capability" first, one round
// trip per write(2) call (tar -x writes a file in 10 KiB blocks), and a
// chown no longer sends the GETATTR the kernel needs to work out the mode
// it would set itself.
//
// What reaches the daemon, and what Setattr does with it (killSetID):
//
//   - a truncate (SETATTR with a size, an open with O_TRUNC arrives as one)
//     or a chown by a caller without CAP_FSETID carries FATTR_KILL_SUIDGID;
//   - a write, fallocate or copy_file_range by such a caller to a file whose
//     mode has set-id bits (the kernel's file_remove_privs) arrives as a
//     SETATTR that sets nothing: the kernel drops the mode change it would
//     make without HANDLE_KILLPRIV and sends the rest, which is empty. Its
//     passthrough writes (FUSE passthrough never sends WRITE) reach the
//     daemon only this way. A chown(-1, -1) of a regular file arrives the
//     same way, and clears the same bits natively.
//
// The bits cleared are those the kernel clears (setattr_should_drop_suidgid):
// the set-user-ID bit, and the set-group-ID bit of a group-executable file
// or of one whose group the caller is not in (root, whose CAP_FSETID the
// kernel honours, keeps that one: a chown(-1, -1)). Directories, symlinks
// and devices keep theirs. The WRITE flag
// WRITE_KILL_SUIDGID needs nothing more: the empty SETATTR comes first,
// decided on the same cached mode as without HANDLE_KILLPRIV.

// The mount also asks for FUSE_ATOMIC_O_TRUNC (serve, not with --no-open):
// an open(2) with O_TRUNC of an existing file then carries O_TRUNC in its
// OPEN, which truncates (beginWrite), instead of a SETATTR of the size after
// it: a shell's `printf x > file` (and `printf label > .zero/step`) costs a
// round trip less. What the SETATTR carried as FATTR_KILL_SUIDGID comes as
// FUSE_OPEN_KILL_SUIDGID in the OPEN's (or a CREATE's) open flags, which
// go-fuse does not hand a node: killprivFS carries it in as openKillSetID,
// and the truncation of Open and Create (beginWrite) clears the bits as
// Setattr does. (With --no-open there is no OPEN to truncate in: the
// kernel would take the truncation as done and drop it.)

// openKillSetID is the bit killprivFS sets in the open flags a node's Open
// or Create sees when the kernel asks for the set-id bits to go with an
// O_TRUNC. No open(2) flag uses bit 31; openFlags strips it.
const openKillSetID = 1 << 31

// killprivFS hands FUSE_OPEN_KILL_SUIDGID to the nodes as openKillSetID.
type killprivFS struct {
	fuse.RawFileSystem
}

func (k *killprivFS) Open(cancel <-chan struct{}, in *fuse.OpenIn, out *fuse.OpenOut) fuse.Status {
	if in.Mode&fuse.OPEN_KILL_SUIDGID != 0 { // OpenIn.Mode holds the open flags
		in.Flags |= openKillSetID
	}
	return k.RawFileSystem.Open(cancel, in, out)
}

func (k *killprivFS) Create(cancel <-chan struct{}, in *fuse.CreateIn, name string, out *fuse.CreateOut) fuse.Status {
	if in.OpenFlags&fuse.OPEN_KILL_SUIDGID != 0 {
		in.Flags |= openKillSetID
	}
	return k.RawFileSystem.Create(cancel, in, name, out)
}

// killRequested reports whether a SETATTR asks the daemon to clear the
// file's set-id bits.
func killRequested(in *fuse.SetAttrIn) bool {
	if in.Valid&fuse.FATTR_KILL_SUIDGID != 0 {
		return true
	}
	return in.Valid&^(fuse.FATTR_FH|fuse.FATTR_LOCKOWNER) == 0
}

// killSetID clears the set-id bits a write or chown by the caller of ctx
// clears from the regular file open at fd (reached as proc, its procPath).
func killSetID(ctx context.Context, fd int, proc string) error {
	var st unix.Statx_t
	if err := statx(fd, "", &st); err != nil {
		return err
	}
	mode := uint32(st.Mode)
	if mode&unix.S_IFMT != unix.S_IFREG {
		return nil
	}
	kill := mode & unix.S_ISUID
	if mode&unix.S_ISGID != 0 && (mode&unix.S_IXGRP != 0 || !inGroupOrRoot(ctx, st.Gid)) {
		kill |= unix.S_ISGID
	}
	if kill == 0 {
		return nil
	}
	return unix.Fchmodat(unix.AT_FDCWD, proc, (mode&0o7777)&^kill, 0)
}

// inGroupOrRoot reports whether the caller of ctx is root or in group gid
// (its own group or a supplementary one, read from /proc). A caller that
// cannot be told is in no group.
func inGroupOrRoot(ctx context.Context, gid uint32) bool {
	c, ok := fuse.FromContext(ctx)
	if !ok {
		return false
	}
	return c.Uid == 0 || c.Gid == gid || slices.Contains(callerGroups(c.Pid), gid)
}
