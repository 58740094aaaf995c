// Package fs is zerofs's FUSE layer: it serves a workspace directory through
// go-fuse as a loopback, calls the rewind engine before every change so the
// before-state is captured first, and adds two kinds of virtual names at the
// mount root: the control directory ".zero/" and read-only views "@T/".
//
// Only this package imports go-fuse; its types never leave it. The exported
// API is Mount and the *Mount it returns.
//
// # Invariants
//
//   - The workspace is reached only through a directory descriptor opened
//     before mounting (an in-place mount covers the path), resolved by
//     internal/wsdir, the resolver the engine uses too: openat2 confined
//     beneath the root, refusing every symlink on the way, crossing mount
//     points below the root, a chunk at a time so no syscall sees a path
//     near PATH_MAX however deep the tree. The final name is handled with
//     *at calls that never follow a symlink, so no request can leave the
//     workspace.
//   - The store is reached through /proc/self/fd of a descriptor opened
//     before mounting, for the same reason: with the default store inside an
//     in-place mount, the store's path leads into the mount, where ".zero" is
//     the control directory.
//   - A request whose node's path no longer resolves, while or after a
//     rewind ran (it changed the tree behind the kernel's back), answers
//     ESTALE, not ENOENT: the kernel then looks the path up again and
//     retries the call once, so a request that waited for a rewind acts on
//     what the path is after it (rewinds in backing.go). Without a rewind
//     the errno is the backing one.
//   - Every mutating request calls Engine.Begin before its backing syscall
//     and holds what Begin returns through it (capture first, then change;
//     STYLE rule 13). If Begin fails the workspace is not touched.
//     A handle open for writing remembers the step its capture belongs to and
//     captures its file again when a write arrives in a later step.
//   - Unlink, and a rename over a file, mark the removed path's change
//     Removed, so the engine may keep its inode in the store instead of
//     copying it. Every handle open for writing (and a truncate by path)
//     is counted per inode (writeopens.go) for the engine to ask, and calls
//     Engine.Detach before the handle is handed out, so nothing writes
//     into a kept inode; O_TRUNC is applied only after that.
//   - On a mount without OPEN (Options.NoOpen, noopen.go) no request names
//     a handle: a node's first WRITE, FALLOCATE or COPY_FILE_RANGE in each
//     step captures it, every such write detaches a kept inode first, and
//     .zero is a FUSE mount of its own (ctlmount.go).
//   - Reads, opens for reading, the control files and the views capture
//     nothing.
//   - Errors become errnos only in errno.go.
//
// # Caches
//
// The kernel keeps entries, attributes, "no such name" answers (negative
// entries, negative.go) and directory listings for an hour (wsCacheTimeout),
// and file pages across opens (FOPEN_KEEP_CACHE for readers), so the one
// change behind its back, a rewind, invalidates every path it changed
// (invalidate.go). Directories are served without OPENDIR and RELEASEDIR
// where the kernel allows (opendir.go). Views never change once they exist.
//
// A change through one name of a hard-linked file also changes its other
// names: every name of it the mount knows is captured (links.go). Known
// limit: a name made outside the mount and never looked up through it.
//
// A view's path that nothing captured since T is served from the present
// file, opened as the reader through the present path, and refused when it
// changed outside the mount since T (viewaccess.go).
//
// # Locks
//
// fcntl and flock locks are the kernel's: the mount asks for no lock
// requests, so the kernel keeps them on its FUSE inodes as a local file
// system does (mount.go), and a read-only open needs no FLUSH at its close;
// nor does a writer's where the backing file's close cannot fail (flush.go).
//
// Control files are FOPEN_DIRECT_IO: their size is 0 and every read is
// generated afresh.
//
// # Durability
//
// Nothing here syncs: when a request returns, its captures are as durable as
// the engine's Options.Sync makes them; a write to .zero/rewind returns when
// the rewind is complete and durable; Unmount flushes the engine first.
package fs
