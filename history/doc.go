// Package history is a zerofs workspace's history as a library: finding a
// workspace (Find, like git finds .git), opening its history (Open) as one
// Source whether the workspace is mounted or not, and what front ends
// reason about: steps and rewinds as Blocks, what each one changed
// (Changes, with renames and the process that made each change), the log
// (Log), diffs between states (Diff), rewinds of every form (a target,
// some paths, a revert, undo and redo, dry runs: Source.Rewind, one
// request each, its refusals typed: record.RefusedError), gc cuts and thins (KeepCut, GCRequest's ThinBefore; Source.Thinned and
// ThinnedAt say which states a thin gave up), a status at a glance
// (StatusOf, StatusWith: also what a thin would free) and store
// verification with typed findings (Verify: only the blobs of the
// before-states that survive cuts and thins, as rewind.Retention folds
// them). The CLI, the MCP server (mcpserver) and the web timeline stand
// on it and only render what it returns (restic's FUSE front end and CLI
// share one repository interface the same way): the log as LogPage gives
// it (the turn of every listed entry listed with it), and a rewind's
// report (control.RewindReport, which names what it acted on) in the one
// wording of Describe and Name, never worded by a front end on its own.
//
// Two Sources implement the interface. Mounted, everything goes through
// the daemon: the control files of package control, and the @T/ views,
// read from a descriptor of the mount's root with openat2 confined beneath
// it and refusing every symlink, so a symlink in the workspace (now or in
// a past state) never leads a read outside it; the store is never touched.
// Unmounted, the engine (package rewind) is opened on the store, holding
// its lock until Close, so a caller never races a daemon.
//
// Undo and redo are the engine's (record.Request): it resolves them under
// its workspace lock from the step marks it keeps, by the daemon when
// mounted, so no change or step lands between choosing the target and
// rewinding to it. Mounted, a refused request's reason is read back from
// the control file (control.Refusal), never guessed from the log.
//
// Durability: nothing here writes the store itself. Every change to the
// history (a step, a rewind, a gc) is made by the engine or the daemon and
// is durable when the call returns.
//
// Imports: control, rewind, eventlog and blobstore; never fs (and so
// never go-fuse) or cmd.
package history
