// Package eventlog is zerofs's append-only event log, events.jsonl.
//
// Format: one JSON object per line, each terminated by '\n', with the
// envelope {"id","sessionId","sequence","type","createdAt","payload"} that
// SPEC.md defines. Sequences start at 1 and increase by exactly one per line.
// No line is ever rewritten or removed.
//
// Durability: with Options.Sync, Append returns only after the line is
// fsynced; concurrent appenders share one fdatasync (group commit). Without
// it ("--sync batch"), Append returns once the line is written to the file
// (it survives a crash of the process, not of the machine) and Sync makes
// every line written so far durable. Callers that store blobs named by an
// event make those blobs durable before they Sync the log.
//
// Recovery: Open scans the whole log. A torn tail (bytes after the last
// complete, valid line, with no valid line after them) was never
// acknowledged to anyone: it is copied aside to events.jsonl.torn-<time>,
// cut off, fsynced, and reported through the logger. Any other damage (a bad
// line with valid lines after it, a gap or repeat in sequences) is refused
// with a *CorruptError naming the line; nothing is dropped silently.
//
// One writer: Open takes an exclusive, non-blocking flock on the log file. A
// second writer, in this process or another, gets ErrLocked at once; a
// crashed holder's lock goes with its process.
package eventlog
