// Package durable is the one place in zerofs that makes store files durable:
// it fsyncs files and directories and renames temporary files into place.
//
// Every other package that writes to the store (eventlog, blobstore, rewind's
// intent record) goes through these helpers, so the order "data durable, then
// name durable" is written once and reviewed once.
//
// Temporary files, in the store and in the workspace (a rewind's restored
// file before its rename) alike, are named by one scheme, TempName:
// ".tmp-<name>-<16 hex digits>"; IsTemp and IsTempFor recognise them for
// whoever sweeps what a crash left.
//
// Invariant: when a function here returns nil, what it wrote (content and
// directory entry) has reached stable storage; on error, no temporary file is
// left behind.
package durable
