package merge

import (
	"errors"
	"strings"
	"testing"
)

// TestTree: each rule of the per-path merge, and the directory rule.
func TestTree(t *testing.T) {
	file := func(hash string, mode uint32) Node { return Node{Kind: File, Hash: hash, Mode: mode} }
	dir := Node{Kind: Dir, Mode: 0o755}
	none := Node{}
	texts := map[Side]map[string]string{
		Base:   {"t": "1\n2\n3\n4\n"},
		Ours:   {"t": "ONE\n2\n3\n4\n"},
		Theirs: {"t": "1\n2\n3\nFOUR\n"},
	}
	read := func(s Side, p string) ([]byte, error) { return []byte(texts[s][p]), nil }
	cases := []struct {
		name       string
		b, o, t    Node
		want       Action
		wantNode   Node
		wantMerged string
	}{
		{"theirs only", file("a", 0o644), file("a", 0o644), file("b", 0o644), Take, file("b", 0o644), ""},
		{"ours only", file("a", 0o644), file("b", 0o644), file("a", 0o644), Keep, file("b", 0o644), ""},
		{"same change", file("a", 0o644), file("b", 0o644), file("b", 0o644), Keep, file("b", 0o644), ""},
		{"added by theirs", none, none, file("b", 0o644), Take, file("b", 0o644), ""},
		{"removed by theirs", file("a", 0o644), file("a", 0o644), none, Take, none, ""},
		{"removed by both", file("a", 0o644), none, none, Keep, none, ""},
		{"modify/delete", file("a", 0o644), file("b", 0o644), none, Conflict, none, ""},
		{"delete/modify", file("a", 0o644), none, file("b", 0o644), Conflict, none, ""},
		{"mode here, content there", file("a", 0o644), file("a", 0o755), file("b", 0o644), Combine, file("b", 0o755), ""},
		{"both modes", file("a", 0o644), file("a", 0o755), file("a", 0o600), Conflict, none, ""},
		{"file/dir", none, file("a", 0o644), dir, Conflict, none, ""},
		{"symlink targets", Node{Kind: Symlink, Target: "x"}, Node{Kind: Symlink, Target: "y"}, Node{Kind: Symlink, Target: "z"}, Conflict, none, ""},
		{"xattr each side", Node{Kind: Dir, Mode: 0o755}, Node{Kind: Dir, Mode: 0o755, Xattrs: map[string][]byte{"user.a": []byte("1")}},
			Node{Kind: Dir, Mode: 0o755, Xattrs: map[string][]byte{"user.b": []byte("2")}}, Combine,
			Node{Kind: Dir, Mode: 0o755, Xattrs: map[string][]byte{"user.a": []byte("1"), "user.b": []byte("2")}}, ""},
		{"xattr both", Node{Kind: Dir, Mode: 0o755}, Node{Kind: Dir, Mode: 0o755, Xattrs: map[string][]byte{"user.a": []byte("1")}},
			Node{Kind: Dir, Mode: 0o755, Xattrs: map[string][]byte{"user.a": []byte("2")}}, Conflict, none, ""},
		{"text lines", file("b", 0o644), file("o", 0o644), file("t", 0o644), Combine, file("", 0o644), "ONE\n2\n3\nFOUR\n"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			res, err := Tree([]Path{{Path: "t", Base: c.b, Ours: c.o, Theirs: c.t}}, Options{Read: read})
			if err != nil {
				t.Fatal(err)
			}
			r := res[0]
			if r.Action != c.want {
				t.Fatalf("got %s (%s), want %s", r.Action, r.Why, c.want)
			}
			if c.want != Conflict && !final(r).Equal(c.wantNode) {
				t.Errorf("got %+v, want %+v", final(r), c.wantNode)
			}
			if string(r.Content) != c.wantMerged {
				t.Errorf("merged %q, want %q", r.Content, c.wantMerged)
			}
		})
	}
}

// TestTreeDirectories: a directory one side removes while the other adds
// beneath it conflicts on both paths; settling takes one side for both,
// and a settlement that leaves a path without its directory is refused.
func TestTreeDirectories(t *testing.T) {
	dir := Node{Kind: Dir, Mode: 0o755}
	f := Node{Kind: File, Hash: "a", Mode: 0o644}
	paths := []Path{
		{Path: "d", Base: dir, Ours: Node{}, Theirs: dir},
		{Path: "d/new", Base: Node{}, Ours: Node{}, Theirs: f},
	}
	res, err := Tree(paths, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if res[0].Action != Conflict || res[1].Action != Conflict || !strings.Contains(res[0].Why, "removes or replaces this directory") {
		t.Fatalf("got %+v", res)
	}
	for _, side := range []Side{Ours, Theirs} {
		res, err := Tree(paths, Options{Settle: func(string) (Side, bool) { return side, true }})
		if err != nil {
			t.Fatalf("settled as %s: %v", side, err)
		}
		if final(res[0]).Kind == Dir != (side == Theirs) || final(res[1]).Kind == File != (side == Theirs) {
			t.Errorf("settled as %s: got %+v", side, res)
		}
	}
	// Theirs for d/new alone, ours for d: d/new would have no directory.
	mixed := func(p string) (Side, bool) {
		if p == "d" {
			return Ours, true
		}
		return Theirs, true
	}
	if _, err := Tree([]Path{{Path: "d", Base: dir, Ours: Node{}, Theirs: Node{Kind: Dir, Mode: 0o700}}, paths[1]}, Options{Settle: mixed}); !errors.Is(err, ErrSettle) {
		t.Errorf("a broken settlement: got %v, want ErrSettle", err)
	}
}
