// Package testsupport holds what the module's tests need in more than one
// package, written once: skipping (or, in CI, failing) a test that cannot
// mount, building the zerofs binary once per test binary, unmounting a
// mount that must never be left behind, running the binary and mounting a
// workspace with its daemon, re-executing the test binary as a child to
// SIGKILL it, polling for a condition with a deadline, comparing trees, and
// seeded randomness that a failing run prints and a later run replays.
//
// It is imported only by tests. Nothing it does is durable: it makes
// temporary directories and mounts and removes them.
//
// Environment:
//   - ZEROFS_REQUIRE_FUSE=1 turns every "cannot run here" skip into a
//     failure (CI must never skip a mounted test silently).
//   - ZEROFS_SEED=N replays a seeded test from the seed it printed.
package testsupport
