package quote

import (
	"strings"
	"testing"
)

func TestName(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"a/b.go", "a/b.go"},
		{"with space.txt", "with space.txt"},
		{"café/naïve.txt", "café/naïve.txt"},
		{"日本語", "日本語"},
		{"", ""},
		{"a\nb", `"a\nb"`},
		{"tab\there", `"tab\there"`},
		{"\x1b[2K\x1b[1Aforged", `"\033[2K\033[1Aforged"`},
		{"bad\xff", `"bad\377"`},
		{"bad\xfe", `"bad\376"`},
		{"bad\ufffd", `"bad\357\277\275"`},
		{`quo"te`, `"quo\"te"`},
		{`back\slash`, `"back\\slash"`},
		{"del\x7f", `"del\177"`},
		{"csi\u009b31m", `"csi\302\23331m"`},
		{"rtl\u202eexe.txt", `"rtl\342\200\256exe.txt"`},
		{"line\u2028sep", `"line\342\200\250sep"`},
		{"cr\rlf", `"cr\rlf"`},
	} {
		if got := Name(tc.in); got != tc.want {
			t.Errorf("Name(%q) = %s, want %s", tc.in, got, tc.want)
		}
		if got := Needed(tc.in); got != (tc.in != tc.want) {
			t.Errorf("Needed(%q) = %v, want %v", tc.in, got, tc.in != tc.want)
		}
	}
}

// TestNameNeverPrintsControls: whatever the bytes, the quoted form holds
// no control byte, no newline and nothing that is not UTF-8, so it cannot
// move the cursor or split a line.
func TestNameNeverPrintsControls(t *testing.T) {
	for c := 0; c < 256; c++ {
		for _, s := range []string{string([]byte{byte(c)}), "x" + string([]byte{byte(c)}) + "y", string([]byte{0xc2, byte(c)})} {
			q := Name(s)
			for i := 0; i < len(q); i++ {
				if q[i] < 0x20 || q[i] == 0x7f {
					t.Fatalf("Name(%q) = %q holds byte %#x", s, q, q[i])
				}
			}
			if strings.ContainsRune(q, '\u009b') || strings.ContainsRune(q, '\ufffd') {
				t.Fatalf("Name(%q) = %q holds a C1 control or U+FFFD", s, q)
			}
		}
	}
}

func TestNames(t *testing.T) {
	if got, want := Names([]string{"a", "b\nc"}, ", "), `a, "b\nc"`; got != want {
		t.Errorf("Names = %s, want %s", got, want)
	}
}

func TestLine(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"plain error", "plain error"},
		{`open "x": no such file`, `open "x": no such file`},
		{"a\nb\n", "a; b"},
		{"x\x1b[2Ky: bad\xff", `x\033[2Ky: bad\377`},
	} {
		if got := Line(tc.in); got != tc.want {
			t.Errorf("Line(%q) = %s, want %s", tc.in, got, tc.want)
		}
	}
}
