package eventlog

import (
	"bytes"
	"context"
	"encoding/json"
	"path/filepath"
	"testing"
	"time"

	"github.com/zerofs/zerofs/record"
)

// createdAtLayout is SPEC's createdAt: RFC 3339 in UTC with all nine
// fractional digits.
const createdAtLayout = "2006-01-02T15:04:05.000000000Z07:00"

// oldEnvelope is how the envelope was written before AppendJSON: a struct
// through encoding/json. AppendJSON must write the same bytes, so that a
// log's lines do not change form with the version that wrote them.
func oldEnvelope(t *testing.T, e record.Event) []byte {
	t.Helper()
	b, err := json.Marshal(struct {
		ID        string          `json:"id"`
		SessionID string          `json:"sessionId"`
		Seq       record.Seq      `json:"sequence"`
		Type      string          `json:"type"`
		CreatedAt string          `json:"createdAt"`
		Payload   json.RawMessage `json:"payload"`
	}{e.ID, e.SessionID, e.Seq, e.Type, e.CreatedAt.UTC().Format(createdAtLayout), e.Payload})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestEnvelopeBytes: AppendJSON writes exactly what encoding/json wrote,
// for plain and odd strings (escapes, HTML characters, bytes that are not
// UTF-8, U+2028) and for payloads as marshalPayload makes them; an Append
// writes such lines and reads them back.
func TestEnvelopeBytes(t *testing.T) {
	at := time.Date(2026, 12, 4, 23, 5, 6, 7000, time.FixedZone("x", 3600))
	strs := []string{"", "0123abcd", "session-Ä", "a\"b\\c", "<&>", "tab\there\n", "bad\xffutf8", "line\u2028sep", "\x00\x1f\x7f"}
	payloads := []any{nil, map[string]any{"path": "a<b>&c", "n": 1}, json.RawMessage(` { "a" : [1, 2, "<x>"] } `), []string{"bad\xfe", "\u2029"}}
	for _, s := range strs {
		for _, p := range payloads {
			raw, err := marshalPayload(p)
			if err != nil {
				t.Fatal(err)
			}
			e := record.Event{ID: s, SessionID: s, Seq: 42, Type: "t" + s, CreatedAt: at, Payload: raw}
			got, err := e.AppendJSON(nil)
			if err != nil {
				t.Fatal(err)
			}
			if want := oldEnvelope(t, e); !bytes.Equal(got, want) {
				t.Errorf("string %q, payload %v:\n got %s\nwant %s", s, p, got, want)
			}
			if via, err := json.Marshal(e); err != nil || !bytes.Equal(via, got) {
				t.Errorf("json.Marshal of the event: %s, %v; want %s", via, err, got)
			}
		}
	}
	nilPayload := record.Event{ID: "i", Seq: 1, Type: "x", CreatedAt: at}
	if got, _ := nilPayload.AppendJSON(nil); !bytes.Equal(got, oldEnvelope(t, nilPayload)) {
		t.Errorf("no payload: %s, want %s", got, oldEnvelope(t, nilPayload))
	}
	l, err := Open(filepath.Join(t.TempDir(), "events.jsonl"), Options{SessionID: "s<1>", Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	var recs []Record
	for _, s := range strs {
		recs = append(recs, Record{Type: "t", Payload: map[string]string{"path": s}})
	}
	written, err := l.AppendBatch(context.Background(), recs)
	if err != nil {
		t.Fatal(err)
	}
	i := 0
	for ev, err := range l.Events(1) {
		if err != nil {
			t.Fatal(err)
		}
		w := written[i]
		if ev.ID != w.ID || ev.SessionID != "s<1>" || ev.Seq != w.Seq || ev.Type != w.Type || !ev.CreatedAt.Equal(w.CreatedAt) || !bytes.Equal(ev.Payload, w.Payload) {
			t.Errorf("read back %+v, wrote %+v", ev, w)
		}
		i++
	}
	if i != len(recs) {
		t.Errorf("read back %d events, wrote %d", i, len(recs))
	}
	if _, err := json.Marshal(record.Event{Seq: 1, Type: "x", CreatedAt: at, Payload: json.RawMessage(`{"a":`)}); err == nil {
		t.Error("json.Marshal of an event with a damaged payload succeeded")
	}
	if _, err := marshalPayload(json.RawMessage(`{"a":`)); err == nil {
		t.Error("marshalPayload took damaged JSON")
	}
	if _, err := marshalPayload(json.RawMessage(``)); err == nil {
		t.Error("marshalPayload took an empty RawMessage")
	}
}
