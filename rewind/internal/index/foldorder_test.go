package index

import (
	"reflect"
	"slices"
	"testing"

	"github.com/zerofs/zerofs/record"
)

// TestCheckpointsFoldedOutOfOrder: two captures running at once append
// their checkpoints in one order and may fold them in the other. The state
// must come out as a fold of the log in order makes it: a step's first
// checkpoint is its lowest (else an undo of the step starts after its first
// change and leaves it in place), and the person list stays sorted (it is
// binary-searched). Failed before noteCheckpoint took the lowest: First 12
// want 11, person [14 13].
func TestCheckpointsFoldedOutOfOrder(t *testing.T) {
	absent := func(p string) []record.FileState { return []record.FileState{{Path: p, Absent: true}} }
	type cp struct {
		seq, step record.Seq
		person    bool
		path      string
	}
	step := func(s *State, seq record.Seq) {
		s.AddStep(record.Event{Seq: seq, Type: record.TypeToolCall, Payload: []byte(`{"name":"Bash"}`)})
	}
	fold := func(t *testing.T, withStep bool, cps []cp) *State {
		s := NewState()
		if withStep {
			step(s, 10)
		}
		for _, c := range cps {
			if err := s.AddCheckpoint(c.seq, c.step, c.person, absent(c.path)); err != nil {
				t.Fatal(err)
			}
		}
		return s
	}
	cases := []struct {
		name     string
		withStep bool
		cps      []cp
	}{
		{"named step", true, []cp{{11, 10, false, "a"}, {12, 10, false, "b"}, {13, 0, true, "c"}, {14, 0, true, "d"}}},
		{"open block", true, []cp{{11, 0, false, "a"}, {12, 0, false, "b"}, {13, 0, true, "c"}, {14, 0, true, "d"}}},
		{"before any mark", false, []cp{{11, 0, false, "a"}, {12, 0, false, "b"}, {13, 0, true, "c"}, {14, 0, true, "d"}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			inOrder := fold(t, c.withStep, c.cps)
			swapped := slices.Clone(c.cps)
			swapped[0], swapped[1] = swapped[1], swapped[0]
			swapped[2], swapped[3] = swapped[3], swapped[2]
			outOfOrder := fold(t, c.withStep, swapped)
			if got, want := outOfOrder.Marks(), inOrder.Marks(); !reflect.DeepEqual(got, want) {
				t.Errorf("marks folded out of order %+v, in order %+v", got, want)
			}
			if outOfOrder.first0 != inOrder.first0 {
				t.Errorf("first checkpoint before any mark %d, in order %d", outOfOrder.first0, inOrder.first0)
			}
			if c.withStep {
				if m := outOfOrder.Marks(); len(m) != 1 || m[0].First != 11 {
					t.Errorf("the step's first checkpoint: %+v, want 11", m)
				}
			} else if outOfOrder.first0 != 11 {
				t.Errorf("first checkpoint %d, want 11", outOfOrder.first0)
			}
			if !slices.Equal(outOfOrder.person, []record.Seq{13, 14}) {
				t.Errorf("person %v, want [13 14]", outOfOrder.person)
			}
			for _, seq := range []record.Seq{13, 14} {
				if !outOfOrder.IsPerson(seq) {
					t.Errorf("IsPerson(%d) false", seq)
				}
			}
		})
	}
}
