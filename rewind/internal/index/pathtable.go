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
func (t *pathTable) find(paths *pathList, p string) (uint32, bool) {
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
		if s>>32 == tag && paths.at(uint32(s)-1).path == p {
			return uint32(s) - 1, true
		}
	}
}

// add records that p is entry id (which need not be in paths yet), unless
// p is there already: then it changes nothing and returns false.
func (t *pathTable) add(paths *pathList, p string, id uint32) bool {
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
		if s>>32 == tag && paths.at(uint32(s)-1).path == p {
			return false
		}
	}
}

// grow doubles the table (every path in it is in paths).
func (t *pathTable) grow(paths *pathList) {
	old := t.slots
	t.slots = make([]uint64, max(8, 2*len(old)))
	mask := uint64(len(t.slots) - 1)
	for _, s := range old {
		if s == 0 {
			continue
		}
		h := maphash.String(t.seed, paths.at(uint32(s)-1).path)
		i := h & mask
		for t.slots[i] != 0 {
			i = (i + 1) & mask
		}
		t.slots[i] = s
	}
}

// pathList is Index.paths: the entries in blocks of pathBlock, so that a
// new path never copies more than a block of entries (one slice of a
// million entries copied its 36 MB into a new 45 MB one at the first path
// added after a mount). The first block grows like a slice, so that a small
// index stays small: an entry (at) is not to be kept past an add.
type pathList struct {
	blocks [][]pathRecords
	n      uint32
}

const pathBlock = 1 << 14

// at is entry id (id < n).
func (l *pathList) at(id uint32) *pathRecords {
	return &l.blocks[id/pathBlock][id%pathBlock]
}

// add appends pr as entry n.
func (l *pathList) add(pr pathRecords) {
	switch {
	case len(l.blocks) == 0:
		l.blocks = [][]pathRecords{nil}
	case l.n%pathBlock == 0:
		l.blocks = append(l.blocks, make([]pathRecords, 0, pathBlock))
	}
	b := &l.blocks[len(l.blocks)-1]
	*b = append(*b, pr)
	l.n++
}
