package history

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"syscall"
	"time"

	"github.com/zerofs/zerofs/control"
	"github.com/zerofs/zerofs/record"
	"github.com/zerofs/zerofs/rewind"
)

func (m *mountSource) RecordResult(ctx context.Context, r record.ToolResultPayload) (control.ResultReport, error) {
	req, err := control.FormatResult(r)
	if err != nil {
		return control.ResultReport{}, err
	}
	b, err := m.request(control.Result, req)
	var rep control.ResultReport
	perr := json.Unmarshal(b, &rep)
	if err != nil {
		if len(b) == 0 && errors.Is(err, syscall.ENOENT) {
			return rep, fmt.Errorf("%s/%s: %w (the daemon is older than tool results: remount to record them)", control.Dir, control.Result, err)
		}
		if errors.Is(err, syscall.ENOENT) {
			return rep, fmt.Errorf("%w: %s", rewind.ErrNoStepForResult, rep.Message)
		}
		if perr == nil && rep.Error != "" {
			return rep, rep.Refusal.Err()
		}
		return rep, err
	}
	if perr != nil {
		return rep, fmt.Errorf("%s/%s: %w", control.Dir, control.Result, perr)
	}
	return rep, nil
}

func (h *engineSource) RecordResult(ctx context.Context, r record.ToolResultPayload) (control.ResultReport, error) {
	r, ev, err := h.eng.RecordResult(ctx, r)
	if err != nil {
		return control.ResultReport{}, err
	}
	return control.ResultReport{Sequence: ev.Seq, Step: r.Step}, nil
}

// ResultWords says what came of a step, as the CLI and the timeline word
// it: status "failed", "ok", or "" (the agent did not say; nil r: no result
// recorded), and detail "exit 2, 1.2 s" (what is known of the exit code
// and the duration).
func ResultWords(r *record.ToolResultPayload) (status, detail string) {
	if r == nil {
		return "", ""
	}
	switch r.Status {
	case "error":
		status = "failed"
	case "ok":
		status = "ok"
	}
	var parts []string
	if r.ExitCode != nil {
		parts = append(parts, fmt.Sprintf("exit %d", *r.ExitCode))
	}
	if r.DurationMs != nil {
		parts = append(parts, Duration(time.Duration(*r.DurationMs)*time.Millisecond))
	}
	return status, strings.Join(parts, ", ")
}

// Duration is d for a person: "19 ms", "1.2 s", "3 min 4 s".
func Duration(d time.Duration) string {
	switch {
	case d < time.Second:
		return fmt.Sprintf("%d ms", d.Milliseconds())
	case d < time.Minute:
		return fmt.Sprintf("%.1f s", d.Seconds())
	}
	d = d.Round(time.Second)
	return fmt.Sprintf("%d min %d s", int(d.Minutes()), int(d.Seconds())%60)
}
