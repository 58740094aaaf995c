package rewind

import (
	"encoding/json"

	"github.com/zerofs/zerofs/rewind/internal/index"
)

// Readable, ExactBytes and FromBytes are how a name that is not UTF-8
// travels in JSON (see rewind/internal/index/pathbytes.go): a readable
// form beside its exact bytes in base64. Other JSON writers of names
// (log --json) use them to follow the checkpoints' convention.
func Readable(s string) string { return index.Readable(s) }

// ExactBytes is the base64 of s when JSON cannot carry s as it is ("" when
// it can).
func ExactBytes(s string) string { return index.ExactBytes(s) }

// FromBytes is the name a "...Bytes" field stands for (text itself when
// the field is empty).
func FromBytes(field, text, b64 string) (string, error) { return index.FromBytes(field, text, b64) }

// ReadableAll, ExactBytesAll and FromBytesAll do the same for a list of
// names and its "...Bytes" sibling list (rewind/internal/index/pathbytes.go).
func ReadableAll(names []string) []string { return index.ReadableAll(names) }

// ExactBytesAll is the "...Bytes" sibling of names (nil when every name is
// valid UTF-8).
func ExactBytesAll(names []string) []string { return index.ExactBytesAll(names) }

// FromBytesAll is the list of names texts and their sibling b64 stand for.
func FromBytesAll(field string, texts, b64 []string) ([]string, error) {
	return index.FromBytesAll(field, texts, b64)
}

// pathChangeJSON is PathChange as JSON holds it.
type pathChangeJSON struct {
	pathChangeFields
	PathBytes string `json:"pathBytes,omitempty"`
}

type pathChangeFields PathChange

// MarshalJSON writes the path with pathBytes when it is not valid UTF-8.
func (c PathChange) MarshalJSON() ([]byte, error) {
	j := pathChangeJSON{pathChangeFields: pathChangeFields(c), PathBytes: ExactBytes(c.Path)}
	j.Path = Readable(c.Path)
	return json.Marshal(j)
}

// UnmarshalJSON reads a PathChange, the exact bytes winning.
func (c *PathChange) UnmarshalJSON(data []byte) error {
	var j pathChangeJSON
	if err := json.Unmarshal(data, &j); err != nil {
		return err
	}
	var err error
	if j.Path, err = FromBytes("path", j.Path, j.PathBytes); err != nil {
		return err
	}
	*c = PathChange(j.pathChangeFields)
	return nil
}

// intentJSON is an intent as the intent record holds it: paths and roots
// that are not valid UTF-8 with their exact bytes, so that a rewind
// finished after a crash acts on the very names it began with.
type intentJSON struct {
	intentFields
	PathsBytes []string `json:"pathsBytes,omitempty"`
	RootsBytes []string `json:"rootsBytes,omitempty"`
}

type intentFields intent

func (in intent) MarshalJSON() ([]byte, error) {
	j := intentJSON{intentFields: intentFields(in), PathsBytes: ExactBytesAll(in.Paths), RootsBytes: ExactBytesAll(in.Roots)}
	j.Paths, j.Roots = ReadableAll(in.Paths), ReadableAll(in.Roots)
	return json.Marshal(j)
}

func (in *intent) UnmarshalJSON(data []byte) error {
	var j intentJSON
	if err := json.Unmarshal(data, &j); err != nil {
		return err
	}
	var err error
	if j.Paths, err = FromBytesAll("paths", j.Paths, j.PathsBytes); err != nil {
		return err
	}
	if j.Roots, err = FromBytesAll("roots", j.Roots, j.RootsBytes); err != nil {
		return err
	}
	*in = intent(j.intentFields)
	return nil
}

// mergeConflictJSON is MergeConflict as JSON holds it.
type mergeConflictJSON struct {
	mergeConflictFields
	PathBytes string `json:"pathBytes,omitempty"`
}

type mergeConflictFields MergeConflict

// MarshalJSON writes the path with pathBytes when it is not valid UTF-8.
func (c MergeConflict) MarshalJSON() ([]byte, error) {
	j := mergeConflictJSON{mergeConflictFields: mergeConflictFields(c), PathBytes: ExactBytes(c.Path)}
	j.Path = Readable(c.Path)
	return json.Marshal(j)
}

// UnmarshalJSON reads a MergeConflict, the exact bytes winning.
func (c *MergeConflict) UnmarshalJSON(data []byte) error {
	var j mergeConflictJSON
	if err := json.Unmarshal(data, &j); err != nil {
		return err
	}
	var err error
	if j.Path, err = FromBytes("path", j.Path, j.PathBytes); err != nil {
		return err
	}
	*c = MergeConflict(j.mergeConflictFields)
	return nil
}

// mergeRequestJSON is MergeRequest as JSON holds it.
type mergeRequestJSON struct {
	mergeRequestFields
	DirBytes       string   `json:"dirBytes,omitempty"`
	WorkspaceBytes string   `json:"workspaceBytes,omitempty"`
	PathsBytes     []string `json:"pathsBytes,omitempty"`
}

type mergeRequestFields MergeRequest

// MarshalJSON writes the request with the exact bytes of names that are
// not valid UTF-8.
func (r MergeRequest) MarshalJSON() ([]byte, error) {
	j := mergeRequestJSON{mergeRequestFields: mergeRequestFields(r), DirBytes: ExactBytes(r.Dir),
		WorkspaceBytes: ExactBytes(r.Workspace), PathsBytes: ExactBytesAll(r.Paths)}
	j.Dir, j.Workspace, j.Paths = Readable(r.Dir), Readable(r.Workspace), ReadableAll(r.Paths)
	return json.Marshal(j)
}

// UnmarshalJSON reads a MergeRequest, the exact bytes winning.
func (r *MergeRequest) UnmarshalJSON(data []byte) error {
	var j mergeRequestJSON
	if err := json.Unmarshal(data, &j); err != nil {
		return err
	}
	var err error
	if j.Dir, err = FromBytes("dir", j.Dir, j.DirBytes); err != nil {
		return err
	}
	if j.Workspace, err = FromBytes("workspace", j.Workspace, j.WorkspaceBytes); err != nil {
		return err
	}
	if j.Paths, err = FromBytesAll("paths", j.Paths, j.PathsBytes); err != nil {
		return err
	}
	*r = MergeRequest(j.mergeRequestFields)
	return nil
}
