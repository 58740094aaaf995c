// Package daemon is the mount's lifecycle: `zerofs mount` and `zerofs
// umount` below their flags. It starts the daemon (this program again, in
// a session of its own, its output in STORE/daemon.log) and waits until
// its mount is ready or says why not; it serves the mount in the
// foreground with its pid file (STORE/daemon.pid), its signals (SIGINT or
// SIGTERM unmount cleanly; a second one abandons the last replication
// attempt) and its replication; it replaces what a killed daemon left
// behind (a dead mount, or one that hangs because its daemon waited on
// its own mount: its FUSE connection is aborted); and it unmounts,
// waiting until the daemon has exited.
//
// Files: mount.go (Mount: what is refused or replaced first), start.go
// (the daemon started and waited for), serve.go (the daemon itself: the
// mount, the pid file, signals), replication.go (the daemon's
// replicator), storeopen.go (the store's directory and daemon.log, opened
// beneath descriptors with no symlink followed), hung.go (a mount that
// does not answer), umount.go (Unmount and the mount table), backing.go
// (a shell standing in the directory a mount hides).
//
// Trust: the store may belong to someone else's workspace: it is checked
// (rewind.CheckStoreDir) before anything is written in it, and daemon.log
// is opened only if it is a regular file of the caller's own with one
// name. A mount's status and a pid file name a daemon by pid and start
// time; a signal goes only to the process they name, through a pidfd.
//
// Durability: the package writes only daemon.log and daemon.pid; every
// change to the history goes through the engine, which the daemon serves
// (package fs) and closes at unmount after its log is synced.
package daemon
