package index

import "hash/maphash"

// pathTable maps a workspace path to its entry in Index.paths. It holds no
// strings of its own: each slot is a path's entry number plus one (0 is an
// empty slot) in its lower 32 bits and the upper half of the path's hash in
// its upper 32 bits, and a hit is confirmed against the path in the entry.
// So it has no pointers for the GC to scan and takes 8-16 bytes a path,
// where a map[string]uint32 took about 30 with its string headers (at a
// million paths, the index's largest part after the records themselves).
// Open addressing with linear probing, at most three quarters full.
type pathTable struct {
	seed  maphash.Seed
	slots []uint64
	n     int
}

// newPathTable returns a table with room for n paths before it grows.
func newPathTable(n int) pathTable {
	t := pathTable{seed: maphash.MakeSeed()}
	t.slots = make([]uint64, tableSize(n))
	return t
}

// tableSize is the smallest power of two of at least 8 slots that holds n
// paths three quarters full.
func tableSize(n int) int {
	size := 8
	for size/4*3 < n {
		size *= 2
	}
	return size
}

// find returns p's entry number.
func (t *pathTable) find(paths []pathRecords, p string) (uint32, bool) {
	if t.n == 0 {
		return 0, false
	}
	h := maphash.String(t.seed, p)
	mask, tag := uint64(len(t.slots)-1), h>>32
	for i := h & mask; ; i = (i + 1) & mask {
		s := t.slots[i]
		if s == 0 {
			return 0, false
		}
		if s>>32 == tag && paths[uint32(s)-1].path == p {
			return uint32(s) - 1, true
		}
	}
}

// add records that p is entry id (paths[id] need not exist yet), unless
// p is there already: then it changes nothing and returns false.
func (t *pathTable) add(paths []pathRecords, p string, id uint32) bool {
	if (t.n+1)*4 > len(t.slots)*3 {
		t.grow(paths)
	}
	h := maphash.String(t.seed, p)
	mask, tag := uint64(len(t.slots)-1), h>>32
	for i := h & mask; ; i = (i + 1) & mask {
		s := t.slots[i]
		if s == 0 {
			t.slots[i] = tag<<32 | uint64(id+1)
			t.n++
			return true
		}
		if s>>32 == tag && paths[uint32(s)-1].path == p {
			return false
		}
	}
}

// grow doubles the table (every path in it is in paths).
func (t *pathTable) grow(paths []pathRecords) {
	old := t.slots
	t.slots = make([]uint64, max(8, 2*len(old)))
	mask := uint64(len(t.slots) - 1)
	for _, s := range old {
		if s == 0 {
			continue
		}
		h := maphash.String(t.seed, paths[uint32(s)-1].path)
		i := h & mask
		for t.slots[i] != 0 {
			i = (i + 1) & mask
		}
		t.slots[i] = s
	}
}
