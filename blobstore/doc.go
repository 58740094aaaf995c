// Package blobstore keeps file contents addressed by their sha256.
//
// Layout: DIR/packs/<16 hex>.pack are append-only pack files of records
// (pack.go has the byte format), DIR/packs/<name>.idx the index of a sealed
// pack, DIR/tmp/ temporary files. A record is a small blob's content, one
// chunk of a large one, or a large blob's chunk list; each carries its
// sha256, lengths and CRCs. Content of at most Options.ChunkAbove bytes
// (1 MiB) is one record; larger content is cut into content-defined chunks
// (restic's chunker, 256 KiB to 4 MiB, 512 KiB on average, with a fixed
// polynomial), each stored once by its own sha256, so a large file with a
// few blocks changed stores only the chunks around the change again. A
// blob's ID stays the sha256 of its whole content. Records are compressed
// with zstd where that saves at least an eighth, else stored as they are.
// Identical content is stored once.
//
// Before packs, every blob was a file of its own, DIR/ab/<hex>: a store
// that still holds one is from before the store-format baseline, and Open
// refuses it (ErrBeforeBaseline) rather than read part of its history.
//
// Kept blobs: DIR/kept/<sha256> is a workspace file's own inode,
// hard-linked there by Keep when the file is about to lose its last name
// (kept.go): no copy, one read to hash it. It is read, verified, listed,
// counted and pruned like a loose blob. Keep refuses (the caller copies) a
// file with another link, one open for writing, one on another filesystem
// (the first EXDEV turns keeping off: KeepMode). Detach copies a kept
// inode into a pack before anything writes to it; Prune absorbs every kept
// blob it keeps into packs and then removes the link. Durability: with
// Options.Sync, Keep fdatasyncs the file and fsyncs kept/ before it
// returns; otherwise Sync makes them durable: an fdatasync of each kept
// file and then one fsync of kept/ (through io_uring where the kernel has
// it, one io_uring_enter for up to 128 files: syncring.go), or one syncfs
// of the store's filesystem when they are many and most of what is dirty
// (syncmany.go); Keep starts the writeback of a file of 1 MiB or more at once.
// Clone
// (clone.go) captures a file over ChunkAbove about to be written as a
// reflink (FICLONE) into an anonymous file in kept/, hashed and then
// linked as kept/<sha256>, where the filesystem has reflinks (probed at
// Open: CloneMode); Prune then leaves large kept blobs unpacked.
//
// Capture (capture.go) is the one entry point for a workspace file's
// before-state: it picks stash, keep, sparse copy, reflink or pack, says
// which and why (Captured), and states the durability of each once.
//
// Stashes (stash.go): DIR/kept/p-<32 hex digits> is a workspace file's own
// inode linked there unread by Stash (an unlink's capture), or moved there
// by the unlink itself (PrepareMove, Move.Do: stashmove.go), durable like
// a kept file. It is no blob: List, Prune and Verify never see it. Name
// hashes it and links the same inode as DIR/kept/<sha256>; the caller
// records that and then removes the stash's link with Unstash. Or
// HashStashes hashes a batch (small ones through io_uring: hashbatch.go,
// uring.go), the caller records their names durably, and MoveStashes
// renames each stash to its blob.
//
// Index: the packs are the truth. At Open each pack is indexed from its
// .idx when that is valid and describes the pack's exact length, else by
// scanning the pack's records. A writer's Open repairs what a crash left in
// a pack it did not seal: bytes after the last whole record (a torn tail:
// no Put that wrote them returned) are copied aside to
// <name>.pack.torn-<time> and cut off, the rest is fdatasynced (a
// batch-mode writer may have died before its Sync) and indexed. Damage with
// whole records after it is skipped and reported by Damaged; the blobs
// that were there are missing, which verify reports.
//
// Durability: with Options.Sync ("--sync always"), Put returns only after
// the pack holding its records is fdatasynced (and a new pack's directory
// entry synced). Without it ("--sync batch"), Put returns once the records
// are written to the pack (they survive a crash of the process), and Sync
// makes every record put so far durable with one fdatasync per pack written
// to — one for a step's hundred small files, not two fsyncs each. Callers
// must Sync blobs before they sync any log line naming them. A pack whose
// fdatasync fails is never synced or appended to again: the records in it
// that were not yet durable are copied, verified, into a fresh pack that is
// synced instead (a retried fsync can report success for pages the kernel
// dropped). A pack is sealed (its .idx written atomically) once it reaches
// Options.PackSize, and at Close.
//
// Prune removes what the caller no longer keeps: loose blobs by name;
// packs holding anything dead are rewritten, their kept records copied into
// a new pack that is made durable and indexed before the old pack is
// deleted, so a crash leaves two copies, never none. PruneWith tells a
// Progress each phase (loose blobs removed, records repacked, packs
// deleted, kept blobs absorbed) with its count and bytes, and what of it
// is done; a Progress that has BeginCounting (rewind.Counting) hears what
// the items are ("blobs", "records", "packs").
//
// Reads verify: Open returns a reader whose sequential Read fails with
// ErrCorrupt at the end if the content does not hash to its ID; a record
// whose CRC, decompression or hash fails is never returned. OpenVerified
// is for random access: a small or loose blob is hashed whole first; a
// chunked blob's chunks are each verified against their own hash when a
// read first touches them (a damaged chunk fails with a *ChunkError), so a
// read at an offset does not read the blob from its start.
//
// Crash points (durable.TestHook, for the SIGKILL tests): "kept:linked"
// after Keep linked a file, "kept:stashed" after Stash linked one,
// "kept:naming" when Name has opened a stash to hash it, "kept:moving"
// before MoveStashes renames a stash to its blob, "kept:syncing" when a
// batch-mode Sync begins to make kept files and stashes durable,
// "kept:ring-syncing" when it has submitted a window's syncs to io_uring
// and not yet waited for them, "pack:appended"
// after a record is written to a pack, "prune:removing" after Prune deleted
// its first old pack, "prune:removed-loose" after each loose blob it
// deleted.
package blobstore
