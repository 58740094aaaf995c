package blobstore

import (
	"path/filepath"
	"testing"
)

// phaseRec records what a Prune tells its Progress, phase by phase.
type phaseRec struct {
	what, noun                 string
	items, bytes, doneN, doneB int64
}

type progressRec struct{ phases []phaseRec }

func (p *progressRec) Begin(what string, items, bytes int64) {
	p.BeginCounting(what, "files", items, bytes)
}

func (p *progressRec) BeginCounting(what, noun string, items, bytes int64) {
	p.phases = append(p.phases, phaseRec{what: what, noun: noun, items: items, bytes: bytes})
}

func (p *progressRec) Add(items, bytes int64) {
	ph := &p.phases[len(p.phases)-1]
	ph.doneN += items
	ph.doneB += bytes
}

// TestPruneProgress: a Prune tells its Progress each phase it has work for
// (loose blobs removed, packs rewritten, kept blobs absorbed) with its
// totals, and counts every item and byte of each as done by its end: the
// hook `zerofs gc` draws its bar from (it showed only a spinner).
func TestPruneProgress(t *testing.T) {
	base := t.TempDir()
	s := openT(t, Options{})
	var packedKeep, packedDrop []ID
	for i := range 20 {
		id := putT(t, s, randBytes(uint64(i), 10_000))
		if i%2 == 0 {
			packedKeep = append(packedKeep, id)
		} else {
			packedDrop = append(packedDrop, id)
		}
	}
	if err := s.Sync(); err != nil {
		t.Fatal(err)
	}
	var looseDrop []ID // blobs in files of their own (kept) that nothing keeps
	for i := range 5 {
		looseDrop = append(looseDrop, keepT(t, s, filepath.Join(base, "ws"), randBytes(uint64(100+i), 3000)))
	}
	var kept []ID
	for i := range 3 {
		kept = append(kept, keepT(t, s, filepath.Join(base, "ws"), randBytes(uint64(200+i), 5000)))
	}
	keep := map[ID]bool{}
	for _, id := range append(packedKeep, kept...) {
		keep[id] = true
	}
	st, err := s.Stats()
	if err != nil {
		t.Fatal(err)
	}
	packs := st.Packs
	var pr progressRec
	res, err := s.PruneWith(func(id ID) bool { return keep[id] }, &pr)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Removed) != len(packedDrop)+len(looseDrop) || res.Repacked != packs || res.Absorbed != len(kept) {
		t.Fatalf("Prune: %+v; want %d removed, %d packs rewritten, %d absorbed", res, len(packedDrop)+len(looseDrop), packs, len(kept))
	}
	type phase struct {
		noun string
		n    int64
	}
	want := map[string]phase{
		"gc: remove blobs":      {"blobs", int64(len(looseDrop))},
		"gc: repack":            {"records", int64(len(packedKeep))},
		"gc: delete packs":      {"packs", int64(packs)}, // the packs rewritten
		"gc: absorb kept blobs": {"blobs", int64(len(kept))},
	}
	if len(pr.phases) != len(want) {
		t.Fatalf("phases %+v, want %v", pr.phases, want)
	}
	for _, ph := range pr.phases {
		if w, ok := want[ph.what]; !ok || ph.noun != w.noun || ph.items != w.n || ph.bytes <= 0 || ph.doneN != ph.items || ph.doneB != ph.bytes {
			t.Errorf("phase %+v: want %d %s with their bytes, all done", ph, w.n, w.noun)
		}
	}
	for _, id := range packedKeep {
		if !s.Has(id) {
			t.Errorf("kept blob %s gone", id.Short())
		}
	}
}

// TestPruneProgressDeadPacks: a Prune that only deletes packs left with
// nothing kept tells its Progress how many and their bytes (a gc of only
// those showed a spinner): one phase, every pack and byte of it done.
func TestPruneProgressDeadPacks(t *testing.T) {
	s := openT(t, Options{PackSize: 64 << 10})
	var drop, keep []ID
	for i := range 40 {
		id := putT(t, s, randBytes(uint64(i), 10_000))
		if i < 30 {
			drop = append(drop, id)
		} else {
			keep = append(keep, id)
		}
		if i == 29 {
			// The packs so far hold only what goes; the next ones only
			// what stays.
			if err := s.seal(true); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := s.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := s.seal(true); err != nil {
		t.Fatal(err)
	}
	kept := map[ID]bool{}
	for _, id := range keep {
		kept[id] = true
	}
	var dead, deadBytes int64
	s.mu.RLock()
	for _, p := range s.packs {
		all := true
		for id, l := range s.index {
			if l.p == p && kept[id] {
				all = false
			}
		}
		if all {
			dead++
			deadBytes += p.size
		}
	}
	s.mu.RUnlock()
	if dead < 2 {
		t.Fatalf("%d packs hold only blobs to drop; the test wants several", dead)
	}
	var pr progressRec
	res, err := s.PruneWith(func(id ID) bool { return kept[id] }, &pr)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Removed) != len(drop) || res.Repacked != 0 {
		t.Fatalf("Prune: %+v; want %d removed, no pack rewritten", res, len(drop))
	}
	want := phaseRec{what: "gc: delete packs", noun: "packs", items: dead, bytes: deadBytes, doneN: dead, doneB: deadBytes}
	if len(pr.phases) != 1 || pr.phases[0] != want {
		t.Fatalf("phases %+v, want only %+v", pr.phases, want)
	}
	for _, id := range keep {
		if !s.Has(id) {
			t.Errorf("kept blob %s gone", id.Short())
		}
	}
}
