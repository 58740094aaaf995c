package mcpserver

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/jsonschema-go/jsonschema"
)

// TestBadNumber: an integer argument that is not a whole number in range
// is refused in words naming the argument, before the SDK decodes it.
func TestBadNumber(t *testing.T) {
	s, err := jsonschema.For[mcpLogArgs](nil)
	if err != nil {
		t.Fatal(err)
	}
	plainSchema(s)
	one := 1.0
	s.Properties["n"].Minimum = &one
	for _, tc := range []struct{ args, want string }{
		{`{"n": 5}`, ""},
		{`{}`, ""},
		{`{"n": 1.5}`, "n: 1.5 is not a whole number"},
		{`{"n": "x"}`, `n: want a whole number, got "x"`},
		{`{"n": 0}`, "n: 0 is less than 1"},
		{`{"n": 1e20}`, "n: 1e20 is larger than any sequence can be"},
	} {
		if got := badNumber(s, json.RawMessage(tc.args)); !strings.HasPrefix(got, tc.want) || (tc.want == "") != (got == "") {
			t.Errorf("badNumber(%s) = %q, want %q", tc.args, got, tc.want)
		}
	}
}

// TestArgPaths: paths_bytes names a path by its exact bytes, at its
// position in paths or alone; a path that is not a clean workspace path is
// refused naming its index.
func TestArgPaths(t *testing.T) {
	got, err := mcpArgPaths([]string{"a", "b\ufffd"}, []string{"", "Yv8="})
	if err != nil || len(got) != 2 || got[0] != "a" || got[1] != "b\xff" {
		t.Errorf("mcpArgPaths with bytes: %q, %v", got, err)
	}
	if got, err := mcpArgPaths(nil, []string{"Yv8="}); err != nil || len(got) != 1 || got[0] != "b\xff" {
		t.Errorf("mcpArgPaths with bytes alone: %q, %v", got, err)
	}
	for _, tc := range []struct {
		paths, b64 []string
		want       string
	}{
		{[]string{"../x"}, nil, "paths[0]"},
		{[]string{"a", "b"}, []string{"Yg=="}, "paths_bytes has 1 entries for 2 paths"},
		{nil, []string{""}, "paths_bytes[0] is empty"},
		{[]string{"a"}, []string{"!"}, "paths_bytes[0]: not base64"},
	} {
		if _, err := mcpArgPaths(tc.paths, tc.b64); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("mcpArgPaths(%q, %q): %v, want %q", tc.paths, tc.b64, err, tc.want)
		}
	}
}
