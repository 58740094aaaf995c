// Package blobstore keeps file contents addressed by their sha256.
//
// Layout: DIR/ab/<64 lower-case hex digits>, where "ab" is the first two hex
// digits (fan-out like git's objects, so no directory holds millions of
// entries). Blob files are 0600, directories 0700. A blob is written to a
// temporary file DIR/tmp/.tmp-blob-<rand> (its name is not known until the
// content has streamed in, hashed on the way), then renamed into place, so a
// file under a blob's name is always complete. Identical content is stored
// once: a Put that finds its blob present (of the right size, and hashed once
// per Store if this Store did not write it) drops its copy. Walk sees only
// DIR/ab/<hex> regular files; CleanTemp empties DIR/tmp/ after a crash.
//
// Durability: with Options.Sync (the default for "--sync always"), Put returns
// only after the blob file and its directory entry are fsynced. Without it
// (for "--sync batch"), Put returns once the blob is complete in the page cache
// and under its final name, and Sync makes every blob put since the last Sync
// durable; callers must Sync blobs before they sync any log line naming them.
// Either way a Put that finds its blob already present makes that copy
// durable too (a batch-mode writer may have crashed before its Sync), and a
// new fan-out directory's entry is made durable before (or with) the first
// blob in it. A blob whose fsync fails is rewritten, never fsynced again: a
// retried fsync can report success for pages the kernel dropped.
//
// Reads verify: Open returns a reader that fails with ErrCorrupt at the end if
// the content does not hash to its name, and OpenVerified hashes the whole file
// before handing out random access. Damaged content is never returned as if it
// were good.
package blobstore
