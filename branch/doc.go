// Package branch makes, lists, mounts and deletes the branches of a
// workspace: writable copies of it as it was at a sequence, made in time
// that does not grow with the workspace.
//
// A branch is two mounts at its directory DIR. Below, a kernel overlayfs
// whose lower layer is the workspace mount's read-only view @BASE/ (served
// by the workspace's daemon; it never changes however the workspace moves
// on) and whose upper and work directories are in the workspace's store
// (STORE/branches/ID/upper and work): the first write to a path copies
// that path up, a removal is a whiteout there. Above, a zerofs daemon of
// its own, mounted in place over the overlay with its store in
// STORE/branches/ID/store: steps, @T/, rewind, undo, log and hooks work in
// a branch because it is a plain zerofs workspace. Making a branch is one
// request to the workspace's engine (record.BranchRequest: it ends the
// step's captures, so that the state at the base never changes, and writes
// the branch's record, pinning its base against gc) and two mounts.
//
// The API, used by the CLI (zerofs branch), the MCP server and the agent
// hooks alike:
//
//	ws, err := history.Find(cwd)                                  // the mounted workspace
//	info, err := branch.Create(ctx, ws, "/work/try-1", history.Now, branch.Options{})
//	infos, err := branch.List(ctx, ws)                            // each branch: Info
//	info, err := branch.Find(ctx, ws, "/work/try-1")              // one (record.ErrNotBranch)
//	info, err := branch.Delete(ctx, ws, "/work/try-1", false, branch.Options{}) // *UnmergedError
//	done, err := branch.UnmountAll(ctx, ws, branch.Options{})     // before the workspace's umount
//	dirs, err := branch.UnmountAt(ctx, mountpoint, branch.Options{}) // the same, from the mount table alone
//	dir := branch.Resolve("/work/try-1")                          // the name its record keeps
//
// A merge of a branch is the engine's (record.MergeRequest{Dir:
// branch.Resolve(dir)} through history.Source.Rewind), like a fork's.
//
// Create on the directory of an existing branch mounts it again (after the
// workspace was unmounted, or its daemon killed). zerofs merge DIR brings a
// branch's changes in (the engine reads its upper directory and its log
// beneath the store, never through a mount).
//
// Branches need root (an overlayfs mount) and a mounted workspace (their
// lower layer is its @BASE/ view). Unmounting the workspace unmounts its
// mounted branches first (UnmountAt: they are found in the mount table,
// so a dead or hung workspace mount is never touched); a branch whose workspace daemon was
// killed reads nothing until it is mounted again (Create or Mount).
//
// Trust: a branch record is read from the store as untrusted input
// (record.BranchRecord.Check). DIR must be absolute, outside the workspace,
// and missing or empty. The overlay's options are built from paths that
// hold no separator characters (',', ':', '\\'), or refused.
//
// Durability: the record is written (rewind.writeBranch, durable) before
// anything is mounted; a deletion renames the branch's directory aside
// before removing it.
package branch
