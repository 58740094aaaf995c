package history

import (
	"testing"

	"github.com/zerofs/zerofs/record"
)

// A rename record's two sides (the directory deleted, the one added) are
// one rename in a block's changes; other changes are left alone.
func TestDirRenamesPairsARenameRecord(t *testing.T) {
	b := &Block{Files: []record.FileState{
		{Path: "src", Kind: record.KindDir, RenamedTo: "lib"},
		{Path: "lib", Absent: true, RenamedFrom: "src"},
		{Path: "old", Kind: record.KindDir},
	}}
	cs := []Change{
		{Path: "lib", Change: ChangeAdded, Kind: string(record.KindDir)},
		{Path: "old", Change: ChangeDeleted, Kind: string(record.KindDir)},
		{Path: "src", Change: ChangeDeleted, Kind: string(record.KindDir), PID: 7, Comm: "mv"},
	}
	got := dirRenames(b, cs)
	if len(got) != 2 || got[0].Path != "lib" || got[0].Change != ChangeRenamed || got[0].From != "src" || got[0].Comm != "mv" ||
		got[1].Path != "old" || got[1].Change != ChangeDeleted {
		t.Fatalf("dirRenames = %+v", got)
	}
}
