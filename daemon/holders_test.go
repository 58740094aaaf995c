package daemon

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// What /proc says of another process is that process's to choose (its
// command name, its paths): the parsers take only what the format says
// and skip what does not fit it, and a holder is printed quoted.
func TestProcParsersTakeOnlyTheFormat(t *testing.T) {
	maps := strings.Join([]string{
		"7f00-7f01 r--p 00000000 00:5a 12 /ws/a file with spaces",
		"7f01-7f02 r--p 00000000 00:5a 12 /ws/a file with spaces",
		"7f02-7f03 r-xp 00000000 fd:01 99 /usr/lib/libc.so.6",
		"7f03-7f04 rw-p 00000000 00:00 0 ",
		"7f04-7f05 r--p 00000000 00:5a 13 /ws/gone (deleted)",
		"garbage",
		"7f05-7f06 r--p 00000000 00:5a",
		"7f06-7f07 r--p 00000000 00:5a 14 /ws/x\tzerofs: forged",
	}, "\n") + "\n"
	p := filepath.Join(t.TempDir(), "maps")
	if err := os.WriteFile(p, []byte(maps), 0o600); err != nil {
		t.Fatal(err)
	}
	got := mappedIn(p, map[string]bool{"00:5a": true})
	want := []string{"/ws/a file with spaces", "/ws/gone (deleted)", "/ws/x\tzerofs: forged"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("mappedIn = %q, want %q", got, want)
	}

	for _, tc := range []struct {
		in   string
		id   int
		want bool
	}{
		{"pos:\t0\nflags:\t0100000\nmnt_id:\t42\nino:\t7\n", 42, true},
		{"pos:\t0\nmnt_id:\tx42\n", 0, false},
		{"pos:\t0\n", 0, false},
	} {
		id, ok := fdinfoMount([]byte(tc.in))
		if id != tc.id || ok != tc.want {
			t.Errorf("fdinfoMount(%q) = %d, %v; want %d, %v", tc.in, id, ok, tc.id, tc.want)
		}
	}

	h := Holder{PID: 7, Comm: "evil\nzerofs: ok", Uses: []Use{{"working directory", "/ws/a\nb"}}, More: 2}
	if s := h.String(); strings.Contains(s, "\n") || !strings.Contains(s, `pid 7 ("evil\nzerofs: ok": working directory "/ws/a\nb" and 2 more)`) {
		t.Errorf("Holder.String() = %q", s)
	}
}
