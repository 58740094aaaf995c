// Package rewind computes past states of a workspace and applies rewinds. It
// is the engine under the FUSE layer: the layer calls Begin before every
// change, and the engine captures before-states into the blob store and the
// event log, answers "what was at path P at sequence T", and rolls the
// workspace back.
//
// Past states follow "closest to the target wins" (SPEC.md): the state of P at
// T is the before-state in the first checkpoint after T that names P, else P
// as it is now. The state derived from the log lives in rewind/internal/index
// (index.State: the Index, the step marks, the cut and the thins, the last
// rewind), folded by one function (State.Add) whether the engine reads the
// log, appends to it, or a reader outside the engine (Retention) folds it.
// The Index keeps, per path, the sorted sequences of the
// checkpoints that name it, and per directory the names ever recorded under
// it, so both questions take O(log n) in the history length. It is updated as
// events are appended, never rebuilt while running. It is compact (each path
// held once, each record's state packed into an arena: index/statecodec.go), and it
// is saved as index.snapshot in the store at Close, after gc and every
// snapshotEvery events, together with the log prefix it covers (head, size,
// CRC-32C). Open uses a snapshot only when it is intact and the log still
// begins with exactly that prefix, and then reads only the lines after it;
// otherwise it rebuilds the index from the whole log. The snapshot is a cache,
// never trusted over the log, and its paths are checked like the log's.
//
// GC cuts history (a history_pruned event: states before the cut go) and
// thins it (a history_thinned event, index/thin.go: of the history before a
// bound, one state a day stays, and the states strictly inside each named
// interval go). Both append their event, fsynced, before any blob is
// removed, fold it into the index (which drops the records no kept state
// needs), and then remove the blobs no surviving record names. checkSeq
// refuses a state below the cut or inside a thinned interval everywhere
// (views, lookups, rewinds, reverts, forks) with ErrNoSuchSeq. Retention
// (index.State) folds a log the same way for readers outside the engine.
//
// Files: engine.go (open, close, steps), flusher.go (the batch flusher),
// namer.go (the stash namer), bound.go (the store bound's pruner),
// capture.go (Begin and before-states),
// stash.go (stashes and their naming), state.go (past states: StateAt,
// ReadDirAt, content), request.go (the Request and its resolution),
// plan.go (what a rewind must do), apply.go (carrying a plan out and
// recording it), recover.go (the intent record and finishing an
// interrupted rewind), revert.go (one step's revert and its conflicts),
// foreign.go (changes made outside the agent's steps), preview.go (dry
// runs), snapshot.go (the index snapshot, the snapshotter), gc.go, forks
// (fork.go: Fork, the one part that needs the engine, and the
// list-then-copy both forks share; forkdir.go: ForkDir, from a directory that shows a state;
// forkwriter.go: the new directory and its store; forklog.go: reading a
// fork's own history), merge.go and mergefork.go (a fork's changes merged
// back), branch.go (a branch's record and gc's pin on its base),
// mergebranch.go (a branch's copy-up layer read as a merge side), ignore.go and
// mergeignore.go (.zeroignore and --ignore: what is never captured nor
// touched).
//
// All workspace access goes through the workspace root's directory
// descriptor, resolved by internal/wsdir (the resolver the FUSE layer uses
// too): openat2 confined beneath the root and refusing every symlink, for
// parent directories, then *at calls that never follow a final symlink, so
// a symlink planted in the workspace cannot lead a capture or a rewind
// outside it. Mount points below the root are crossed (a file on a tmpfs
// mounted in the workspace is captured and rewound like any other; a path
// that exists is never recorded as absent), and paths of any length work
// (wsdir opens them a chunk at a time).
//
// How a regular file's before-state is stored is the blob store's choice,
// made in one place (blobstore.Store.Capture: stash, keep, sparse copy,
// reflink or pack, with the durability of each): a change marked Removed
// (an unlink, the victim of a rename) keeps the file's inode in the store
// instead of copying it where the store can (one link, not open for
// writing per Options.OpenForWrite, the same filesystem); CaptureMode says
// which.
//
// Durability: with Options.Sync, Begin returns only after every blob and the
// checkpoint event naming it are fsynced, in that order. Without it (batch),
// they are written (safe from a crash of any process) and a flusher fsyncs
// blobs, then the log, within Options.BatchDelay; BeginStep and Rewind flush
// first (a step, a turn and an auto step before they take wsMu or capMu,
// and again under them for what was appended meanwhile: preSync). Rewind writes an intent record (rewind-intent.json in the store)
// after its own checkpoint is durable; Open finishes a rewind whose intent it
// finds, so the workspace is never left half-rewound.
//
// The store is untrusted input (SPEC, Trust). Every event is checked as it
// is read (Open, every append, record.CheckEvent for readers outside the engine):
// a checkpoint record zerofs never writes — a path that is not clean and
// relative or is reserved, an unknown kind, mode bits beyond 07777, a bad
// blob id, a symlink without a target — is a *DamageError naming the log
// line and path (errors.Is record.ErrCorrupt), and Open refuses the store.
// The intent record must name a rewind's checkpoint that nothing after it
// contradicts; a plan is checked once more before it is applied. Temporary
// files (internal/durable's scheme) that a crash inside a rewind's file
// write leaves are removed by the recovery.
//
// Narrower rewinds (Apply with a Request): a path rewind restores only some
// paths, each with everything under it (and the ancestors they need); a
// revert puts each path one step changed back to its state before that
// step, keeping every later change, and refuses with a *ConflictError
// naming each path changed since the step (unless Force). Both plan exactly
// a list of paths, which their intent records, so recovery finishes them
// like a full rewind; both are session_rewind events (with "paths" or
// "revertOf") and undone the same way. A dry run plans, previews (restored,
// deleted, created, +N -M lines for text) and changes nothing. Every form
// names the paths whose present state was made outside the agent's steps
// (between steps, or in another agent session's step, from the tool_call's
// "agentSession") before it overwrites them.
//
// Background workers: the flusher (flusher.go), the namer (namer.go), the
// snapshotter (snapshot.go) and the pruner (bound.go) each own their
// goroutine, their lock and their stop; Open starts them once recovery is
// done, Close stops the pruner, the namer, the snapshotter, then the
// flusher, and then names and flushes what is left itself.
//
// The pruner's gc (Options.MaxStoreSize) runs after the step that woke it
// has returned, and orders with everything else as GC does: it holds wsMu
// for writing from its history_pruned event to the last blob removed, so
// no capture runs meanwhile (none can name a blob being removed, nor
// dedupe against one) and no rewind, merge or fork plans from a history
// being cut; a capture, a step or a rewind that comes meanwhile waits for
// it. It measures what each cut would free before, without the lock, and
// cuts no later than the step current when it takes the lock.
//
// Lock order. Every lock the engine takes, outermost first; a lock is only
// ever taken while holding locks above it in this list, never below:
//
//  1. snapMu (Engine), serialises index snapshots from the cut to the
//     rename: Close (before wsMu; writeSnapshotLocked) and
//     writeSnapshotBehind (the snapshotter's, and GC's once its work under
//     wsMu is done), which takes wsMu only to cut the snapshot and keeps
//     snapMu while the snapshot is encoded and made durable, so that
//     waiting for a snapshot under way holds no lock a step or a capture
//     takes. The encode takes index.Index.mu for reading, a block of paths
//     at a time (level 7), and leaves out what was folded after the cut; a
//     gc's cut or thin meanwhile (which drop records in place) makes it
//     stop (index.ErrSnapshotStale).
//  2. wsMu (Engine, RWMutex), the workspace lock. Shared: Begin, from a
//     change's capture through its syscall (capture.go), so also around
//     RenameDir and Detach. Exclusive: BeginStepAs (session.go),
//     BeginTurnAs (turn.go), Apply (request.go), Merge (merge.go), a
//     branch request (branch.go), GC (gc.go, and the pruner's: bound.go),
//     Fork (fork.go), Close, and writeSnapshotBehind while it cuts the
//     snapshot (snapshot.go: it copies the marks, not the index).
//  3. mvMu (Engine, RWMutex), rename records. Shared: CaptureLocked
//     (capture.go). Exclusive: RenameDir (rename.go), under wsMu shared.
//  4. capMu (Engine), the step and the captures under way: autoStep,
//     claim, captureClaimed (capture.go), appendRename, movedNames
//     (rename.go), BeginStepAs, stepFor (session.go), BeginTurnAs
//     (turn.go), request.go, apply.go, merge.go, branch.go, Step. Held
//     across beginStepLocked, which takes flusher.mu and the log's lock.
//  5. namer.mu (namer.go), serialises naming stashes: the namer's
//     goroutine, and NameStashes from Apply, Merge, GC, Close, Detach, named
//     (state reads), Open's recoverStashes and fs. Never with mvMu or capMu
//     held.
//  6. flusher.mu (flusher.go), serialises flushes (Engine.Sync: blobs,
//     then the log). Taken from beginStepLocked, Apply, Merge, the namer's
//     batches, Open's recoverRename, GC, Close and the flusher's goroutine.
//  7. Below the engine, each a leaf to it (taken inside its package's
//     methods, never around a call back into the engine): the index's
//     (index.State.mu, index.Index.mu), the log's (eventlog: mu, then
//     syncMu), the blob store's (blobstore/store.go: wmu, mu, a kept
//     inode's mu before kmu). One call goes back up with a lock held: the
//     blob store asks Options.OpenForWrite (fs's write-open count, its own
//     lock) while it holds the kept inode's mu.
//  8. ign.mu (ignore.go), a leaf: it serialises reading .zeroignore and
//     replacing the rules, taken from expand (under wsMu and mvMu), setStep
//     (under capMu), the planners (under wsMu) and IgnoreStatus; nothing is
//     taken inside it. The rules themselves are read without it.
//
// None of the six can go without a change in behaviour: flusher.mu keeps
// "blobs durable before the log line naming them" across concurrent
// Syncs (blobstore.Store.Sync hands the kept files waiting for their
// fsync to one caller: a second, finding none, would otherwise sync the
// log while the first still syncs them); mvMu could fold into
// wsMu only if RenameDir took it exclusively, which its caller (a FUSE
// rename, inside Begin) cannot; snapMu could go if GC and Close handed
// their snapshot to the snapshotter instead of writing it themselves.
package rewind
