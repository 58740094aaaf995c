// Package replicate copies a workspace's history to S3-compatible object
// storage as it is made, and restores a workspace from such a replica on
// any machine.
//
// Layout of a replica at s3://BUCKET/PREFIX (every name below PREFIX/):
//
//	lease.json                     who writes here (lease.go)
//	blobs/<sha256>                 one blob's content, zstd-compressed
//	log/<first>-<last>-<sha256>.jsonl.zst
//	                               events first..last (20 digits each),
//	                               the lines of events.jsonl, compressed;
//	                               the hash is of the object's bytes
//	bases/<seq>-<sha256>.json.zst  the whole workspace at seq (base.go):
//	                               every path's kind, mode, owner, mtime,
//	                               symlink target and blob
//
// Why bases: the log holds before-states, so the state at T is "the first
// before-state after T, else the path as it is now" (SPEC, Past states),
// and "now" lives only in the workspace. A base is that "now" for one
// sequence B, so the log up to B and the base at B together give every
// state T <= B. B is always the start of a step (Engine.Step): every change
// after it is captured, so the state at B never moves once written down.
// A base is made without stopping the workspace: each path read as it is
// now is looked up again after its content was read, and if a checkpoint
// after B names it by then, its recorded before-state is used instead (a
// change is always captured before it reaches the workspace).
//
// Invariants: every object is written once, with If-None-Match: * on its
// PUT, or on the completion of its multipart upload when it is larger
// than multipartAbove (s3.go): an object that exists is never
// overwritten; finding one with our name means an earlier run wrote it. Content first: a segment is written only after
// every blob its checkpoints name, a base only after its blobs and the
// segments up to its sequence, and every blob the history up to it keeps
// (the log folded as the engine folds it). So at every moment the replica
// is a consistent prefix of the history: restoring reads only objects
// that exist. (A segment may name a blob the bucket lacks: one a local gc
// removed before it was uploaded; no base whose states need it is made.) Objects read back are untrusted: a blob must hash to its name, a
// segment and a base to the hash in theirs, segments must chain by sequence,
// and the events pass rewind's checks (CheckEvent) when the restored store
// is opened.
//
// gc and thinning propagate (collect.go): once a base is written, what no
// state its history offers needs (blobs only states a local gc cut or
// thinned needed, segments merged by compaction, older bases) is deleted,
// never before the base that makes it unneeded exists. A restore that
// finds an object gone under it lists the replica again.
//
// Large content (streamAbove, upload.go) is compressed and sealed into an
// unlinked temporary file and sent from it: no blob is held whole in
// memory on its way up. Sealed, it is sealed in chunks (sealMagic2). A
// restore streams what it reads (download.go): no large blob is held
// whole, and nothing read is used before all of it is checked.
//
// One writer per prefix: lease.json (created by a conditional write) names
// the store that replicates there; another store is refused (LeaseError).
// One replicator per store: a flock on the store's replica.lock.
//
// Progress: replica.json in the store (state.go) says how far the replica
// goes (the last event uploaded in a segment, the newest base) and how the
// last attempt went. The local store is the queue: nothing is copied aside,
// a run that stopped (a crash, a SIGKILL, an endpoint down for days) starts
// again from replica.json and the bucket's listing, and an object written
// just before a crash is found there, not written twice.
//
// The workspace never waits for replication: the replicator reads the log
// and the blob store as any reader does, and holds no engine lock across a
// network call. Every S3 request has its own deadline on silence and its
// own retries (request.go); one that waits long is shown in replica.json
// (State.Stalled). Blobs go up several at a time, and the log's new
// events go up while a base is being made, not after it.
//
// Trust (SPEC, Trust): a plain replica is unauthenticated, so a restore
// from it takes no owner, set-id bit, capability, ACL or other xattr but
// user.* from it, nor group and other permissions the umask withholds,
// unless asked (owners.go); and what a replica offered is noted per user
// (seen.go), so that an older copy swapped in is refused, not taken
// silently. A writer that finds its bucket holding less than it uploaded
// notes it in replica.json (State.Shrunk).
package replicate
