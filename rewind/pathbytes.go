package rewind

import (
	"github.com/zerofs/zerofs/record"
)

// intentJSON is an intent as the intent record holds it: paths and roots
// that are not valid UTF-8 with their exact bytes, so that a rewind
// finished after a crash acts on the very names it began with.
type intentJSON struct {
	intentFields
	PathsBytes []string `json:"pathsBytes,omitempty"`
	RootsBytes []string `json:"rootsBytes,omitempty"`
}

type intentFields intent

func (j *intentJSON) names() []record.NameField {
	return []record.NameField{record.Names("paths", &j.Paths, &j.PathsBytes), record.Names("roots", &j.Roots, &j.RootsBytes)}
}

func (in intent) MarshalJSON() ([]byte, error) {
	j := intentJSON{intentFields: intentFields(in)}
	return record.MarshalNames(&j, j.names()...)
}

func (in *intent) UnmarshalJSON(data []byte) error {
	var j intentJSON
	if err := record.UnmarshalNames(data, &j, j.names()...); err != nil {
		return err
	}
	*in = intent(j.intentFields)
	return nil
}
