package control

import (
	"bytes"
	"errors"
	"reflect"
	"testing"
	"unicode/utf8"

	"github.com/zerofs/zerofs/record"
)

func TestParseRewind(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want record.Request
	}{
		{"42", record.Request{Target: 42}},
		{" 7\n", record.Request{Target: 7}},
		{`{"target": 3}`, record.Request{Target: 3}},
		{`{"target": 3, "paths": ["a/b.go", "c"]}`, record.Request{Target: 3, Paths: []string{"a/b.go", "c"}}},
		{`{"undo": true}`, record.Request{Undo: true}},
		{`{"redo": true}` + "\n", record.Request{Redo: true}},
		{`{"revert": 9, "force": true, "dryRun": true}`, record.Request{Revert: 9, Force: true, DryRun: true}},
		{`{"undo": true, "dryRun": true, "session": "s1"}`, record.Request{Undo: true, DryRun: true, Session: "s1"}},
		{`{"target": 0, "paths": [""]}`, record.Request{Paths: []string{""}}},
		{`{"turn": 12}`, record.Request{Turn: 12}},
		{`{"undo": true, "turn": true, "dryRun": true}`, record.Request{Undo: true, WholeTurn: true, DryRun: true}},
		{`{"branch": {"dir": "/w/b"}}`, record.Request{Branch: &record.BranchRequest{Dir: "/w/b"}}},
		{`{"branch": {"dir": "/w/b", "at": 0}}`, record.Request{Branch: &record.BranchRequest{Dir: "/w/b", At: new(record.Seq)}}},
		{`{"branch": {"delete": "0123456789abcdef"}}`, record.Request{Branch: &record.BranchRequest{Delete: "0123456789abcdef"}}},
	} {
		got, err := ParseRewind([]byte(tc.in))
		if err != nil || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("ParseRewind(%q) = %+v, %v; want %+v", tc.in, got, err, tc.want)
		}
		// What a client formats, the daemon parses back the same.
		back, err := ParseRewind(FormatRewind(got))
		if err != nil || !reflect.DeepEqual(back, got) {
			t.Errorf("ParseRewind(%q.Format() = %q) = %+v, %v", tc.in, FormatRewind(got), back, err)
		}
	}
	for _, bad := range []string{"", "x", "-1", "1.5", "1 2", `{}`, `{"undo": true, "redo": true}`,
		`{"target": 1, "undo": true}`, `{"undo": true, "paths": ["a"]}`, `{"target": -1}`,
		`{"target": 1, "paths": []}`, `{"target": 1, "paths": ["../x"]}`, `{"target": 1, "paths": [".zero/x"]}`,
		`{"target": 1, "bogus": 2}`, `{"target": 1}{"target": 2}`, `{"target": "1"}`, `{"revert": 0}`, `{"target": 1, "force": true}`, `{"revert": 2, "paths": ["a"]}`,
		`{"turn": true}`, `{"redo": true, "turn": true}`, `{"undo": true, "turn": false}`, `{"turn": 0}`, `{"turn": "3"}`, `{"undo": true, "turn": 3}`,
		`{"branch": {"dir": "w/b"}}`, `{"branch": {"dir": "/w/../b"}}`, `{"branch": {"dir": "/w/b"}, "undo": true}`, `{"branch": {"dir": "/w/b", "bogus": 1}}`} {
		if got, err := ParseRewind([]byte(bad)); !errors.Is(err, ErrBadRequest) {
			t.Errorf("ParseRewind(%q) = %+v, %v; want ErrBadRequest", bad, got, err)
		}
	}
}

func TestStep(t *testing.T) {
	for _, tc := range []struct {
		label string
		extra string
		want  StepRequest
	}{
		{"fix the bug", "", StepRequest{Label: "fix the bug"}},
		{`{"looks": "like json"}`, "", StepRequest{Label: `{"looks": "like json"}`, Payload: []byte(`{"name":"{\"looks\": \"like json\"}"}`)}},
		{"Edit", `{"input": {"file": "a.go"}}`, StepRequest{Label: "Edit", Payload: []byte(`{"input":{"file":"a.go"},"name":"Edit"}`)}},
	} {
		var extra []byte
		if tc.extra != "" {
			extra = []byte(tc.extra)
		}
		req, err := FormatStep(tc.label, extra)
		if err != nil {
			t.Fatal(err)
		}
		got := ParseStep(req)
		if got.Label != tc.want.Label || string(got.Payload) != string(tc.want.Payload) {
			t.Errorf("ParseStep(FormatStep(%q, %s)) = %q %s; want %q %s", tc.label, tc.extra, got.Label, got.Payload, tc.want.Label, tc.want.Payload)
		}
	}
	if got := ParseStep([]byte(`{"tool_input": 1}`)); got.Label != DefaultLabel {
		t.Errorf("a JSON step without a name is labelled %q, want %q", got.Label, DefaultLabel)
	}
	if _, err := FormatStep("two\nlines", nil); !errors.Is(err, ErrBadRequest) {
		t.Errorf("FormatStep of two lines: %v, want ErrBadRequest", err)
	}
	if got := string(StepReport{Sequence: 4, Label: "a b"}.Format()); got != "4 a b\n" {
		t.Errorf("step report: %q", got)
	}
}

// TestNonUTF8PathsRoundTrip: issue 14, defect 4. A mounted `zerofs rewind
// SEQ -- bad\xff` sent "bad\uFFFD" (encoding/json's stand-in for the byte)
// and rewound that other file. Requests and reports carry such names by
// their bytes (pathsBytes, conflictsBytes, skippedBytes, a preview's
// pathBytes); a request that is not UTF-8 is refused, never guessed at.
func TestNonUTF8PathsRoundTrip(t *testing.T) {
	names := []string{"bad\xff", "bad\xfe", "bad\ufffd", "d/ok"}
	req := record.Request{Target: 3, Paths: names, DryRun: true}
	text := FormatRewind(req)
	if !utf8.Valid(text) || !bytes.Contains(text, []byte(`"pathsBytes":["YmFk/w==","YmFk/g==","",""]`)) {
		t.Errorf("FormatRewind = %s", text)
	}
	back, err := ParseRewind(text)
	if err != nil || !reflect.DeepEqual(back, req) {
		t.Errorf("ParseRewind(FormatRewind) = %q, %v; want %q", back.Paths, err, names)
	}
	for _, bad := range []string{"{\"target\": 1, \"paths\": [\"bad\xff\"]}", `{"target": 1, "paths": ["a"], "pathsBytes": ["", "YQ=="]}`,
		`{"target": 1, "paths": ["a"], "pathsBytes": ["!"]}`, `{"target": 1, "paths": ["a"], "pathsBytes": ["Li4="]}`} {
		if got, err := ParseRewind([]byte(bad)); !errors.Is(err, ErrBadRequest) {
			t.Errorf("ParseRewind(%q) = %q, %v; want ErrBadRequest", bad, got.Paths, err)
		}
	}
	rep := RewindReport{TargetSequence: 3, Paths: names, Conflicts: names[:2],
		Report:  record.Report{Restored: 1, Skipped: names[1:]},
		Preview: []record.PathChange{{Path: "bad\xff", Action: record.ActionRestore, Kind: record.KindFile}},
		Foreign: []record.Foreign{{Path: "bad\xfe", Seq: 2, Why: "outside"}}}
	b, err := JSONLine(rep)
	if err != nil || !utf8.Valid(b) {
		t.Fatalf("JSONLine = %q, %v", b, err)
	}
	got, err := ParseRewindReport(b)
	if err != nil || !reflect.DeepEqual(got, rep) {
		t.Errorf("report round trip:\n got %+v, %v\nwant %+v\njson %s", got, err, rep, b)
	}
}

// A no-such-path refusal names its paths by their bytes across the
// daemon's report: a name that is not UTF-8 comes back exactly.
func TestRefusalMissingBytes(t *testing.T) {
	err := &record.RefusedError{Refusal: record.RefusedNoSuchPath, Missing: []string{"ok.txt", "bad\xff"}}
	b, jerr := JSONLine(ReportOf(record.RewindResult{}, err))
	if jerr != nil {
		t.Fatal(jerr)
	}
	rep, perr := ParseRewindReport(b)
	if perr != nil {
		t.Fatal(perr)
	}
	var re *record.RefusedError
	if !errors.As(rep.Err(), &re) || re.Refusal != record.RefusedNoSuchPath || len(re.Missing) != 2 || re.Missing[1] != "bad\xff" || re.Missing[0] != "ok.txt" {
		t.Errorf("round trip of %q: %+v (%s)", err.Missing, re, b)
	}
}
