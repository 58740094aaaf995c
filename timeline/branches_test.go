package timeline_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"testing"

	"github.com/zerofs/zerofs/history"
	"github.com/zerofs/zerofs/timeline"
)

// TestBranchesAPI: /api/branches answers with the token only, lists what
// Options.Branches gives (an empty list without it), and a failure to
// list is an error, never a made-up list.
func TestBranchesAPI(t *testing.T) {
	open := func(context.Context) (history.Source, error) { return nil, errors.New("no history here") }
	serve := func(list func(context.Context) ([]timeline.Branch, error)) http.Handler {
		s, err := timeline.New(open, timeline.Options{Token: token, Hosts: []string{host}, Branches: list,
			Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	one := []timeline.Branch{{Dir: "/w/try-1", Base: 7, Mounted: true, Changed: 2, Unmerged: true}}
	s := serve(func(context.Context) ([]timeline.Branch, error) { return one, nil })
	if rec := do(t, s, "GET", "/api/branches", "", ""); rec.Code != http.StatusForbidden {
		t.Errorf("without the token: %d, want 403", rec.Code)
	}
	rec := do(t, s, "GET", "/api/branches", token, "")
	var got timeline.Branches
	if rec.Code != 200 || json.Unmarshal(rec.Body.Bytes(), &got) != nil || len(got.Branches) != 1 || got.Branches[0] != one[0] {
		t.Errorf("got %d %s, want %+v", rec.Code, rec.Body, one)
	}
	rec = do(t, serve(nil), "GET", "/api/branches", token, "")
	if rec.Code != 200 || rec.Body.String() != "{\"branches\":[]}\n" {
		t.Errorf("without Branches: %d %q", rec.Code, rec.Body)
	}
	rec = do(t, serve(func(context.Context) ([]timeline.Branch, error) { return nil, errors.New("store unreadable") }), "GET", "/api/branches", token, "")
	if rec.Code != http.StatusInternalServerError || !json.Valid(rec.Body.Bytes()) {
		t.Errorf("a failing list: %d %s", rec.Code, rec.Body)
	}
}
