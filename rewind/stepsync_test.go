package rewind

import (
	"context"
	"testing"
	"time"

	"github.com/zerofs/zerofs/internal/testsupport"
)

// TestStepEventsSyncedWithinTheWindow: in batch mode a step's tool_call
// and a turn become durable within the flusher's window, as captures do,
// and are not left for the next step to fsync (every step paid an
// fdatasync for the one before it: 1.85 ms of a step on a quiet machine).
func TestStepEventsSyncedWithinTheWindow(t *testing.T) {
	e, _ := openT(t, Options{BatchDelay: 5 * time.Millisecond})
	ctx := context.Background()
	for _, begin := range []struct {
		what string
		run  func() error
	}{
		{"step", func() error { _, err := e.BeginStep(ctx, "one", nil); return err }},
		{"turn", func() error { _, err := e.BeginTurn(ctx, nil); return err }},
	} {
		if err := begin.run(); err != nil {
			t.Fatal(err)
		}
		head := e.log.Head()
		if err := testsupport.Poll(10*time.Second, func() bool { return e.log.Synced() >= head }); err != nil {
			t.Errorf("after a %s, the log is durable up to %d of %d after 10 s: the event waits for the next step's fsync", begin.what, e.log.Synced(), head)
		}
	}
}
