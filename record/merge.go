package record

import (
	"errors"
	"fmt"
	"strings"
)

// A merge brings the changes a fork (or, later, a branch) made since its
// base into the workspace, as a rewind of form "merge" (FormMerge): its
// request (Request.Merge), what its session_rewind records
// (RewindPayload.Merge), and its answer (RewindResult.Merge) or refusal.

// MergeRequest asks for the changes a fork made since its base to be
// brought into the workspace (Request.Merge).
type MergeRequest struct {
	// Dir is the fork's directory (absolute).
	Dir string `json:"dir"`
	// Workspace is this workspace's path, as the fork records its source;
	// the front end that serves the request fills it in.
	Workspace string `json:"workspace,omitempty"`
	// Settle is "ours" or "theirs": conflicts on Paths (each with
	// everything beneath it; none: every conflict) take that side.
	Settle string   `json:"settle,omitempty"`
	Paths  []string `json:"paths,omitempty"`
}

// The sides a conflict can be settled with (MergeRequest.Settle).
const (
	SettleOurs   = "ours"
	SettleTheirs = "theirs"
)

// MergeRecord is what a merge brought into the workspace: the changes of
// the fork in Dir since its base (the workspace's state at Base) up to the
// fork's event Head, made in Steps (its steps, oldest first, numbered in
// its own log). Its session_rewind's TargetSequence is the state just
// before the merge.
type MergeRecord struct {
	Dir   string    `json:"dir"`
	Base  Seq       `json:"base"`
	Head  Seq       `json:"head"`
	Steps []StepRef `json:"steps"`
	// Merged lists the paths merged line by line; Settled the conflicts
	// settled by taking one side, SettledAs ("ours" or "theirs").
	Merged    []string `json:"merged,omitempty"`
	Settled   []string `json:"settled,omitempty"`
	SettledAs string   `json:"settledAs,omitempty"`
	// Branch is the branch's ID when Dir is a branch of this workspace
	// (not a fork); Since, the sequence of its last merge before this one
	// (whose state of the branch was this merge's base).
	Branch string `json:"branch,omitempty"`
	Since  Seq    `json:"since,omitempty"`
}

// Side names what a merge brought in: "branch" or "fork".
func (r MergeRecord) Side() string {
	if r.Branch != "" {
		return "branch"
	}
	return "fork"
}

// Made says how the side began: "branched at N" or "forked at N".
func (r MergeRecord) Made() string {
	if r.Branch != "" {
		s := fmt.Sprintf("branched at %d", r.Base)
		if r.Since != 0 {
			s += fmt.Sprintf(", merged at %d", r.Since)
		}
		return s
	}
	return fmt.Sprintf("forked at %d", r.Base)
}

// MergeReport is what a merge did or, dry or refused, would do.
type MergeReport struct {
	Record MergeRecord `json:"record"`
	// Conflicts are the paths both sides changed in ways that do not
	// merge (none were settled): the merge then changed nothing.
	Conflicts []MergeConflict `json:"conflicts,omitempty"`
}

// MergeConflict is one conflicting path with what each side did to it:
// the step of each side that last changed it (nil where that side's
// history does not say).
type MergeConflict struct {
	Path   string   `json:"path"`
	Why    string   `json:"why"`
	Ours   *StepRef `json:"ours,omitempty"`
	Theirs *StepRef `json:"theirs,omitempty"`
}

// MergeConflictError refuses a merge with conflicts; nothing changed. It
// is an ErrConflict (refusal RefusedConflict).
type MergeConflictError struct {
	Dir       string
	Conflicts []MergeConflict
}

func (e *MergeConflictError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "rewind: merge of %s: %d conflicting path(s), nothing changed:", e.Dir, len(e.Conflicts))
	for _, c := range e.Conflicts {
		fmt.Fprintf(&b, " %s (%s);", c.Path, c.Why)
	}
	return strings.TrimSuffix(b.String(), ";")
}

// Unwrap makes a merge conflict an ErrConflict.
func (e *MergeConflictError) Unwrap() error { return ErrConflict }

// ErrNotFork: the directory a merge was given is not a fork of this
// workspace (or its history cannot be read): a bad request.
var ErrNotFork = errors.New("rewind: not a fork of this workspace")

// JSON forms: names that are not UTF-8 with their exact bytes beside them.

type mergeRequestJSON struct {
	mergeRequestFields
	DirBytes       string   `json:"dirBytes,omitempty"`
	WorkspaceBytes string   `json:"workspaceBytes,omitempty"`
	PathsBytes     []string `json:"pathsBytes,omitempty"`
}

type mergeRequestFields MergeRequest

func (j *mergeRequestJSON) names() []NameField {
	return []NameField{Name("dir", &j.Dir, &j.DirBytes), Name("workspace", &j.Workspace, &j.WorkspaceBytes), Names("paths", &j.Paths, &j.PathsBytes)}
}

// MarshalJSON writes the request with the exact bytes of odd names.
func (r MergeRequest) MarshalJSON() ([]byte, error) {
	j := mergeRequestJSON{mergeRequestFields: mergeRequestFields(r)}
	return MarshalNames(&j, j.names()...)
}

// UnmarshalJSON reads a request, the exact bytes winning.
func (r *MergeRequest) UnmarshalJSON(data []byte) error {
	var j mergeRequestJSON
	if err := UnmarshalNames(data, &j, j.names()...); err != nil {
		return err
	}
	*r = MergeRequest(j.mergeRequestFields)
	return nil
}

type mergeRecordJSON struct {
	mergeRecordFields
	DirBytes     string   `json:"dirBytes,omitempty"`
	MergedBytes  []string `json:"mergedBytes,omitempty"`
	SettledBytes []string `json:"settledBytes,omitempty"`
}

type mergeRecordFields MergeRecord

func (j *mergeRecordJSON) names() []NameField {
	return []NameField{Name("dir", &j.Dir, &j.DirBytes), Names("merged", &j.Merged, &j.MergedBytes), Names("settled", &j.Settled, &j.SettledBytes)}
}

// MarshalJSON writes the record with the exact bytes of odd names.
func (m MergeRecord) MarshalJSON() ([]byte, error) {
	j := mergeRecordJSON{mergeRecordFields: mergeRecordFields(m)}
	return MarshalNames(&j, j.names()...)
}

// UnmarshalJSON reads a record, the exact bytes winning.
func (m *MergeRecord) UnmarshalJSON(data []byte) error {
	var j mergeRecordJSON
	if err := UnmarshalNames(data, &j, j.names()...); err != nil {
		return err
	}
	*m = MergeRecord(j.mergeRecordFields)
	return nil
}

type mergeConflictJSON struct {
	mergeConflictFields
	PathBytes string `json:"pathBytes,omitempty"`
}

type mergeConflictFields MergeConflict

// MarshalJSON writes the path with pathBytes when it is not valid UTF-8.
func (c MergeConflict) MarshalJSON() ([]byte, error) {
	j := mergeConflictJSON{mergeConflictFields: mergeConflictFields(c)}
	return MarshalNames(&j, Name("path", &j.Path, &j.PathBytes))
}

// UnmarshalJSON reads a conflict, the exact bytes winning.
func (c *MergeConflict) UnmarshalJSON(data []byte) error {
	var j mergeConflictJSON
	if err := UnmarshalNames(data, &j, Name("path", &j.Path, &j.PathBytes)); err != nil {
		return err
	}
	*c = MergeConflict(j.mergeConflictFields)
	return nil
}
