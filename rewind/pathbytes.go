package rewind

import (
	"encoding/json"

	"github.com/zerofs/zerofs/record"
)

// pathChangeJSON is PathChange as JSON holds it.
type pathChangeJSON struct {
	pathChangeFields
	PathBytes string `json:"pathBytes,omitempty"`
}

type pathChangeFields PathChange

// MarshalJSON writes the path with pathBytes when it is not valid UTF-8.
func (c PathChange) MarshalJSON() ([]byte, error) {
	j := pathChangeJSON{pathChangeFields: pathChangeFields(c), PathBytes: record.ExactBytes(c.Path)}
	j.Path = record.Readable(c.Path)
	return json.Marshal(j)
}

// UnmarshalJSON reads a PathChange, the exact bytes winning.
func (c *PathChange) UnmarshalJSON(data []byte) error {
	var j pathChangeJSON
	if err := json.Unmarshal(data, &j); err != nil {
		return err
	}
	var err error
	if j.Path, err = record.FromBytes("path", j.Path, j.PathBytes); err != nil {
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
	j := intentJSON{intentFields: intentFields(in), PathsBytes: record.ExactBytesAll(in.Paths), RootsBytes: record.ExactBytesAll(in.Roots)}
	j.Paths, j.Roots = record.ReadableAll(in.Paths), record.ReadableAll(in.Roots)
	return json.Marshal(j)
}

func (in *intent) UnmarshalJSON(data []byte) error {
	var j intentJSON
	if err := json.Unmarshal(data, &j); err != nil {
		return err
	}
	var err error
	if j.Paths, err = record.FromBytesAll("paths", j.Paths, j.PathsBytes); err != nil {
		return err
	}
	if j.Roots, err = record.FromBytesAll("roots", j.Roots, j.RootsBytes); err != nil {
		return err
	}
	*in = intent(j.intentFields)
	return nil
}
