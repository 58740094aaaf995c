package control

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/zerofs/zerofs/record"
)

// Dir is the control directory's name at the mount root (the store's name
// on the backing side, which it hides).
const Dir = record.StoreName

// PIDFileName is the daemon's pid file in the store: the daemon (zerofs
// mount) writes it, the clients read it to name the process that holds the
// store.
const PIDFileName = "daemon.pid"

// The control files.
const (
	Step   = "step"
	Rewind = "rewind"
	Head   = "head"
	Log    = "log"
	Status = "status"
	GC     = "gc"
	Turn   = "turn"
	Result = "result"
)

// Names lists every control file, sorted.
var Names = []string{GC, Head, Log, Result, Rewind, Status, Step, Turn}

// Writable reports whether name takes requests (writes).
func Writable(name string) bool {
	return name == Step || name == Rewind || name == GC || name == Turn || name == Result
}

// ParseTurn parses a write to "turn": a JSON object, the turn event's
// payload ({"prompt", "agentSession"}, both optional). Anything else is
// ErrBadRequest.
func ParseTurn(data []byte) (json.RawMessage, error) {
	line := bytes.TrimSpace(data)
	var obj map[string]json.RawMessage
	if len(line) == 0 || line[0] != '{' || json.Unmarshal(line, &obj) != nil {
		return nil, badRequest("turn request is not a JSON object")
	}
	return json.RawMessage(line), nil
}

// MaxRequest bounds one request: everything written through one open file.
const MaxRequest = 1 << 20

// ErrBadRequest: a request that does not parse (the daemon answers EINVAL).
var ErrBadRequest = errors.New("control: bad request")

func badRequest(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrBadRequest, fmt.Sprintf(format, args...))
}

// StepRequest is a parsed write to "step".
type StepRequest struct {
	// Label names the step ("step" when the request gives none).
	Label string
	// Payload is the caller's JSON object, passed on in the tool_call (nil
	// for a plain label).
	Payload json.RawMessage
}

// DefaultLabel labels a step whose request names none.
const DefaultLabel = "step"

// ParseStep parses a write to "step": the trimmed text is the label, unless
// it is a JSON object, which becomes the payload, labelled by its "name".
func ParseStep(data []byte) StepRequest {
	line := bytes.TrimSpace(data)
	req := StepRequest{Label: string(line)}
	if len(line) > 0 && line[0] == '{' {
		var obj map[string]json.RawMessage
		if err := json.Unmarshal(line, &obj); err == nil {
			req.Payload = json.RawMessage(line)
			req.Label = ""
			if raw, ok := obj["name"]; ok {
				var s string
				if json.Unmarshal(raw, &s) == nil {
					req.Label = s
				}
			}
		}
	}
	if req.Label == "" {
		req.Label = DefaultLabel
	}
	return req
}

// FormatStep is the request that begins a step labelled label with the
// JSON object extra merged into its payload (nil: none). A label that
// looks like a JSON object is always sent as {"name": label}, so the
// daemon never mistakes it for a payload.
func FormatStep(label string, extra json.RawMessage) ([]byte, error) {
	if extra == nil && !strings.HasPrefix(strings.TrimSpace(label), "{") {
		if strings.ContainsAny(label, "\n\r") {
			return nil, badRequest("step label must be one line")
		}
		return []byte(label + "\n"), nil
	}
	obj := map[string]any{}
	if extra != nil {
		if err := json.Unmarshal(extra, &obj); err != nil {
			return nil, badRequest("step payload is not a JSON object: %v", err)
		}
	}
	obj["name"] = label
	b, err := json.Marshal(obj)
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

// StepReport is what reading "step" shows: the current step.
type StepReport struct {
	Sequence record.Seq `json:"sequence"`
	Label    string     `json:"label"`
}

// Format is the report's text: "<seq> <label>\n".
func (s StepReport) Format() []byte {
	return fmt.Appendf(nil, "%d %s\n", s.Sequence, s.Label)
}

// ParseRewind parses a write to "rewind": a decimal sequence, or a JSON
// object (see the package comment). Anything else is ErrBadRequest.
func ParseRewind(data []byte) (record.Request, error) {
	s := bytes.TrimSpace(data)
	if len(s) == 0 || s[0] != '{' {
		t, err := parseSeq(string(s))
		if err != nil {
			return record.Request{}, err
		}
		return record.Request{Target: t}, nil
	}
	if !utf8.Valid(s) {
		// encoding/json would read each stray byte as U+FFFD: "bad\xff"
		// would name "bad\uFFFD", another file. Such a name goes in
		// pathsBytes.
		return record.Request{}, badRequest("rewind request: not UTF-8 (give a path that is not UTF-8 in pathsBytes)")
	}
	var raw struct {
		Target     *uint64               `json:"target"`
		Revert     *uint64               `json:"revert"`
		Paths      []string              `json:"paths"`
		PathsBytes []string              `json:"pathsBytes"`
		Force      bool                  `json:"force"`
		Undo       bool                  `json:"undo"`
		Redo       bool                  `json:"redo"`
		Turn       json.RawMessage       `json:"turn"` // a sequence, or true beside "undo"
		DryRun     bool                  `json:"dryRun"`
		Session    string                `json:"session"`
		Merge      *record.MergeRequest  `json:"merge"`
		Branch     *record.BranchRequest `json:"branch"`
	}
	dec := json.NewDecoder(bytes.NewReader(s))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&raw); err != nil {
		return record.Request{}, badRequest("rewind request: %v", err)
	}
	if dec.More() {
		return record.Request{}, badRequest("rewind request: more than one JSON value")
	}
	paths, err := record.FromBytesAll("paths", raw.Paths, raw.PathsBytes)
	if err != nil {
		return record.Request{}, badRequest("rewind request: %v", err)
	}
	req := record.Request{Paths: paths, Force: raw.Force, Undo: raw.Undo, Redo: raw.Redo,
		DryRun: raw.DryRun, Session: raw.Session, Merge: raw.Merge, Branch: raw.Branch}
	forms := 0
	if raw.Branch != nil {
		if raw.Branch.Delete == "" && (!filepath.IsAbs(raw.Branch.Dir) || filepath.Clean(raw.Branch.Dir) != raw.Branch.Dir) {
			return record.Request{}, badRequest("rewind request: branch: dir %q is not a clean absolute path", raw.Branch.Dir)
		}
		forms++
	}
	if raw.Merge != nil {
		if !filepath.IsAbs(raw.Merge.Dir) {
			return record.Request{}, badRequest("rewind request: merge: dir %q is not an absolute path", raw.Merge.Dir)
		}
		forms++
	}
	if raw.Target != nil {
		req.Target = record.Seq(*raw.Target)
		forms++
	}
	if raw.Revert != nil {
		t := record.Seq(*raw.Revert)
		if t == 0 {
			return record.Request{}, badRequest("rewind request: revert 0 names no step")
		}
		req.Revert = t
		forms++
	}
	if raw.Undo {
		forms++
	}
	if raw.Redo {
		forms++
	}
	switch t := string(raw.Turn); {
	case raw.Turn == nil || t == "null":
	case t == "true" && raw.Undo:
		// {"undo": true, "turn": true}: the whole turn of what undo
		// would take back; one form.
		req.WholeTurn = true
	case t == "true" || t == "false":
		return record.Request{}, badRequest("rewind request: \"turn\": true goes with \"undo\": true")
	default:
		var n uint64
		if err := json.Unmarshal(raw.Turn, &n); err != nil {
			return record.Request{}, badRequest("rewind request: turn: want a sequence, or true beside undo")
		}
		if n == 0 {
			return record.Request{}, badRequest("rewind request: turn 0 names no turn")
		}
		req.Turn = record.Seq(n)
		forms++
	}
	switch {
	case forms != 1:
		return record.Request{}, badRequest("rewind request wants exactly one of target, revert, undo, redo, turn, merge and branch")
	case raw.Paths != nil && raw.Target == nil:
		return record.Request{}, badRequest("rewind request: paths go with a target")
	case raw.Paths != nil && len(raw.Paths) == 0:
		return record.Request{}, badRequest("rewind request: empty paths")
	case raw.Force && raw.Revert == nil:
		return record.Request{}, badRequest("rewind request: force goes with a revert")
	}
	for _, p := range req.Paths {
		if err := record.CleanPath(p); err != nil {
			return record.Request{}, badRequest("rewind request: path %q is not a clean workspace path", p)
		}
	}
	return req, nil
}

// FormatRewind is the request's text: a bare number for a whole rewind
// (what every version of the daemon understands), else a JSON object; a
// line either way (the daemon runs a request at its newline).
func FormatRewind(r record.Request) []byte {
	if r.Paths == nil && r.Revert == 0 && !r.Force && !r.Undo && !r.Redo && r.Turn == 0 && !r.DryRun && r.Session == "" && r.Merge == nil && r.Branch == nil {
		return fmt.Appendf(nil, "%d\n", r.Target)
	}
	obj := map[string]any{}
	switch {
	case r.Undo && r.WholeTurn:
		obj["undo"], obj["turn"] = true, true
	case r.Undo:
		obj["undo"] = true
	case r.Redo:
		obj["redo"] = true
	case r.Turn != 0:
		obj["turn"] = r.Turn
	case r.Revert != 0:
		obj["revert"] = r.Revert
	case r.Merge != nil:
		obj["merge"] = r.Merge
	case r.Branch != nil:
		obj["branch"] = r.Branch
	default:
		obj["target"] = r.Target
	}
	if len(r.Paths) > 0 {
		obj["paths"] = record.ReadableAll(r.Paths)
		if b := record.ExactBytesAll(r.Paths); b != nil {
			obj["pathsBytes"] = b
		}
	}
	if r.Force {
		obj["force"] = true
	}
	if r.DryRun {
		obj["dryRun"] = true
	}
	if r.Session != "" {
		obj["session"] = r.Session
	}
	b, _ := json.Marshal(obj) // plain values: cannot fail
	return append(b, '\n')
}

// ParseSeq parses a decimal sequence (a write to "gc", a read of "head").
func ParseSeq(data []byte) (record.Seq, error) {
	return parseSeq(string(bytes.TrimSpace(data)))
}

func parseSeq(s string) (record.Seq, error) {
	if strings.HasPrefix(s, "-") {
		return 0, badRequest("sequence %q is negative", s)
	}
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return 0, badRequest("not a sequence: %q", s)
	}
	return record.Seq(n), nil
}

// FormatSeq is a sequence as a request or report: "<seq>\n".
func FormatSeq(t record.Seq) []byte { return fmt.Appendf(nil, "%d\n", t) }

// RewindReport is what reading "rewind" shows: the last rewind, or on the
// handle that wrote a request, that request's result. A dry run has
// sequence 0 and a preview; a refused request has its Refusal ("error":
// "conflict" and the conflicting paths for a revert refused for them).
type RewindReport struct {
	// Sequence is the session_rewind event's.
	Sequence       record.Seq `json:"sequence"`
	TargetSequence record.Seq `json:"targetSequence"`
	// CheckpointSequence holds what the rewind replaced (0: it changed
	// nothing); rewinding to CheckpointSequence-1 undoes it.
	CheckpointSequence record.Seq    `json:"checkpointSequence"`
	Report             record.Report `json:"report"`
	Paths              []string      `json:"paths,omitempty"`
	RevertOf           record.Seq    `json:"revertOf,omitempty"`
	Force              bool          `json:"force,omitempty"`
	DryRun             bool          `json:"dryRun,omitempty"`
	// Unchanged: the workspace already was as the rewind would make it, so
	// nothing was changed or recorded (sequence 0).
	Unchanged bool                `json:"unchanged,omitempty"`
	Preview   []record.PathChange `json:"preview,omitempty"`
	Foreign   []record.Foreign    `json:"foreign,omitempty"`
	Conflicts []string            `json:"conflicts,omitempty"`
	// Form is what the rewind was (rewind, paths, revert, undo, redo).
	Form string `json:"form,omitempty"`
	// Undid names what an undo took back; Redid what a redo brought back.
	// Step (in Refusal) names what any form acted on, a revert's step
	// and a turn's prompt included: a client words the report from it
	// (history.Describe) without reading the log.
	Undid *record.StepRef `json:"undid,omitempty"`
	Redid *record.StepRef `json:"redid,omitempty"`
	// Merge is what a merge brought in (Record), or its conflicts.
	Merge *record.MergeReport `json:"merge,omitempty"`
	// Branch is the branch a branch request made or removed.
	Branch *record.BranchRecord `json:"branch,omitempty"`
	Refusal
}

// rewindReportJSON is a RewindReport as JSON carries it: paths and
// conflicts that are not valid UTF-8 with their exact bytes beside them
// (pathsBytes, conflictsBytes), as the log records names.
type rewindReportJSON struct {
	rewindReportFields
	PathsBytes     []string `json:"pathsBytes,omitempty"`
	ConflictsBytes []string `json:"conflictsBytes,omitempty"`
}

type rewindReportFields RewindReport

func (j *rewindReportJSON) names() []record.NameField {
	return []record.NameField{record.Names("paths", &j.Paths, &j.PathsBytes), record.Names("conflicts", &j.Conflicts, &j.ConflictsBytes)}
}

// MarshalJSON writes the report with the exact bytes of odd names.
func (r RewindReport) MarshalJSON() ([]byte, error) {
	j := rewindReportJSON{rewindReportFields: rewindReportFields(r)}
	return record.MarshalNames(&j, j.names()...)
}

// UnmarshalJSON reads a report, the exact bytes winning.
func (r *RewindReport) UnmarshalJSON(data []byte) error {
	var j rewindReportJSON
	if err := record.UnmarshalNames(data, &j, j.names()...); err != nil {
		return err
	}
	*r = RewindReport(j.rewindReportFields)
	return nil
}

// ErrorConflict is RewindReport.Error for a revert refused for conflicts.
const ErrorConflict = string(record.RefusedConflict)

// ReportOf is the report of a rewind request's result res and error err,
// as the daemon hands it to the client (and the unmounted engine to the
// CLI): what was done, or would be; for a refused request, the refusal.
func ReportOf(res record.RewindResult, err error) RewindReport {
	p := res.Record
	rep := RewindReport{Sequence: res.Seq, TargetSequence: p.TargetSequence,
		CheckpointSequence: p.CheckpointSequence, Report: res.Report,
		Paths: p.Paths, RevertOf: p.RevertOf, Force: p.Force, Form: p.Form,
		DryRun: res.DryRun, Unchanged: res.Unchanged, Preview: res.Preview, Foreign: res.Foreign, Conflicts: res.Conflicts,
		Undid: res.Undid, Redid: res.Redid, Merge: res.Merge, Branch: res.Branch}
	if err != nil {
		rep.Refusal = RefusalOf(err)
		var ce *record.ConflictError
		if errors.As(err, &ce) {
			rep.RevertOf, rep.Conflicts = ce.Step, ce.Paths
		}
	}
	if rep.Step == nil {
		rep.Step = res.Step
	}
	if rep.Report.Skipped == nil {
		rep.Report.Skipped = []string{}
	}
	return rep
}

// Err is the error a refused request's report stands for (nil when it was
// not refused): a *record.ConflictError for conflicts, else a
// *record.RefusedError, so errors.Is and errors.As work on the client's
// side as on the engine's.
func (r RewindReport) Err() error {
	if r.Error == ErrorConflict && r.Merge != nil {
		return &record.MergeConflictError{Dir: r.Merge.Record.Dir, Conflicts: r.Merge.Conflicts}
	}
	if r.Error == ErrorConflict {
		return &record.ConflictError{Step: r.RevertOf, Paths: r.Conflicts}
	}
	return r.Refusal.Err()
}

// ParseRewindReport parses what reading "rewind" shows ("{}": no rewind
// yet, a zero report).
func ParseRewindReport(b []byte) (RewindReport, error) {
	var r RewindReport
	if err := json.Unmarshal(b, &r); err != nil {
		return r, fmt.Errorf("control: bad rewind report: %v", err)
	}
	if r.Report.Skipped == nil {
		r.Report.Skipped = []string{}
	}
	return r, nil
}

// ParseGC parses a write to "gc": a decimal sequence (the cut), or a JSON
// object {"before": SEQ, "thinBefore": SEQ} (thinBefore: the history
// before it keeps one state a day).
func ParseGC(data []byte) (record.GCRequest, error) {
	t := bytes.TrimSpace(data)
	if len(t) == 0 || t[0] != '{' {
		s, err := parseSeq(string(t))
		return record.GCRequest{Before: s}, err
	}
	var r record.GCRequest
	d := json.NewDecoder(bytes.NewReader(t))
	d.DisallowUnknownFields()
	if err := d.Decode(&r); err != nil {
		return r, badRequest("gc request: %v", err)
	}
	return r, nil
}

// FormatGC is a gc request as written to "gc": the plain sequence when it
// does not thin (what every zerofs understands), else the JSON object.
func FormatGC(r record.GCRequest) []byte {
	if r.ThinBefore == 0 {
		return FormatSeq(r.Before)
	}
	b, _ := json.Marshal(r) // plain values: cannot fail
	return append(b, '\n')
}

// GCReport is what reading "gc" shows: what one gc did, or on the handle
// that wrote a refused request, why.
type GCReport struct {
	record.GCResult
	Refusal
}

// ParseGCReport parses what reading "gc" shows.
func ParseGCReport(b []byte) (GCReport, error) {
	var r GCReport
	if err := json.Unmarshal(b, &r); err != nil {
		return r, fmt.Errorf("control: bad gc report: %v", err)
	}
	return r, nil
}

// StatusReport is what reading "status" shows.
type StatusReport struct {
	PID int `json:"pid"`
	// Start is the daemon's start time (internal/proc): with PID, who the
	// daemon is; 0 from a daemon that did not say.
	Start        uint64     `json:"start,omitempty"`
	Workspace    string     `json:"workspace"`
	Mountpoint   string     `json:"mountpoint"`
	Store        string     `json:"store"`
	Head         record.Seq `json:"head"`
	Step         StepReport `json:"step"`
	Sync         string     `json:"sync"`
	AutoStep     string     `json:"autoStep"`
	PrunedBefore record.Seq `json:"prunedBefore"`
	// Thinned is the intervals of states gc thinned away (rewind.Engine.Thinned).
	Thinned []record.ThinInterval `json:"thinned,omitempty"`
	// Captures is how a removed file's before-state is captured: "link
	// removed files" (its inode is kept in the store), or "copy: " and why.
	Captures string `json:"captures,omitempty"`
	// Warnings are what the daemon saw that a person should know: views
	// that refused present content changed outside the mount.
	Warnings []string `json:"warnings,omitempty"`
	// Progress is how far the rewind or gc running now has come (nil when
	// none runs): a client waiting on its write polls it for a progress bar.
	Progress *record.ProgressReport `json:"progress,omitempty"`
	// Ignore is what .zeroignore and --ignore make the daemon leave alone
	// (nil: nothing, and no .zeroignore it could not use).
	Ignore *record.IgnoreStatus `json:"ignore,omitempty"`
}

// ParseStatus parses what reading "status" shows. A status without a pid
// is not a daemon's.
func ParseStatus(b []byte) (StatusReport, error) {
	var st StatusReport
	if err := json.Unmarshal(b, &st); err != nil {
		return st, fmt.Errorf("control: bad status: %v", err)
	}
	if st.PID <= 0 {
		return st, fmt.Errorf("control: status names no daemon")
	}
	return st, nil
}

// JSONLine is v as one line of JSON, as every JSON report is written.
func JSONLine(v any) ([]byte, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}
