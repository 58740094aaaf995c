// Package bisect finds the step (or turn) of a workspace's history after
// which a command fails, as `git bisect run` finds a commit: the command's
// exit status says what it thinks of a state (0 good, 125 skip, any other
// below 128 bad; 128 and above stops the search), and a binary search over
// the states after each step names the first bad one.
//
// The search space is the states s0..sN: s0 the oldest state kept (or the
// --good state), si the state just after the i-th step (or turn) that
// changed something, sN the newest state (or the --bad state). sN is probed
// first and must be bad; then the first bad state is searched for among
// s0..sN with s0 not assumed good, so the search needs at most
// ceil(log2(N+1)) more probes, and finds it when the command fails even at
// s0 (the search says so: ErrBadAtOldest). A recorded ok result of the same
// command (an agent ran it and it passed) narrows the range first, and is
// checked by a probe before the search trusts it.
//
// A state that gc thinned away cannot be tested: it counts as skipped (a
// probe that ran nothing, ExitCode -1).
//
// Every probe runs in a scratch directory outside the workspace, written
// once from the history with the fork machinery (history.Fork) and, between
// probes, changed in only the paths whose state differs between the two
// states (the paths the checkpoints between them captured). The workspace,
// its head and its log are never touched: the search only reads the
// history.
//
// Nothing is durable: the scratch directory is removed when Run returns.
//
// Imports: history and below (it stands on history.Source, like the CLI).
package bisect
