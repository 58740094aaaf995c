package timeline

import (
	"cmp"
	"encoding/json"
	"errors"
	"io"
	"iter"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/zerofs/zerofs/control"
	"github.com/zerofs/zerofs/history"
	"github.com/zerofs/zerofs/record"
)

// DefaultLimit is how many entries a page of the log holds by default;
// MaxLimit bounds what a request may ask for.
const (
	DefaultLimit = 50
	MaxLimit     = 500
)

// Head is /api/head: what the page polls to know the history changed.
type Head struct {
	// Stamp changes whenever the history does.
	Stamp string `json:"stamp"`
	Root  string `json:"root"`
	// Mounted: the workspace is mounted, so changes made in it are being
	// recorded; when false, nothing records them until it is mounted.
	Mounted bool `json:"mounted"`
}

// Page is /api/log: entries newest first, and whether older ones remain.
type Page struct {
	Head    record.Seq `json:"head"`
	Entries []Item     `json:"entries"`
	// More: entries older than the last one remain (ask with before set
	// to its sequence).
	More bool `json:"more"`
}

// An Item is one entry of the timeline: `zerofs log --json`'s entry
// (history.Entry: its Before and After are the diff's two sides, what
// "rewind to before" and "restore" go back to), with what the page shows
// besides.
type Item struct {
	history.Entry
	// Procs are the processes that made the changes, in order of first
	// change.
	Procs []Proc `json:"procs"`
	// Lines are the +/- line counts of each changed path (a renamed path
	// by its new name); absent where the states were pruned.
	Lines map[string]Lines `json:"lines,omitempty"`
	// Outcome words a step's result ("failed", "ok", or "" when the agent
	// did not say) and Took its details ("exit 2, 1.2 s"), as the CLI
	// words them (history.ResultWords); Entry.Result has the fields.
	Outcome string `json:"outcome,omitempty"`
	Took    string `json:"took,omitempty"`
}

// A Proc is a process that changed something.
type Proc struct {
	PID  int    `json:"pid"`
	Comm string `json:"comm"`
}

// Lines is a path's diff size; Binary when either side is not text.
type Lines struct {
	Added   int  `json:"added"`
	Removed int  `json:"removed"`
	Binary  bool `json:"binary,omitempty"`
}

// FileDiff is one path's diff in /api/diff.
type FileDiff struct {
	Path string `json:"path"`
	// From is a renamed file's old path (history.FileDiff.From).
	From   string `json:"from,omitempty"`
	Text   string `json:"text"`
	Binary bool   `json:"binary,omitempty"`
	// PathBytes and FromBytes are the exact bytes of a name that is not
	// UTF-8 (Path and From then hold readable forms), as the log has them.
	PathBytes string `json:"pathBytes,omitempty"`
	FromBytes string `json:"fromBytes,omitempty"`
}

// RewindAnswer is /api/rewind's answer: the report, and the one-line
// reason when the rewind failed or was refused (a revert's conflicts are
// in the report).
type RewindAnswer struct {
	Report control.RewindReport `json:"report"`
	// Text is the report in words (history.Describe), as the CLI and the
	// MCP server say it.
	Text  string `json:"text,omitempty"`
	Error string `json:"error,omitempty"`
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	json.NewEncoder(w).Encode(v)
}

type apiError struct {
	Error string `json:"error"`
}

func (s *Server) fail(w http.ResponseWriter, code int, err error) {
	if code >= 500 {
		s.opts.Logger.Warn("timeline", "err", err)
	}
	writeJSON(w, code, apiError{Error: strings.ReplaceAll(strings.TrimSpace(err.Error()), "\n", "; ")})
}

// status is the HTTP status for a library error.
func status(err error) int {
	switch {
	case errors.Is(err, record.ErrNoSuchSeq), errors.Is(err, control.ErrBadRequest),
		errors.Is(err, record.ErrUnsafePath), errors.Is(err, record.ErrNoSuchPath):
		return http.StatusBadRequest
	case errors.Is(err, record.ErrNothingToUndo), errors.Is(err, record.ErrNothingToRedo),
		errors.Is(err, record.ErrConflict), errors.Is(err, history.ErrInUse):
		return http.StatusConflict
	}
	return http.StatusInternalServerError
}

func (s *Server) head(w http.ResponseWriter, r *http.Request) {
	var h Head
	var err error
	if s.opts.Stamp != nil {
		h.Stamp, h.Mounted, err = s.opts.Stamp()
	} else {
		err = s.withSource(r.Context(), func(src history.Source) error {
			head, err := src.Head()
			h.Stamp = strconv.FormatUint(uint64(head), 10)
			return err
		})
	}
	if err != nil {
		s.fail(w, status(err), err)
		return
	}
	h.Root = s.opts.Root
	writeJSON(w, http.StatusOK, h)
}

func seqParam(r *http.Request, name string, def record.Seq) (record.Seq, error) {
	v := r.URL.Query().Get(name)
	if v == "" {
		return def, nil
	}
	n, err := strconv.ParseUint(v, 10, 64)
	if err != nil {
		return 0, &paramError{name, v}
	}
	return record.Seq(n), nil
}

type paramError struct{ name, value string }

func (e *paramError) Error() string { return "bad " + e.name + ": " + strconv.Quote(e.value) }

func (s *Server) log(w http.ResponseWriter, r *http.Request) {
	before, err := seqParam(r, "before", history.Now)
	if err != nil {
		s.fail(w, http.StatusBadRequest, err)
		return
	}
	limit, err := seqParam(r, "limit", DefaultLimit)
	if err != nil || limit == 0 {
		s.fail(w, http.StatusBadRequest, &paramError{"limit", r.URL.Query().Get("limit")})
		return
	}
	all := r.URL.Query().Get("all") == "1"
	var page Page
	err = s.withSource(r.Context(), func(src history.Source) error {
		var err error
		page, err = LogWith(src, before, int(min(limit, MaxLimit)), all)
		return err
	})
	if err != nil {
		s.fail(w, status(err), err)
		return
	}
	writeJSON(w, http.StatusOK, page)
}

// Log is a page of src's timeline: up to limit entries whose sequence is
// below before, newest first, each with its changes, processes and line
// counts. Like history.Log, it leaves out the steps that changed nothing.
func Log(src history.Source, before record.Seq, limit int) (Page, error) {
	return LogWith(src, before, limit, false)
}

// LogWith is Log that keeps the steps that changed nothing when all is
// true: history.LogPage's entries (the log every front end shows), each
// with its processes and line counts.
func LogWith(src history.Source, before record.Seq, limit int, all bool) (Page, error) {
	src = &onceSource{Source: src}
	head, err := src.Head()
	if err != nil {
		return Page{}, err
	}
	if before == history.Now {
		before = 0
	}
	lp, err := history.LogPage(src, history.LogOptions{Changes: true, Limit: limit, Before: before, All: all})
	if err != nil {
		return Page{}, err
	}
	page := Page{Head: head, Entries: []Item{}, More: lp.More}
	for _, e := range lp.Entries {
		it := Item{Entry: e, Procs: procs(e.Changes)}
		it.Outcome, it.Took = history.ResultWords(e.Result)
		if e.Type != history.EntryTurn && e.Type != history.BlockPruned {
			it.Lines = lines(src, e.Before, e.After, e.Changes)
		}
		page.Entries = append(page.Entries, it)
	}
	return page, nil
}

func procs(cs []history.Change) []Proc {
	out := []Proc{}
	seen := map[Proc]bool{}
	for _, c := range cs {
		p := Proc{PID: c.PID, Comm: c.Comm}
		if (p.PID != 0 || p.Comm != "") && !seen[p] {
			seen[p] = true
			out = append(out, p)
		}
	}
	return out
}

// lines counts each changed path's added and removed lines between a and
// b; nil when the diff cannot be made (a state was pruned). A rename is
// counted under its new path: what its content's diff adds and removes.
func lines(src history.Source, a, b record.Seq, cs []history.Change) map[string]Lines {
	out := map[string]Lines{}
	var paths []string
	for _, c := range cs {
		switch {
		case c.Change == history.ChangeRenamed:
			out[c.Path] = Lines{}
			paths = append(paths, c.Path, c.From)
		case c.Kind == string(record.KindDir) && c.OldKind == "":
		default:
			paths = append(paths, c.Path)
		}
	}
	if len(paths) == 0 {
		return out
	}
	if o, ok := src.(*onceSource); ok {
		src = o.between(a, b)
	}
	fds, err := history.Diff(src, a, b, paths)
	if err != nil {
		return nil
	}
	for _, fd := range fds {
		l := out[fd.Path]
		add, rm, bin := history.CountLines(fd.Text)
		l.Added += add
		l.Removed += rm
		l.Binary = l.Binary || bin
		out[fd.Path] = l
	}
	return out
}

// onceSource reads the log once per request: Blocks, and each Diff, read
// the whole log, and a page makes one Diff per entry.
type onceSource struct {
	history.Source
	events []record.Event
	err    error
	read   bool
}

// between is o with only the events after lo up to hi: a Diff of lo and
// hi reads the log for the checkpoints between them and nothing else, so
// a page of diffs in a long log does not walk the whole log per entry.
func (o *onceSource) between(lo, hi record.Seq) history.Source {
	o.Events() // read it
	if o.err != nil {
		return o
	}
	lo, hi = min(lo, hi), max(lo, hi)
	i, _ := slices.BinarySearchFunc(o.events, lo+1, func(ev record.Event, t record.Seq) int { return cmp.Compare(ev.Seq, t) })
	j, _ := slices.BinarySearchFunc(o.events, hi+1, func(ev record.Event, t record.Seq) int { return cmp.Compare(ev.Seq, t) })
	return &onceSource{Source: o.Source, events: o.events[i:j], read: true}
}

func (o *onceSource) Events() iter.Seq2[record.Event, error] {
	if !o.read {
		o.read = true
		for ev, err := range o.Source.Events() {
			if err != nil {
				o.err = err
				break
			}
			o.events = append(o.events, ev)
		}
	}
	return func(yield func(record.Event, error) bool) {
		for _, ev := range o.events {
			if !yield(ev, nil) {
				return
			}
		}
		if o.err != nil {
			yield(record.Event{}, o.err)
		}
	}
}

func (s *Server) diff(w http.ResponseWriter, r *http.Request) {
	a, err := seqParam(r, "a", 0)
	if err == nil {
		var b record.Seq
		b, err = seqParam(r, "b", history.Now)
		if err == nil {
			paths := r.URL.Query()["path"]
			for _, p := range paths {
				if record.CleanPath(p) != nil {
					err = &paramError{"path", p}
				}
			}
			if err == nil {
				var out []FileDiff
				err = s.withSource(r.Context(), func(src history.Source) error {
					fds, err := history.Diff(src, a, b, paths)
					for _, fd := range fds {
						_, _, bin := history.CountLines(fd.Text)
						out = append(out, FileDiff{Path: record.Readable(fd.Path), From: record.Readable(fd.From), Text: fd.Text, Binary: bin,
							PathBytes: record.ExactBytes(fd.Path), FromBytes: record.ExactBytes(fd.From)})
					}
					return err
				})
				if err == nil {
					if out == nil {
						out = []FileDiff{}
					}
					writeJSON(w, http.StatusOK, out)
					return
				}
			}
		}
	}
	var pe *paramError
	if errors.As(err, &pe) {
		s.fail(w, http.StatusBadRequest, err)
		return
	}
	s.fail(w, status(err), err)
}

func (s *Server) rewind(w http.ResponseWriter, r *http.Request) {
	if ct := r.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		s.fail(w, http.StatusUnsupportedMediaType, errors.New("want Content-Type application/json"))
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 1<<20))
	if err != nil {
		s.fail(w, http.StatusBadRequest, err)
		return
	}
	if t := strings.TrimSpace(string(body)); !strings.HasPrefix(t, "{") {
		s.fail(w, http.StatusBadRequest, errors.New("want a JSON rewind request"))
		return
	}
	req, err := control.ParseRewind(body)
	if err != nil {
		s.fail(w, http.StatusBadRequest, err)
		return
	}
	var ans RewindAnswer
	err = s.withSource(r.Context(), func(src history.Source) error {
		rep, err := src.Rewind(r.Context(), req)
		ans.Report = rep
		if err == nil || errors.Is(err, record.ErrConflict) {
			ans.Text = history.Describe(rep).Head
		}
		if errors.Is(err, record.ErrNoSuchSeq) && !req.Undo && !req.Redo {
			t := req.Target
			if req.Revert != 0 {
				t = req.Revert
			}
			err = history.ExplainSeq(src, t, err)
		}
		return err
	})
	if err != nil {
		ans.Error = strings.ReplaceAll(strings.TrimSpace(err.Error()), "\n", "; ")
		code := status(err)
		if code >= 500 {
			s.opts.Logger.Warn("timeline: rewind", "err", err)
		}
		writeJSON(w, code, ans)
		return
	}
	writeJSON(w, http.StatusOK, ans)
}
