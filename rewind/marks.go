package rewind

import (
	"iter"

	"github.com/zerofs/zerofs/record"
	"github.com/zerofs/zerofs/rewind/internal/index"
)

// Which events form a step is decided once, by the fold the engine keeps
// its marks with (rewind/internal/index/marks.go, SPEC): a tool_call begins
// a step; a rewind or a turn ends it, and checkpoints after either, before
// the next tool_call, form an implicit step; the checkpoints a rewind
// writes for itself (from its checkpointSequence up to its event) are the
// rewind's; a gc ends nothing. Readers that show steps (history's log)
// group with StepMarks rather than a grouping of their own.

// StepMarks folds a log's events, read in order, into its step boundaries,
// sorted by sequence, exactly as the engine does. An event belongs to the
// block begun by the last mark at or before it (a checkpoint before every
// mark, to an implicit step). A damaged event folds in nothing.
func StepMarks(events iter.Seq2[record.Event, error]) ([]record.Mark, error) {
	return index.GroupMarks(events)
}
