package blobstore

import (
	"path/filepath"
	"testing"
)

// phaseRec records what a Prune tells its Progress, phase by phase.
type phaseRec struct {
	what                       string
	items, bytes, doneN, doneB int64
}

type progressRec struct{ phases []phaseRec }

func (p *progressRec) Begin(what string, items, bytes int64) {
	p.phases = append(p.phases, phaseRec{what: what, items: items, bytes: bytes})
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
	var looseDrop []ID
	for i := range 5 {
		looseDrop = append(looseDrop, putLoose(t, s.Dir(), randBytes(uint64(100+i), 3000)))
	}
	var kept []ID
	for i := range 3 {
		kept = append(kept, keepT(t, s, filepath.Join(base, "ws"), randBytes(uint64(200+i), 5000)))
	}
	keep := map[ID]bool{}
	for _, id := range append(packedKeep, kept...) {
		keep[id] = true
	}
	var pr progressRec
	res, err := s.PruneWith(func(id ID) bool { return keep[id] }, &pr)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Removed) != len(packedDrop)+len(looseDrop) || res.Repacked == 0 || res.Absorbed != len(kept) {
		t.Fatalf("Prune: %+v; want %d removed, a pack rewritten, %d absorbed", res, len(packedDrop)+len(looseDrop), len(kept))
	}
	want := map[string]int64{"gc: remove blobs": int64(len(looseDrop)), "gc: repack": int64(len(packedKeep)), "gc: absorb kept blobs": int64(len(kept))}
	if len(pr.phases) != len(want) {
		t.Fatalf("phases %+v, want %v", pr.phases, want)
	}
	for _, ph := range pr.phases {
		if n, ok := want[ph.what]; !ok || ph.items != n || ph.bytes <= 0 || ph.doneN != ph.items || ph.doneB != ph.bytes {
			t.Errorf("phase %+v: want %d items with their bytes, all done", ph, n)
		}
	}
	for _, id := range packedKeep {
		if !s.Has(id) {
			t.Errorf("kept blob %s gone", id.Short())
		}
	}
}
