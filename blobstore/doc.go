// Package blobstore keeps file contents addressed by their sha256.
//
// Layout: DIR/ab/<64 lower-case hex digits>, where "ab" is the first two hex
// digits (fan-out like git's objects, so no directory holds millions of
// entries). Blob files are 0600, directories 0700. A blob is written to a
// temporary file ".tmp-<hex>-<rand>" in its fan-out directory, hashed while it
// streams in, and renamed into place; identical content is stored once.
//
// Durability: with Options.Sync (the default for "--sync always"), Put returns
// only after the blob file and its directory entry are fsynced. Without it
// (for "--sync batch"), Put returns once the blob is complete in the page cache
// and under its final name, and Sync makes every blob put since the last Sync
// durable; callers must Sync blobs before they sync any log line naming them.
//
// Reads verify: Open returns a reader that fails with ErrCorrupt at the end if
// the content does not hash to its name, and OpenVerified hashes the whole file
// before handing out random access. Damaged content is never returned as if it
// were good.
package blobstore
