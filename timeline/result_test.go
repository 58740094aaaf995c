package timeline_test

import (
	"context"
	"testing"

	"github.com/zerofs/zerofs/record"
	"github.com/zerofs/zerofs/timeline"
)

// TestLogResults: each step's card carries its result, worded as the CLI
// words it (outcome "failed", took "exit 2, 19 ms"); a failed step that
// changed nothing is shown all the same.
func TestLogResults(t *testing.T) {
	w := newWorkspace(t)
	ok := w.step("write a")
	w.write("sh", "a", "one\n")
	test := w.step("go test")
	code, ms := 2, int64(19)
	for _, r := range []record.ToolResultPayload{
		{Step: ok, Status: "ok", DurationMs: &ms},
		{Step: test, Status: "error", ExitCode: &code, DurationMs: &ms, Summary: "FAIL example.com/calc"},
	} {
		if _, _, err := w.eng.RecordResult(context.Background(), r); err != nil {
			t.Fatal(err)
		}
	}
	s := w.server()
	page := decode[timeline.Page](t, do(t, s, "GET", "/api/log", token, ""))
	got := map[string]timeline.Item{}
	for _, e := range page.Entries {
		got[e.Label] = e
	}
	if e := got["go test"]; e.Outcome != "failed" || e.Took != "exit 2, 19 ms" || e.Result == nil || e.Result.Summary != "FAIL example.com/calc" {
		t.Errorf("the failed step's card: %+v", e)
	}
	if e := got["write a"]; e.Outcome != "ok" || e.Took != "19 ms" {
		t.Errorf("the ok step's card: outcome %q took %q", e.Outcome, e.Took)
	}
}
