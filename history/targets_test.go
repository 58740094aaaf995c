package history

import (
	"errors"
	"testing"

	"github.com/zerofs/zerofs/rewind"
)

// step and rw build blocks for the target tests: steps that change something or
// not, and rewinds (checkpoint at start, event at seq).
func step(start, end Seq, changed bool) *Block {
	b := &Block{Type: BlockStep, Seq: start, Start: start, End: end}
	if changed {
		b.First = start + 1
		b.Files = []rewind.FileState{{Path: "a"}}
	}
	return b
}

func rw(start, seq, target Seq) *Block {
	return &Block{Type: BlockRewind, Seq: seq, Start: start, End: seq, First: start,
		Rewind: &rewind.RewindPayload{TargetSequence: target, CheckpointSequence: start}}
}

func revert(start, seq, of Seq) *Block {
	b := rw(start, seq, of-1)
	b.Rewind.RevertOf = of
	b.Files = []rewind.FileState{{Path: "a"}}
	return b
}

func TestUndoRedoTargets(t *testing.T) {
	const none = Seq(1<<64 - 1)
	for _, tc := range []struct {
		name       string
		blocks     []*Block
		undo, redo Seq // none: nothing to do
	}{
		{"empty", nil, none, none},
		{"one step", []*Block{step(1, 3, true)}, 1, none},
		{"empty last step", []*Block{step(1, 3, true), step(4, 4, false)}, 1, none},
		{"after an undo", []*Block{step(1, 3, true), step(4, 6, true), rw(7, 8, 4)}, 1, 6},
		{"changes after a rewind", []*Block{step(1, 3, true), rw(4, 5, 0), step(6, 7, true)}, 6, none},
		// Two undos, then one redo: the next undo undoes the step the redo
		// brought back, and the next redo brings back the first undo, not
		// the redo just made.
		{"undo undo redo", []*Block{step(1, 3, true), step(4, 6, true), rw(7, 8, 4), rw(9, 10, 1), rw(11, 12, 8)}, 1, 6},
		// A new step ends the redo chain.
		{"step after undo", []*Block{step(1, 3, true), step(4, 6, true), rw(7, 8, 4), step(9, 10, true)}, 9, none},
		// A revert is a change like a step: undo undoes it, and it ends
		// the redo chain.
		{"revert after undo", []*Block{step(1, 3, true), step(4, 6, true), rw(7, 8, 4), revert(9, 10, 1)}, 8, none},
		// A step that changed nothing does not.
		{"empty step after undo", []*Block{step(1, 3, true), step(4, 6, true), rw(7, 8, 4), step(9, 9, false)}, 1, 6},
	} {
		t.Run(tc.name, func(t *testing.T) {
			u, _, err := UndoTarget(tc.blocks, 0)
			if tc.undo == none {
				if !errors.Is(err, ErrNothingToUndo) {
					t.Errorf("undo: got %d, %v; want ErrNothingToUndo", u, err)
				}
			} else if err != nil || u != tc.undo {
				t.Errorf("undo: got %d, %v; want %d", u, err, tc.undo)
			}
			r, _, err := RedoTarget(tc.blocks, 0)
			if tc.redo == none {
				if !errors.Is(err, ErrNothingToRedo) {
					t.Errorf("redo: got %d, %v; want ErrNothingToRedo", r, err)
				}
			} else if err != nil || r != tc.redo {
				t.Errorf("redo: got %d, %v; want %d", r, err, tc.redo)
			}
		})
	}
}

// TestUndoPruned: undo of a step whose tool_call was cut by gc still works
// (its state before is also the state just before its first checkpoint),
// and one whose before-state is gone says so.
func TestUndoPruned(t *testing.T) {
	// Step 4's tool_call is at 4, its first checkpoint at 5.
	blocks := []*Block{step(1, 3, true), step(4, 6, true)}
	if u, b, err := UndoTarget(blocks, 4); err != nil || u != 4 || b.Seq != 4 {
		t.Errorf("undo with history from 4: got %d, %v; want 4 (step 4)", u, err)
	}
	_, _, err := UndoTarget(blocks, 5)
	var pe *PrunedError
	if !errors.As(err, &pe) || !errors.Is(err, rewind.ErrNoSuchSeq) || pe.Seq != 4 {
		t.Errorf("undo with history from 5: got %v, want a PrunedError for 4", err)
	}
}
