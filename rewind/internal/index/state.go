package index

import (
	"slices"
	"sync"
	"sync/atomic"

	"github.com/zerofs/zerofs/record"
)

// State is everything derived from the log: the index of before-states,
// the start of history (pruned), the thinned intervals, the step marks
// and the last rewind. Add is the one fold of an event into it: the engine
// folds every event it reads or appends with it, and a reader outside the
// engine (verify, status) folds the log with it too, so both agree.
// A snapshot (snapshot.go) saves all of it.
type State struct {
	ix *Index

	// pruned is the start of history. It is read on every @T lookup and
	// view read, so it is an atomic: readers never wait for a fold.
	pruned atomic.Uint64
	// thinned holds the intervals of states thinned away, merged and
	// sorted; nil when none. Replaced whole, never changed in place, and
	// read without a lock like pruned.
	thinned atomic.Pointer[[]record.ThinInterval]

	mu           sync.Mutex // guards the fields below
	head         record.Seq
	marks        []record.Mark // the step boundaries, sorted (marks.go)
	first0       record.Seq    // the first checkpoint before any mark (0: none)
	redo         []RedoEntry   // the undos not yet redone, oldest first (undo.go)
	lastRewind   record.RewindPayload
	lastRewindAt record.Seq
	// person holds the sequences of the checkpoints marked "person" (a
	// person's changes), sorted.
	person []record.Seq
}

// NewState returns the state of an empty log.
func NewState() *State { return &State{ix: NewIndex()} }

// Index is the index of before-states.
func (s *State) Index() *Index { return s.ix }

// Add folds one event read from the log, in order. The event is untrusted,
// so it is checked first: a record zerofs never writes is a *DamageError
// naming its line in LogName, and nothing is folded.
func (s *State) Add(ev record.Event) error {
	v, err := record.DecodeEvent(record.LogName, ev)
	if err != nil {
		return err
	}
	switch p := v.(type) {
	case record.Checkpoint:
		if p.Rewind {
			return s.AddRewindCheckpoint(ev.Seq, p.Files)
		}
		return s.AddCheckpoint(ev.Seq, p.Step, p.Person, p.Files)
	case record.RewindPayload:
		s.AddRewind(ev, p)
	case record.PrunedPayload:
		s.addPruned(ev.Seq, p)
	case record.ThinnedPayload:
		s.addThinned(ev.Seq, p)
	case record.NamedPayload:
		s.AddNamed(ev.Seq, p)
	default:
		s.mu.Lock()
		s.markEvent(ev, nil)
		s.head = max(s.head, ev.Seq)
		s.mu.Unlock()
	}
	return nil
}

// AddCheckpoint folds a checkpoint the engine has just appended (or Add
// has decoded): its records are checked and indexed. step is the
// checkpoint's Step (0: the newest step before it), person its Person.
func (s *State) AddCheckpoint(seq, step record.Seq, person bool, files []record.FileState) error {
	if err := s.ix.Add(seq, files); err != nil {
		return record.InFile(err, record.LogName)
	}
	s.mu.Lock()
	s.noteCheckpoint(seq, step, person)
	s.head = max(s.head, seq)
	s.mu.Unlock()
	return nil
}

// AddRewindCheckpoint folds a rewind's own checkpoint (Checkpoint.Rewind):
// indexed like any, but no block's first checkpoint: the session_rewind
// after it gives it its own block, and without one (a rewind that failed
// and was rolled back) the step open before it did not change because of it.
func (s *State) AddRewindCheckpoint(seq record.Seq, files []record.FileState) error {
	if err := s.ix.Add(seq, files); err != nil {
		return record.InFile(err, record.LogName)
	}
	s.setHead(seq)
	return nil
}

// AddNamed folds a stash_named event: the records it names get their
// blobs.
func (s *State) AddNamed(seq record.Seq, p record.NamedPayload) {
	s.ix.Name(p.Named)
	s.setHead(seq)
}

// NameAhead takes only the names from ev, a stash_named event later in the
// log than the fold has reached, and folds nothing else of it (not its
// sequence). A name changes no path's state, it says what a removed file's
// stash hashed to, so the state at the fold's point may carry it: a
// replica's base made at a step's start names a stash removed before that
// start and named after a change later in the step. Folding ev in its turn
// then changes nothing more. Any other event is ignored; ev is untrusted
// and checked as Add checks it.
func (s *State) NameAhead(ev record.Event) error {
	if ev.Type != record.TypeStashNamed {
		return nil
	}
	v, err := record.DecodeEvent(record.LogName, ev)
	if err != nil {
		return err
	}
	s.ix.Name(v.(record.NamedPayload).Named)
	return nil
}

// AddStep folds a tool_call the engine has just appended.
func (s *State) AddStep(ev record.Event) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.markEvent(ev, nil)
	s.head = max(s.head, ev.Seq)
}

// AddRewind folds a session_rewind with payload p.
func (s *State) AddRewind(ev record.Event, p record.RewindPayload) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.lastRewind, s.lastRewindAt = p, ev.Seq
	s.markEvent(ev, &p)
	s.head = max(s.head, ev.Seq)
}

// addPruned folds a history_pruned event. A cut never moves back: what an
// earlier one dropped is gone.
func (s *State) addPruned(seq record.Seq, p record.PrunedPayload) {
	if p.Before > s.Pruned() {
		s.ix.Prune(p.Before)
		s.mu.Lock()
		i, _ := slices.BinarySearch(s.person, p.Before+1)
		s.person = slices.Clone(s.person[i:])
		s.mu.Unlock()
		s.pruned.Store(uint64(p.Before))
		s.setThinned(foldPrune(s.Thinned(), p.Before))
	}
	s.setHead(seq)
}

// addThinned folds a history_thinned event.
func (s *State) addThinned(seq record.Seq, p record.ThinnedPayload) {
	s.setThinned(foldThin(s.ix, s.Thinned(), p))
	s.setHead(seq)
}

func (s *State) setHead(seq record.Seq) {
	s.mu.Lock()
	s.head = max(s.head, seq)
	s.mu.Unlock()
}

// Head is the last sequence folded.
func (s *State) Head() record.Seq {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.head
}

// Pruned is the start of history: states below it were pruned by gc (0
// when nothing was). It takes no lock.
func (s *State) Pruned() record.Seq { return record.Seq(s.pruned.Load()) }

// Thinned is the intervals of states thinned away, merged and sorted. It
// takes no lock.
func (s *State) Thinned() []record.ThinInterval {
	if p := s.thinned.Load(); p != nil {
		return *p
	}
	return nil
}

// setThinned replaces the thinned intervals; folds are serialised by the
// caller (the engine's workspace lock, or a single reader).
func (s *State) setThinned(ivs []record.ThinInterval) {
	if len(ivs) == 0 {
		s.thinned.Store(nil)
		return
	}
	s.thinned.Store(&ivs)
}

// IsPerson reports whether the checkpoint at seq is a person's change.
func (s *State) IsPerson(seq record.Seq) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := slices.BinarySearch(s.person, seq)
	return ok
}

// HasPerson reports whether any person's change was recorded after seq.
func (s *State) HasPerson(after record.Seq) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.person) > 0 && s.person[len(s.person)-1] > after
}

// LastRewind is the last rewind's payload and sequence (0 when none).
func (s *State) LastRewind() (record.RewindPayload, record.Seq) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lastRewind, s.lastRewindAt
}
