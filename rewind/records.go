package rewind

import (
	"github.com/zerofs/zerofs/eventlog"
	"github.com/zerofs/zerofs/rewind/internal/index"
)

// The records of the log and the state derived from them are defined in
// rewind/internal/index, which folds the log; these names are the same
// types, for callers outside rewind.
type (
	// Seq is an event sequence.
	Seq = eventlog.Seq
	// Kind is what a path was: a regular file, a directory or a symlink.
	Kind = index.Kind
	// FileState is one path's before-state: an entry of a checkpoint's
	// "files" (SPEC.md's keys).
	FileState = index.FileState
	// Checkpoint is the payload of a session_checkpoint event.
	Checkpoint = index.Checkpoint
	// Report is what a rewind did.
	Report = index.Report
	// RewindPayload is the payload of a session_rewind event.
	RewindPayload = index.RewindPayload
	// PrunedPayload is the payload of a history_pruned event.
	PrunedPayload = index.PrunedPayload
	// ThinnedPayload is the payload of a history_thinned event.
	ThinnedPayload = index.ThinnedPayload
	// NamedPayload is a stash_named event's payload, Named one stash it
	// names (stash.go).
	NamedPayload = index.NamedPayload
	Named        = index.Named
	// ThinInterval is one interval a thin gave up.
	ThinInterval = index.ThinInterval
	// Foreign is a path whose present state was made outside the agent's
	// steps, which a rewind overwrites.
	Foreign = index.Foreign
	// DamageError names a record in the store that zerofs never writes.
	DamageError = index.DamageError
)

// The kinds SPEC.md names.
const (
	KindFile    = index.KindFile
	KindDir     = index.KindDir
	KindSymlink = index.KindSymlink
)

// The forms of a rewind, as its session_rewind records them ("form").
const (
	FormRewind = index.FormRewind
	FormPaths  = index.FormPaths
	FormRevert = index.FormRevert
	FormUndo   = index.FormUndo
	FormRedo   = index.FormRedo
	FormTurn   = index.FormTurn
	FormMerge  = index.FormMerge
)

// CheckEvent checks one event of the log at logPath the way Open does
// before using it (see index.CheckEvent).
func CheckEvent(logPath string, ev eventlog.Event) error { return index.CheckEvent(logPath, ev) }

// MergeRecord is what a merge brought in (RewindPayload.Merge).
type MergeRecord = index.MergeRecord
