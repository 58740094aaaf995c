// Package index is the state zerofs derives from its event log, without
// touching the workspace: the index of before-states (what was at path P
// at sequence T), its packed codec and its snapshot, the step marks, the
// start of history (gc's cut) and the thinned intervals, and the last
// rewind. State.Add is the one fold of an event into it: the engine folds
// every event it reads or appends with it (AddCheckpoint, AddStep and
// AddRewind are its parts for events the engine has just written), and a
// reader outside the engine (verify, status) folds the log with a State of
// its own, so the two agree on which records survive.
//
// The log and the snapshot are untrusted input: every record is checked
// (record.CheckFiles, record.DecodeEvent) before it is indexed, and a bad
// one is a *record.DamageError naming its line.
package index
