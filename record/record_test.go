package record

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"
)

// TestNamesTravelExactly: every payload type that carries names writes a
// name that is not UTF-8 as its readable form beside its exact bytes, and
// reads it back byte for byte; a UTF-8 name has no "...Bytes" key; a
// "...Bytes" value that is not base64 is refused.
func TestNamesTravelExactly(t *testing.T) {
	odd, odd2 := "bad\xffname", "dir/\xfe"
	cases := []struct {
		name string
		v    any
		key  string // a key the odd name's bytes must be under
	}{
		{"FileState", &FileState{Path: odd, Kind: KindSymlink, Target: odd2}, `"targetBytes":"`},
		{"Report", &Report{Skipped: []string{"ok", odd}}, `"skippedBytes":["","`},
		{"RewindPayload", &RewindPayload{Paths: []string{odd}, Report: Report{Skipped: []string{}}}, `"pathsBytes":["`},
		{"Foreign", &Foreign{Path: odd, Why: "x"}, `"pathBytes":"`},
		{"PathChange", &PathChange{Path: odd, Action: ActionRestore, Kind: KindFile}, `"pathBytes":"`},
	}
	for _, c := range cases {
		b, err := json.Marshal(c.v)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if !strings.Contains(string(b), c.key) || !strings.Contains(string(b), "bad\uFFFDname") {
			t.Errorf("%s: %s lacks %s or the readable form", c.name, b, c.key)
		}
		back := reflect.New(reflect.TypeOf(c.v).Elem())
		if err := json.Unmarshal(b, back.Interface()); err != nil {
			t.Fatalf("%s: reading back %s: %v", c.name, b, err)
		}
		if !reflect.DeepEqual(back.Interface(), c.v) {
			t.Errorf("%s: read back %+v, want %+v", c.name, back.Elem(), reflect.ValueOf(c.v).Elem())
		}
	}
	b, err := json.Marshal(FileState{Path: "a/b", Kind: KindFile})
	if err != nil || strings.Contains(string(b), "Bytes") {
		t.Errorf("a UTF-8 name: %s, %v; want no ...Bytes key", b, err)
	}
	var fs FileState
	if err := json.Unmarshal([]byte(`{"path":"x","pathBytes":"!!"}`), &fs); err == nil {
		t.Errorf("pathBytes that is not base64 read as %q", fs.Path)
	}
	var r Report
	if err := json.Unmarshal([]byte(`{"skipped":["a","b"],"skippedBytes":[""]}`), &r); err == nil {
		t.Errorf("skippedBytes of the wrong length read as %q", r.Skipped)
	}
}

// TestCheckpointBytes: a checkpoint's and a rewind's JSON keep SPEC's keys
// and their order, byte for byte what zerofs wrote before record existed
// (the expected lines are the output of main 6c5e4ce).
func TestCheckpointBytes(t *testing.T) {
	uid := uint32(1000)
	mt := time.Date(2026, 12, 5, 6, 7, 8, 9, time.UTC)
	cp := Checkpoint{Tool: "edit", Files: []FileState{
		{Path: "a\xff", Kind: KindFile, Blob: strings.Repeat("ab", 32), Bytes: 3, Mode: 0o644, UID: &uid, GID: &uid, MTime: &mt, PID: 7, Comm: "sed"},
		{Path: "gone", Absent: true},
	}}
	b, err := json.Marshal(cp)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"tool":"edit","files":[{"path":"a` + "\uFFFD" + `","kind":"file","blob":"` + strings.Repeat("ab", 32) +
		`","absent":false,"skipped":false,"bytes":3,"mode":420,"uid":1000,"gid":1000,"mtime":"2026-12-05T06:07:08.000000009Z","pid":7,"comm":"sed","pathBytes":"Yf8="},` +
		`{"path":"gone","absent":true,"skipped":false,"bytes":0,"mode":0}]}`
	if string(b) != want {
		t.Errorf("checkpoint JSON\n got %s\nwant %s", b, want)
	}
	b, err = json.Marshal(RewindPayload{Paths: []string{"bad\xffname"}, Report: Report{Skipped: []string{"ok", "x\xfe"}}, Foreign: []Foreign{{Path: "q\xff"}}})
	if err != nil {
		t.Fatal(err)
	}
	want = strings.ReplaceAll(`{"targetSequence":0,"report":{"restored":0,"deleted":0,"skipped":["ok","x?"],"skippedBytes":["","eP4="]},`+
		`"paths":["bad?name"],"foreign":[{"path":"q?","sequence":0,"why":"","pathBytes":"cf8="}],"pathsBytes":["YmFk/25hbWU="]}`, "?", "\uFFFD")
	if string(b) != want {
		t.Errorf("session_rewind JSON\n got %s\nwant %s", b, want)
	}
}

func TestNameRules(t *testing.T) {
	for _, c := range []struct {
		p   string
		err error
	}{
		{"", nil}, {"a", nil}, {"a/b.go", nil}, {"@7x", nil}, {"a/.zero", nil}, {"a/@7", nil},
		{"/a", ErrUnsafePath}, {"a/", ErrUnsafePath}, {"a//b", ErrUnsafePath}, {"./a", ErrUnsafePath},
		{"a/../b", ErrUnsafePath}, {"..", ErrUnsafePath},
		{".zero", ErrReserved}, {".zero/x", ErrReserved}, {"@7", ErrReserved}, {"@007/a", ErrReserved},
	} {
		if err := CleanPath(c.p); !errors.Is(err, c.err) || (c.err == nil) != (err == nil) {
			t.Errorf("CleanPath(%q) = %v, want %v", c.p, err, c.err)
		}
	}
	for name, want := range map[string]Seq{"@7": 7, "@0": 0, "@18446744073709551615": 1<<64 - 1} {
		if got, ok := ParseView(name); !ok || got != want {
			t.Errorf("ParseView(%q) = %d, %v; want %d", name, got, ok, want)
		}
	}
	for _, name := range []string{"@", "@007", "@+7", "@18446744073709551616", "7", "@7a"} {
		if _, ok := ParseView(name); ok {
			t.Errorf("ParseView(%q) names a view", name)
		}
	}
	hex := strings.Repeat("0123456789abcdef", 4)
	if !IsBlobID(hex) || IsBlobID(hex[1:]) || IsBlobID(strings.ToUpper(hex)) || IsBlobID(hex[1:]+"g") {
		t.Error("IsBlobID: wants exactly 64 lower-case hex digits")
	}
	if !IsStashName(StashPrefix+hex[:32]) || IsStashName(StashPrefix+hex[:31]) || IsStashName("q-"+hex[:32]) || IsStashName(StashPrefix+"../"+hex[:29]) {
		t.Error("IsStashName: wants the prefix and 32 lower-case hex digits")
	}
}

// TestCheckEvent: a checkpoint record zerofs never writes is a
// *DamageError naming the line and path, inside ErrCorrupt; a payload that
// does not parse is one too; types zerofs does not read pass unchecked.
func TestCheckEvent(t *testing.T) {
	ev := func(seq Seq, typ, payload string) Event {
		return Event{Seq: seq, Type: typ, Payload: json.RawMessage(payload)}
	}
	good := `{"tool":"t","files":[{"path":"a","kind":"dir","absent":false,"skipped":false,"bytes":0,"mode":493}]}`
	if err := CheckEvent(LogName, ev(3, TypeCheckpoint, good)); err != nil {
		t.Errorf("a good checkpoint: %v", err)
	}
	for _, c := range []struct{ typ, payload, path string }{
		{TypeCheckpoint, `{"tool":"t","files":[{"path":"../etc","kind":"dir"}]}`, "../etc"},
		{TypeCheckpoint, `{"tool":"t","files":[{"path":".zero/x","absent":true}]}`, ".zero/x"},
		{TypeCheckpoint, `{"tool":"t","files":[{"path":"f","kind":"file","blob":"xyz"}]}`, "f"},
		{TypeCheckpoint, `{"tool":"t","files":[{"path":"f","kind":"fifo"}]}`, "f"},
		{TypeCheckpoint, `{"tool":"t","files":[{"path":"f","kind":"dir","mode":65535}]}`, "f"},
		{TypeCheckpoint, `{"tool":"t","files":[{"path":"f","kind":"dir","xattrs":{"security.selinux":""}}]}`, "f"},
		{TypeCheckpoint, `{"tool":"t","files":[{"path":"f","kind":"file","kept":"p-x"}]}`, "f"},
		{TypeCheckpoint, `{"tool":"t","files":"no"}`, ""},
		{TypeRewind, `{"targetSequence":9,"report":{}}`, ""},
		{TypeHistoryPruned, `{"before":9}`, ""},
		{TypeHistoryThinned, `{"before":5,"intervals":[{"after":1,"before":2}]}`, ""},
		{TypeStashNamed, `{"named":[{"sequence":2,"kept":"nope","blob":""}]}`, ""},
	} {
		err := CheckEvent(LogName, ev(9, c.typ, c.payload))
		var de *DamageError
		if !errors.As(err, &de) || !errors.Is(err, ErrCorrupt) || de.Line != 9 || de.File != LogName || de.Path != c.path {
			t.Errorf("%s %s: %v; want a *DamageError at line 9, path %q", c.typ, c.payload, err, c.path)
		}
	}
	if err := CheckEvent(LogName, ev(9, "someone_elses", `not json`)); err != nil {
		t.Errorf("a type zerofs does not read: %v", err)
	}
}

// TestRequestForms: a request names one form, and one that mixes forms is
// refused as a bad request.
func TestRequestForms(t *testing.T) {
	for req, want := range map[*Request]string{
		{Target: 3}: FormRewind, {Target: 3, Paths: []string{"a"}}: FormPaths, {Revert: 4}: FormRevert,
		{Undo: true}: FormUndo, {Redo: true}: FormRedo, {Turn: 5}: FormTurn, {Undo: true, WholeTurn: true}: FormTurn,
	} {
		if got := req.Form(); got != want || req.Check() != nil {
			t.Errorf("%+v: form %q, check %v; want %q", *req, got, req.Check(), want)
		}
	}
	for _, req := range []Request{{Undo: true, Redo: true}, {Target: 2, Revert: 3}, {Revert: 3, Paths: []string{"a"}}, {Target: 1, Force: true}, {WholeTurn: true}} {
		err := req.Check()
		if RefusalOf(err) != RefusedBadRequest || !errors.Is(err, ErrBadRequest) {
			t.Errorf("%+v: %v; want a bad request", req, err)
		}
	}
}
