package index

import (
	"fmt"
	"testing"
)

// TestPathTable: the table finds every path added (entries over several
// blocks of the path list), from an empty table
// (growing) and from one sized up front, refuses a path added twice, and
// finds none it was not given, as a map would.
func TestPathTable(t *testing.T) {
	for _, sized := range []bool{false, true} {
		const n = 3*pathBlock + 5 // several blocks of entries
		var tab pathTable
		if sized {
			tab = newPathTable(n)
		} else {
			tab = newPathTable(0)
		}
		var paths pathList
		want := map[string]uint32{}
		for i := range n {
			p := fmt.Sprintf("d%d/f%d", i%13, i)
			if i == 0 {
				p = "" // the root
			}
			id := paths.n
			if !tab.add(&paths, p, id) {
				t.Fatalf("add(%q) refused a new path", p)
			}
			paths.add(pathRecords{path: p})
			want[p] = id
			if i%7 == 0 && tab.add(&paths, p, id+1) {
				t.Fatalf("add(%q) took a path already there", p)
			}
		}
		if tab.n != n {
			t.Fatalf("n = %d, want %d", tab.n, n)
		}
		for p, id := range want {
			if got, ok := tab.find(&paths, p); !ok || got != id {
				t.Fatalf("find(%q) = %d, %v; want %d", p, got, ok, id)
			}
		}
		for _, p := range []string{"d1", "d1/f2x", "f1", "d0/f13/x"} {
			if id, ok := tab.find(&paths, p); ok {
				t.Fatalf("find(%q) = %d for a path never added", p, id)
			}
		}
	}
	var empty pathTable
	if _, ok := empty.find(&pathList{}, "a"); ok {
		t.Fatal("the zero table found a path")
	}
}
