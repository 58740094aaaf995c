package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/zerofs/zerofs/history"
	"github.com/zerofs/zerofs/record"
)

// TestShowLabelsTheStepsOwnAfterState: on a mounted workspace `zerofs show
// @` labelled the last step's after-state with a sequence that was not the
// step's: a rewind names the stashes of removed files before it writes its
// checkpoint, and that stash_named event fell in the step's range, so the
// diff read "+++ b/a.txt (@6)" where the step's last capture was @5 (the
// same content under a later rewind's number; the README's session showed
// @12 for @11). The after-state is named by the step's own last event.
func TestShowLabelsTheStepsOwnAfterState(t *testing.T) {
	built.NeedFUSE(t)
	ws := filepath.Join(t.TempDir(), "ws")
	if err := os.Mkdir(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(ws, "a.txt"), "one\n")
	writeFile(t, filepath.Join(ws, "x.txt"), "x\n")
	mountT(t, ws)

	binOK(t, ws, "step", "Edit")
	writeFile(t, filepath.Join(ws, "a.txt"), "two\n")
	binOK(t, ws, "step", "Rm")
	writeFile(t, filepath.Join(ws, "a.txt"), "three\n")
	if err := os.Remove(filepath.Join(ws, "x.txt")); err != nil { // its stash is named later
		t.Fatal(err)
	}
	var entries []history.Entry
	if err := json.Unmarshal([]byte(binOK(t, ws, "log", "--json")), &entries); err != nil || len(entries) != 2 {
		t.Fatalf("log --json: %v %+v", err, entries)
	}
	rm := entries[0].Sequence
	binOK(t, ws, "rewind", itoa(rm), "--", "a.txt")

	// The events, read through the mount: the step's own last capture, and
	// the stash_named between it and the rewind that made the defect.
	logText, err := os.ReadFile(filepath.Join(ws, ".zero", "log"))
	if err != nil {
		t.Fatal(err)
	}
	var rewindCP, last uint64
	type ev struct {
		Seq     uint64 `json:"sequence"`
		Type    string `json:"type"`
		Payload struct {
			CheckpointSequence uint64 `json:"checkpointSequence"`
		} `json:"payload"`
	}
	var evs []ev
	for line := range strings.Lines(string(logText)) {
		var e ev
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		evs = append(evs, e)
		if e.Type == "session_rewind" {
			rewindCP = e.Payload.CheckpointSequence
		}
	}
	named := false
	for _, e := range evs {
		if e.Seq > uint64(rm) && e.Seq < rewindCP {
			switch e.Type {
			case "session_checkpoint":
				last = e.Seq
			case "stash_named":
				named = e.Seq > last
			}
		}
	}
	if last == 0 || !named {
		t.Fatalf("want the step's captures, then a stash_named, then the rewind's checkpoint %d; the log:\n%s", rewindCP, logText)
	}
	want := "(@" + itoa(record.Seq(last)) + ")"
	labels := regexp.MustCompile(`\+\+\+ b/\S+\t(\(@\d+\))`)
	for _, ref := range []string{"@", itoa(rm)} {
		out := binOK(t, ws, "show", ref)
		got := labels.FindAllStringSubmatch(out, -1)
		if len(got) == 0 {
			t.Fatalf("show %s: no +++ line:\n%s", ref, out)
		}
		for _, m := range got {
			if m[1] != want {
				t.Errorf("show %s labels the step's after-state %s, want %s (its last capture):\n%s", ref, m[1], want, out)
			}
		}
		if !strings.Contains(out, "-two\n+three\n") {
			t.Errorf("show %s: the diff of a.txt is missing:\n%s", ref, out)
		}
	}
}
