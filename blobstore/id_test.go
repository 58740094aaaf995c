package blobstore

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestParseID(t *testing.T) {
	good := Sum([]byte("hello")).String()
	tests := []struct {
		name string
		in   string
		ok   bool
	}{
		{"lower-case hex", good, true},
		{"all zeros", strings.Repeat("0", 64), true},
		{"upper-case", strings.ToUpper(good), false},
		{"one upper-case digit", good[:10] + "A" + good[11:], false},
		{"63 digits", good[:63], false},
		{"65 digits", good + "0", false},
		{"empty", "", false},
		{"non-hex letter", good[:63] + "g", false},
		{"space", good[:63] + " ", false},
		{"64 bytes with a two-byte rune", good[:62] + "é", false},
		{"0x prefix", "0x" + good[:62], false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			id, err := ParseID(tt.in)
			if tt.ok {
				if err != nil {
					t.Fatalf("got %v, want nil", err)
				}
				if id.String() != tt.in {
					t.Errorf("got %s back, want %s", id, tt.in)
				}
				return
			}
			if err == nil {
				t.Errorf("got %s, want an error", id)
			}
			if !id.IsZero() {
				t.Errorf("got %s with the error, want the zero ID", id)
			}
		})
	}
}

func TestIDText(t *testing.T) {
	id := Sum([]byte("hello"))
	if got, want := id.String(), "2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824"; got != want {
		t.Errorf("String: got %s, want %s", got, want)
	}
	if got, want := id.Short(), "2cf24dba5fb0"; got != want {
		t.Errorf("Short: got %s, want %s", got, want)
	}
	if id.IsZero() || !(ID{}).IsZero() {
		t.Error("IsZero is wrong")
	}
	b, err := json.Marshal(map[string]ID{"blob": id})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := string(b), `{"blob":"`+id.String()+`"}`; got != want {
		t.Errorf("JSON: got %s, want %s", got, want)
	}
	var back map[string]ID
	if err := json.Unmarshal(b, &back); err != nil || back["blob"] != id {
		t.Errorf("JSON round trip: got %v, %v; want %s", back, err, id)
	}
	if err := json.Unmarshal([]byte(`{"blob":"ABC"}`), &back); err == nil {
		t.Error("JSON with a bad id: got nil, want an error")
	}
}
