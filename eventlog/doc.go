// Package eventlog is zerofs's append-only event log, events.jsonl.
//
// Format: one JSON object per line, each terminated by '\n', with the
// envelope {"id","sessionId","sequence","type","createdAt","payload"} that
// SPEC.md defines (record.Event, which writes it); createdAt is UTC with
// all nine fractional digits. What a payload holds is record's; the log
// frames events and keeps them, whatever their type.
// Sequences start at 1 and increase by exactly one per line, so line n holds
// sequence n. No line is ever rewritten or removed. A sparse index (the offset
// of every 1024th line) lets Events start near any sequence; readers hold one
// line in memory at a time.
//
// Durability: with Options.Sync, Append returns only after the line is
// fsynced; concurrent appenders share one fdatasync (group commit). Without
// it ("--sync batch"), Append returns once the line is written to the file
// (it survives a crash of the process, not of the machine) and Sync makes
// every line written so far durable. Callers that store blobs named by an
// event make those blobs durable before they Sync the log.
//
// Failure: a failed write is cut back, so the file always ends on a line
// boundary, and the next Append may succeed. A failed fsync (or a cut that
// fails) makes the Log refuse every later Append and Sync with ErrFailed:
// after a failed fsync Linux may have dropped the unwritten pages, and a
// retried fsync would report success for lines that never reached the disk.
// Close and Open again to go on.
//
// Recovery: Open scans the whole log, or, given Options.Resume (a prefix an
// earlier Log checked, named by its size and CRC-32C, which the Log keeps as
// it appends), only what follows that prefix once the file's first bytes hash
// to the same CRC. A torn tail (bytes after the last
// complete, valid line, with no valid line after them) was never
// acknowledged to anyone: it is copied aside to events.jsonl.torn-<time>,
// cut off, fsynced, and reported through the logger. A final line without
// its '\n' is torn even if it parses. Any other damage (a bad line with valid
// lines after it, a complete line whose sequence is not the previous one plus
// one, even the last) is refused with a *CorruptError naming the line;
// nothing is dropped silently.
//
// One writer: Open takes an exclusive, non-blocking flock on the log file. A
// second writer, in this process or another, gets ErrLocked at once; a
// crashed holder's lock goes with its process.
package eventlog
