package index

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/zerofs/zerofs/record"
)

const (
	stashA = "p-0123456789abcdef0123456789abcdef"
	blobA  = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
)

func namedEvent(t *testing.T, seq record.Seq, names ...record.Named) record.Event {
	t.Helper()
	b, err := json.Marshal(record.NamedPayload{Named: names})
	if err != nil {
		t.Fatal(err)
	}
	return record.Event{Seq: seq, Type: record.TypeStashNamed, Payload: b}
}

// TestNamedFold: a record naming a stash is unnamed until a stash_named
// event names it; it then has its blob (or, lost, is skipped with the
// reason); a name for a record the index does not hold changes nothing.
func TestNamedFold(t *testing.T) {
	s := NewState()
	stashB := strings.Replace(stashA, "0", "1", 1)
	files := []record.FileState{
		{Path: "a", Kind: record.KindFile, Kept: stashA, Bytes: 0},
		{Path: "b", Kind: record.KindFile, Kept: stashB, Bytes: 3},
	}
	if err := s.AddCheckpoint(1, 0, false, files); err != nil {
		t.Fatal(err)
	}
	if un := s.Index().Unnamed(); len(un) != 2 || un[0].Path != "a" || un[0].Seq != 1 {
		t.Fatalf("Unnamed: %+v, want a and b at 1", un)
	}
	if err := s.Add(namedEvent(t, 2, record.Named{Sequence: 1, Kept: stashA, Blob: blobA}, record.Named{Sequence: 1, Kept: stashB, Lost: "gone"},
		record.Named{Sequence: 1, Kept: strings.Replace(stashA, "0", "2", 1), Blob: blobA})); err != nil {
		t.Fatal(err)
	}
	if s.Index().HasUnnamed() {
		t.Fatalf("still unnamed: %+v", s.Index().Unnamed())
	}
	a, _ := s.Index().At("a", 0, ^record.Seq(0))
	b, _ := s.Index().At("b", 0, ^record.Seq(0))
	if a.State.Blob != blobA || a.State.Kept != stashA || a.State.Skipped {
		t.Fatalf("a: %+v, want its blob", a.State)
	}
	if !b.State.Skipped || b.State.Reason != "gone" || b.State.Blob != "" {
		t.Fatalf("b: %+v, want skipped with the reason", b.State)
	}
	if s.Head() != 2 {
		t.Fatalf("head %d, want 2", s.Head())
	}
}

// TestNameAhead: names taken ahead of the fold give the records their
// blobs and nothing else (the head stays); folding the event in its turn
// then changes nothing; a damaged event is refused, other events ignored.
func TestNameAhead(t *testing.T) {
	s := NewState()
	if err := s.AddCheckpoint(1, 0, false, []record.FileState{{Path: "a", Kind: record.KindFile, Kept: stashA}}); err != nil {
		t.Fatal(err)
	}
	ev := namedEvent(t, 5, record.Named{Sequence: 1, Kept: stashA, Blob: blobA, Bytes: 3})
	if err := s.NameAhead(ev); err != nil {
		t.Fatal(err)
	}
	a, _ := s.Index().At("a", 0, ^record.Seq(0))
	if s.Index().HasUnnamed() || a.State.Blob != blobA || a.State.Bytes != 3 {
		t.Fatalf("a: %+v, unnamed %v: want its blob", a.State, s.Index().Unnamed())
	}
	if s.Head() != 1 {
		t.Fatalf("head %d, want 1: a name ahead folds no sequence", s.Head())
	}
	if err := s.Add(namedEvent(t, 2, record.Named{Sequence: 1, Kept: stashA, Lost: "gone"})); err != nil {
		t.Fatal(err)
	}
	if a, _ := s.Index().At("a", 0, ^record.Seq(0)); a.State.Blob != blobA || a.State.Skipped {
		t.Fatalf("a: %+v after a later name: want the first one kept", a.State)
	}
	if err := s.Add(ev); err != nil || s.Head() != 5 {
		t.Fatalf("folding the event in its turn: %v, head %d", err, s.Head())
	}
	bad := record.Event{Seq: 6, Type: record.TypeStashNamed, Payload: []byte(`{"named":[{"sequence":9,"kept":"x"}]}`)}
	var de *record.DamageError
	if err := s.NameAhead(bad); !errors.As(err, &de) {
		t.Fatalf("a damaged stash_named: %v, want a DamageError", err)
	}
	if err := s.NameAhead(record.Event{Seq: 7, Type: record.TypeToolCall, Payload: []byte(`{}`)}); err != nil {
		t.Fatalf("a step event: %v, want it ignored", err)
	}
}

// TestNamedDamage: a stash_named event zerofs never writes is damage, and
// so is a checkpoint record with a bad stash name.
func TestNamedDamage(t *testing.T) {
	for name, n := range map[string]record.Named{
		"not before it": {Sequence: 5, Kept: stashA, Blob: blobA},
		"bad stash":     {Sequence: 1, Kept: "../x", Blob: blobA},
		"bad blob":      {Sequence: 1, Kept: stashA, Blob: "xyz"},
		"both":          {Sequence: 1, Kept: stashA, Blob: blobA, Lost: "gone"},
		"negative size": {Sequence: 1, Kept: stashA, Blob: blobA, Bytes: -1},
	} {
		if err := NewState().Add(namedEvent(t, 5, n)); !errors.Is(err, record.ErrCorrupt) {
			t.Errorf("%s: %v, want damage", name, err)
		}
	}
	if err := NewState().AddCheckpoint(1, 0, false, []record.FileState{{Path: "a", Kind: record.KindFile, Kept: "p-../../etc"}}); !errors.Is(err, record.ErrCorrupt) {
		t.Errorf("a record with a bad stash name: %v, want damage", err)
	}
}
