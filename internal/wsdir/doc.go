// Package wsdir resolves workspace paths: the workspace root is a
// directory descriptor, and every path below it is opened relative to that
// descriptor, confined beneath it. It is the one resolver the FUSE layer
// (fs) and the engine (rewind) both use, so a capture, a view, a rewind
// and a request served through the mount all see the same object at a path.
//
// # Invariants
//
//   - Paths are workspace paths: relative to the root, clean (no "." or ".."
//     component, no leading, trailing or doubled "/"); "" is the root. Any
//     other path is refused with ErrUnclean before a syscall sees it.
//   - Every lookup is openat2 with RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS|
//     RESOLVE_NO_MAGICLINKS: a symlink anywhere on the way fails with ELOOP
//     (the kernel resolves symlinks itself, one lookup at a time, so a
//     symlink in a path the daemon resolves can only be a race or a plant),
//     and nothing outside the root is reached.
//   - Mount points below the root (a tmpfs, a bind mount) are crossed like
//     directories: what is mounted below the workspace is part of it.
//     (RESOLVE_NO_XDEV is deliberately not used: with it, a path that exists
//     looks missing.)
//   - No syscall gets a path longer than maxChunk bytes, so a tree of any
//     depth works, far past PATH_MAX: a longer path is opened a chunk of
//     whole components at a time, each chunk beneath the directory the
//     previous one opened.
//   - EINTR, and the EAGAIN that RESOLVE_BENEATH returns when a rename or
//     mount raced the walk, are retried.
//
// The package only resolves; it never syncs or writes, and it takes no
// ownership of the root descriptor.
package wsdir
