// Package e2e is zerofs's end-to-end suite: real tools (tar, git, sed,
// python3, cp, rm, go build, diff, ls) run under a real mount, as a user or
// a coding agent would run them, and the suite checks the contract of SPEC.md
// from the outside only: through the mount, the `zerofs` binary and the
// control files, never through the packages' Go APIs.
//
// The package holds nothing but tests. TestMain builds the binary once;
// every test mounts its own temporary workspace with the daemon (`zerofs
// mount`, or a child `zerofs mount -f` for the crash tests), because the test
// process must not serve a mount it also forks tools into (go-fuse's
// "Deadlocks"). A test skips, saying why, without root or /dev/fuse, and fails
// instead when ZEROFS_REQUIRE_FUSE=1 (CI). Cleanup always unmounts, detaching
// lazily and killing the daemon if `zerofs umount` fails.
//
// The pattern of a tool test: begin a step, record the head T and a full
// snapshot of the tree (type, permission bits, content or link target of every
// path), run the tool and check that it did its job, check that @T/ still shows
// the snapshot, rewind to T, and check that the tree equals the snapshot
// exactly and that the tool finds a consistent world afterwards.
//
// Every external command runs under a deadline, and nothing synchronises by
// sleeping: waits poll with a deadline.
package e2e
