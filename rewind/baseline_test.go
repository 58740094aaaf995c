package rewind

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/zerofs/zerofs/record"
	"github.com/zerofs/zerofs/rewind/internal/index"
)

// TestStoreBaseline: a store in the baseline format (what this version
// writes: every session_rewind and every intent record names its form)
// opens, and reopens with its rewind undone as a rewind; the same store
// with its session_rewind written as zerofs did before it recorded forms,
// or with an intent record without a form, is refused with an error that
// names the record and says why, and nothing in the store or the
// workspace changes.
func TestStoreBaseline(t *testing.T) {
	ctx := context.Background()
	e, ws := openT(t, Options{})
	steps, _ := history3(t, e, ws)
	if _, err := e.Apply(ctx, record.Request{Target: steps[1]}); err != nil {
		t.Fatal(err)
	}
	store := e.opts.StoreDir
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	logPath := filepath.Join(store, record.LogName)
	baseline, err := os.ReadFile(logPath)
	if err != nil {
		t.Fatal(err)
	}
	before := diskTree(t, ws)

	// The baseline opens (from the log, no snapshot), and knows the
	// rewind for what it was: undo takes it back.
	os.Remove(filepath.Join(store, index.SnapshotName))
	e2 := openAt(t, ws, Options{StoreDir: store})
	last, seq, ok := e2.LastRewind()
	if !ok || last.Form != record.FormRewind {
		t.Fatalf("the baseline's last rewind: %+v at %d (%v), want form %q", last, seq, ok, record.FormRewind)
	}
	res, err := e2.Apply(ctx, record.Request{Undo: true, DryRun: true})
	if err != nil || res.Undid.Kind != "rewind" || res.Undid.Sequence != seq {
		t.Fatalf("undo after the rewind: %+v (%v), want the rewind at %d taken back", res.Undid, err, seq)
	}
	if err := e2.Close(); err != nil {
		t.Fatal(err)
	}

	refused := func(what, file string, line int, want string) {
		t.Helper()
		os.Remove(filepath.Join(store, index.SnapshotName))
		logBefore, _ := os.ReadFile(logPath)
		err := openRefused(t, what, ws, Options{StoreDir: store})
		var be *record.BaselineError
		if !errors.As(err, &be) || !errors.Is(err, record.ErrBeforeBaseline) || be.Line != line || !strings.Contains(err.Error(), file) || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "older than the store format") {
			t.Fatalf("%s: got %v, want a *record.BaselineError naming %s line %d and %q", what, err, file, line, want)
		}
		if logAfter, _ := os.ReadFile(logPath); !bytes.Equal(logAfter, logBefore) {
			t.Errorf("%s: the refused open changed the log", what)
		}
		if d := diffTrees(diskTree(t, ws), before); d != "" {
			t.Errorf("%s: the refused open changed the workspace:\n%s", what, d)
		}
	}

	// A session_rewind without its form: a log from before forms.
	old := bytes.Replace(baseline, []byte(`,"form":"rewind"`), nil, 1)
	if bytes.Equal(old, baseline) {
		t.Fatalf("the log has no form to take out:\n%s", baseline)
	}
	if err := os.WriteFile(logPath, old, 0o600); err != nil {
		t.Fatal(err)
	}
	refused("a form-less session_rewind", record.LogName, int(seq), `a session_rewind with no "form"`)

	// An intent record without its form (a rewind under way, written
	// before forms), on the baseline log.
	if err := os.WriteFile(logPath, baseline, 0o600); err != nil {
		t.Fatal(err)
	}
	intent := `{"target":` + strconv.FormatUint(uint64(steps[0]), 10) + `,"checkpoint":` + strconv.FormatUint(uint64(seq-1), 10) + `}`
	if err := os.WriteFile(filepath.Join(store, intentName), []byte(intent), 0o600); err != nil {
		t.Fatal(err)
	}
	refused("an intent with no form", intentName, 0, "an intent record with no form")
	if _, err := os.Stat(filepath.Join(store, intentName)); err != nil {
		t.Errorf("the refused intent record is gone: %v", err)
	}
}
